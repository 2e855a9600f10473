#!/usr/bin/env python3
"""Write a demo folder: a 10 s 720p clip with audio, a source face, and stand-in models.

The stand-in models are those of the tests and the benchmark (``render.standins``): tiny ONNX
graphs with the production models' exact I/O contracts, so the whole pipeline runs without
downloading real weights. They "swap" a face by tinting it; real faces need the real models
(render models fetch). The frame enhancer's stand-in doubles the frame (nearest neighbour), the
background remover's matte is the picture's green channel.

    python scripts/make_demo.py [DIR]        (default: ./demo)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from render import standins
from render.standins import media
from render.standins.frame_enhancers import write_frame_enhancers
from render.standins.matting import write_matting


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/make_demo.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", nargs="?", default="demo", help="the folder to write (./demo)")
    out = Path(parser.parse_args(argv).dir)
    (out / "in").mkdir(parents=True, exist_ok=True)
    (out / "out").mkdir(parents=True, exist_ok=True)
    standins.write_standins(out / "models")
    # the whole-frame processors' defaults (processors=background,swap,frame_enhance)
    write_frame_enhancers(out / "models", {"real_esrgan_x2": {"scale": 2, "tile": 256, "pad": 16,
                                                             "context": 8}})
    write_matting(out / "models", "modnet", size=512, mean=(0.5,) * 3, std=(0.5,) * 3)
    media.make_source_image(out / "in" / "source.jpg")
    media.make_clip(out / "in" / "clip.mp4", width=1280, height=720, seconds=10.0)
    sys.stdout.write(f"wrote {out}/in/clip.mp4 (10 s, 1280x720, audio), {out}/in/source.jpg and "
                     f"stand-in models in {out}/models\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
