#!/usr/bin/env python3
"""Write a demo folder: a 10 s 720p clip with audio, a source face, and stand-in models.

The stand-in models are those of the tests and the benchmark (``render.standins``): tiny ONNX
graphs with the production models' exact I/O contracts, so the whole pipeline runs without
downloading real weights. They "swap" a face by tinting it; real faces need the real models
(render models fetch).

    python scripts/make_demo.py [DIR]        (default: ./demo)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from render import standins
from render.standins import media


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/make_demo.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", nargs="?", default="demo", help="the folder to write (./demo)")
    out = Path(parser.parse_args(argv).dir)
    (out / "in").mkdir(parents=True, exist_ok=True)
    (out / "out").mkdir(parents=True, exist_ok=True)
    standins.write_standins(out / "models")
    media.make_source_image(out / "in" / "source.jpg")
    media.make_clip(out / "in" / "clip.mp4", width=1280, height=720, seconds=10.0)
    sys.stdout.write(f"wrote {out}/in/clip.mp4 (10 s, 1280x720, audio), {out}/in/source.jpg and "
                     f"stand-in models in {out}/models\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
