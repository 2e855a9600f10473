"""``render review OUTPUT [--out PNG]``: the contact sheet of a render's weakest frames and the
timeline of its tracks (:mod:`.sheet`), from the quality section of its report; prints one line
per tile and where the sheet went. OUTPUT may also be the report (``OUTPUT.report.json``)."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Sequence

import cv2
import numpy as np

from ..errors import RenderFailed, UsageError
from ..files import write_atomic
from ..media import probe
from .frames import read_output_frames
from .reports import output_and_report, quality_of
from .sheet import Tile, draw_sheet, pick_tiles

USAGE = "usage: render review OUTPUT [--out PNG]"
SHEET_SUFFIX = ".review.png"


@dataclass
class Sheet:
    """A drawn contact sheet, the tiles on it and the findings left off it."""

    image: np.ndarray
    tiles: list[Tile]
    left_out: int
    summary: str


def review_sheet(output: Path) -> Sheet:
    """The contact sheet of ``output`` (a video render output, or its report)."""
    output, report = output_and_report(output)
    section = quality_of(output, report)
    tiles, left_out = pick_tiles(section)
    info = probe(output)
    frames = read_output_frames(info, [t.frame for t in tiles]) if tiles else {}
    image = draw_sheet(output.name, section, tiles, frames, left_out)
    return Sheet(image, tiles, left_out, str(section.get("summary") or section.get("verdict")))


def write_png(path: Path, image: np.ndarray) -> None:
    ok, data = cv2.imencode(".png", image)
    if not ok:
        raise RenderFailed(f"cannot encode the contact sheet {path.name}")
    try:
        write_atomic(path, data.tobytes())
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def parse(args: Sequence[str]) -> tuple[Path, Path | None]:
    """(OUTPUT, --out PNG or None) from the command's words."""
    words, out = [], None
    rest = list(args)
    while rest:
        word = rest.pop(0)
        if word == "--out":
            if not rest:
                raise UsageError(f"--out needs a PNG path; {USAGE}")
            out = Path(rest.pop(0))
        elif word.startswith("--out="):
            out = Path(word.split("=", 1)[1])
        elif word.startswith("-"):
            raise UsageError(f"unknown option {word}; {USAGE}")
        else:
            words.append(word)
    if len(words) != 1:
        raise UsageError(USAGE)
    if out is not None and out.suffix.lower() != ".png":
        raise UsageError(f"--out {out}: the contact sheet is a .png file")
    return Path(words[0]), out


def main(args: Sequence[str], stream: IO[str] | None = None) -> int:
    stream = stream or sys.stdout
    path, out = parse(args)
    sheet = review_sheet(path)
    output, _ = output_and_report(path)
    out = out or output.with_name(output.name + SHEET_SUFFIX)
    write_png(out, sheet.image)
    for tile in sheet.tiles:
        stream.write(tile.line() + "\n")
    if sheet.left_out:
        stream.write(f"{sheet.left_out} more findings in the report\n")
    stream.write(f"{output.name}: {sheet.summary}; contact sheet {out}\n")
    return 0
