"""The contact sheet of ``render review``: the weakest frames of a render as tiles — the face
region of the output frame enlarged, its time code and frames, the track and why — above the
timeline of every track (:mod:`.timeline`). A render with nothing to look at still gets a
sheet: its verdict and the timeline."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import cv2
import numpy as np

from .timeline import GREEN, INK, RED, WHITE, draw_timeline, text

TILE = 192              # px of the enlarged face
COLUMNS = 5
GAP = 12
CAPTION = 52            # px of text under a tile
HEADER = 58
MAX_TILES = 20
ZOOM = 1.8              # the tile shows the face box this many times over


@dataclass(frozen=True)
class Tile:
    """One finding of one track, shown at its frame (the output's)."""

    track: int
    finding: Mapping[str, Any]

    @property
    def frame(self) -> int:
        return int(self.finding["frame"])

    def line(self) -> str:
        """The tile in one line of text: the track, why, and exactly which frames."""
        a, b = self.finding["frames"]
        frames = f"frame {a}" if a == b else f"frames {a}-{b}"
        sampled = self.finding.get("sampled")
        if sampled and len(sampled) > 1:
            frames += "; sampled " + ", ".join(map(str, sampled))
        return f"track {self.track}: {self.finding['text']} [{frames}]"


def pick_tiles(section: Mapping[str, Any], limit: int = MAX_TILES) -> tuple[list[Tile], int]:
    """The ``limit`` weakest findings (the furthest past their thresholds) in frame order, and
    how many were left out."""
    tiles = [Tile(t["track"], f) for t in section.get("tracks") or [] for f in t.get("look") or []]
    weakest = sorted(tiles, key=lambda t: (-float(t.finding.get("severity", 0)), t.frame,
                                          t.track))[:limit]
    return sorted(weakest, key=lambda t: (t.frame, t.track)), len(tiles) - len(weakest)


def face_region(frame: np.ndarray, box: Sequence[float], side: int = TILE) -> np.ndarray:
    """The square around ``box`` (``ZOOM`` times its size) in ``frame``, scaled to ``side`` px,
    with the box drawn in."""
    x1, y1, x2, y2 = (float(v) for v in box)
    half = max(x2 - x1, y2 - y1, 8.0) * ZOOM / 2
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    scale = side / (2 * half)
    matrix = np.float32([[scale, 0, side / 2 - cx * scale], [0, scale, side / 2 - cy * scale]])
    tile = cv2.warpAffine(frame, matrix, (side, side), flags=cv2.INTER_CUBIC,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=(60, 60, 60))
    corner = lambda x, y: (int(round(x * scale + matrix[0, 2])),       # noqa: E731
                           int(round(y * scale + matrix[1, 2])))
    cv2.rectangle(tile, corner(x1, y1), corner(x2, y2), (0, 220, 255), 1, cv2.LINE_AA)
    return tile


def _caption(tile: Tile) -> tuple[str, str]:
    f = tile.finding
    a, b = f["frames"]
    when = f"{f['at']}  " + (f"frame {a}" if a == b else
                              f"frames {a}-{b}, this {tile.frame}")
    value = float(f["value"])
    why = {"missed": f"missed {int(value)} frames", "distance": f"distance {value:.2f}",
           "jump": f"jump {value:.2f} widths", "colour": f"colour dE {value:.0f}"}[f["why"]]
    return when, f"track {tile.track}: {why}"


def draw_sheet(title: str, section: Mapping[str, Any], tiles: Sequence[Tile],
               frames: Mapping[int, np.ndarray], left_out: int = 0) -> np.ndarray:
    """The whole sheet: header, the ``tiles`` (their output ``frames`` by number), timeline."""
    width = GAP + COLUMNS * (TILE + GAP)
    rows = -(-len(tiles) // COLUMNS)
    body = rows * (TILE + CAPTION + GAP) if tiles else 44
    timeline = draw_timeline(section, width)
    sheet = np.full((HEADER + body + 24 + timeline.shape[0], width, 3), WHITE, np.uint8)
    verdict = section.get("summary") or section.get("verdict", "")
    ok = section.get("verdict") == "ok"
    text(sheet, f"{title}: {verdict}", GAP, 26, 0.7, GREEN if ok else RED if verdict else INK, 2)
    limits = section.get("thresholds") or {}
    text(sheet, "thresholds: " + ", ".join(f"{k} {v:g}" for k, v in limits.items()
                                            if isinstance(v, (int, float)))
         + (f"; {left_out} more findings in the report" if left_out else ""), GAP, 48, 0.42)
    if not tiles:
        message = "every track ok: no frame to look at" if ok else \
            "nothing reviewed" if section.get("verdict") == "unreviewed" else ""
        text(sheet, message, GAP, HEADER + 26, 0.55, GREEN if ok else INK, 1)
    for k, tile in enumerate(tiles):
        x = GAP + (k % COLUMNS) * (TILE + GAP)
        y = HEADER + (k // COLUMNS) * (TILE + CAPTION + GAP)
        frame = frames.get(tile.frame)
        if frame is not None:
            sheet[y:y + TILE, x:x + TILE] = face_region(frame, tile.finding["box"])
        when, why = _caption(tile)
        text(sheet, when, x, y + TILE + 18, 0.42)
        text(sheet, why, x, y + TILE + 38, 0.42, RED)
    top = HEADER + body + 24
    sheet[top:top + timeline.shape[0]] = timeline
    return sheet
