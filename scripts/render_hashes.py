#!/usr/bin/env python3
"""Render a fixed set of cases from a demo folder and print each output's SHA-256.

For refactors that must not change an output byte: run it before and after and compare.

    python scripts/make_demo.py DEMO
    python scripts/render_hashes.py DEMO WORK      (WORK is emptied first)

Cases: a video of several segments, a video of one segment, the enhancer with a feathered mask,
detection every 3 frames with every face swapped, an image, and a shard pair plus its assembly.
Outputs are marked (metadata tag and C2PA manifest): the signing certificate is made once in
DEMO/cache, so runs that share the DEMO folder sign with the same key and compare byte for byte.
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

CASES: dict[str, list[str]] = {
    "video-4-segments.mp4": ["profile=low", "trim=0-4", "segment.seconds=1"],
    "video-1-segment.mp4": ["profile=low", "trim=0-2"],
    "enhancer-feather.mp4": ["profile=moderate", "trim=0-2", "segment.seconds=1",
                             "enhance.enabled=true", "mask.type=feather"],
    "every3-many.mkv": ["profile=low", "trim=2-4", "detect.every=3", "select.mode=many"],
    "image.png": ["profile=high"],
}
SHARDED = ("sharded.mp4", ["profile=low", "trim=0-4", "segment.seconds=1"])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def render(*args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "render", *args], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise SystemExit(f"render {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/render_hashes.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("demo", help="a folder made by scripts/make_demo.py")
    parser.add_argument("work", help="the folder to render into (emptied first)")
    args = parser.parse_args(argv)
    demo, work = Path(args.demo).resolve(), Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    (work / "out").mkdir(parents=True)
    clip, source = demo / "in" / "clip.mp4", demo / "in" / "source.jpg"
    image = work / "frame.png"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(clip), "-vf", "select=eq(n\\,30)",
                    "-frames:v", "1", str(image)], check=True)
    common = [f"models.dir={demo / 'models'}", f"cache_dir={demo / 'cache'}", "lock.device=none",
              "progress=off", f"source={source}"]
    for name, keys in CASES.items():
        target = image if name.endswith(".png") else clip
        render(*common, *keys, f"target={target}", f"output={work / 'out' / name}")
    name, keys = SHARDED
    k = [*common, *keys, f"target={clip}", f"output={work / 'out' / name}"]
    render(*k, "shard=1/2")
    render(*k, "shard=0/2")
    render("assemble", *k)
    for out in sorted((work / "out").iterdir()):
        if not out.name.startswith(".") and not out.name.endswith(".json"):
            print(f"{sha256(out)}  {out.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
