"""The timeline under the contact sheet: one strip per track over the whole output — its sampled
identity distance as a line with the threshold dashed, the frames it had a face as a grey band,
its misses in red, and a red tick over each finding — with time codes along the bottom."""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping

import cv2
import numpy as np

from ..review.verdict import timecode

FONT = cv2.FONT_HERSHEY_SIMPLEX
LABEL = 96              # px left of the plot for the track's name
ROW = 86                # px per track
AXIS = 28               # px of time codes under the strips
MARGIN = 12

WHITE, INK, GREY = (255, 255, 255), (40, 40, 40), (205, 205, 205)
LINE, LIMIT, RED, GREEN = (170, 90, 20), (0, 140, 255), (40, 40, 220), (60, 160, 60)


def text(image: np.ndarray, words: str, x: int, y: int, scale: float = 0.42,
         colour: tuple[int, int, int] = INK, thick: int = 1) -> None:
    """``words`` at (x, y) (the baseline), in ASCII: the Hershey fonts have no Δ or dash."""
    ascii_words = words.replace("ΔE", "dE").replace("–", "-").encode("ascii", "replace").decode()
    cv2.putText(image, ascii_words, (x, y), FONT, scale, colour, thick, cv2.LINE_AA)


def _dashed(image: np.ndarray, y: int, x0: int, x1: int, colour: tuple[int, int, int]) -> None:
    for x in range(x0, x1, 8):
        cv2.line(image, (x, y), (min(x + 4, x1), y), colour, 1, cv2.LINE_AA)


def draw_timeline(section: Mapping[str, Any], width: int) -> np.ndarray:
    """The timeline of ``section``'s tracks, ``width`` px wide."""
    tracks = section.get("tracks") or []
    frames = max(1, int(section.get("frames") or 1))
    fps = _fps(section.get("fps"))
    limit = float((section.get("thresholds") or {}).get("distance", 0.7))
    height = MARGIN + ROW * max(1, len(tracks)) + AXIS
    image = np.full((height, width, 3), WHITE, np.uint8)
    x0, x1 = LABEL, width - MARGIN

    def x_of(frame: float) -> int:
        return int(round(x0 + (x1 - x0) * min(max(frame, 0.0), frames) / frames))

    if not tracks:
        text(image, "no face was swapped", x0, MARGIN + ROW // 2)
    for row, track in enumerate(tracks):
        top = MARGIN + row * ROW
        plot_top, plot_bottom = top + 14, top + ROW - 22
        verdict = track.get("verdict", "ok")
        text(image, f"track {track['track']}", 6, top + 30, 0.45, INK, 1)
        text(image, verdict, 6, top + 50, 0.45, RED if verdict == "look" else GREEN, 1)
        cv2.rectangle(image, (x0, plot_top), (x1, plot_bottom), GREY, 1)
        first, last = track["frames"]
        band = plot_bottom + 4
        cv2.rectangle(image, (x_of(first), band), (x_of(last + 1), band + 5), GREY, -1)
        for a, b in track.get("misses") or []:
            cv2.rectangle(image, (x_of(a), band), (max(x_of(b + 1), x_of(a) + 1), band + 5),
                          RED, -1)
        samples = [(n, d) for n, d, _ in track.get("samples") or [] if d is not None]
        top_value = max([1.0, limit * 1.5] + [d for _, d in samples])

        def y_of(value: float) -> int:
            return int(round(plot_bottom - (plot_bottom - plot_top) * value / top_value))

        _dashed(image, y_of(limit), x0, x1, LIMIT)
        points = np.array([(x_of(n + 0.5), y_of(d)) for n, d in samples], np.int32)
        if len(points) > 1:
            cv2.polylines(image, [points.reshape(-1, 1, 2)], False, LINE, 1, cv2.LINE_AA)
        for x, y in points:
            cv2.circle(image, (int(x), int(y)), 2, LINE, -1, cv2.LINE_AA)
        for finding in track.get("look") or []:
            a, b = finding["frames"]
            cv2.rectangle(image, (x_of(a), plot_top - 6), (max(x_of(b + 1), x_of(a) + 2),
                                                           plot_top - 2), RED, -1)
    axis = height - AXIS + 6
    cv2.line(image, (x0, axis), (x1, axis), INK, 1)
    for k in range(6):
        frame = frames * k / 5
        x = x_of(frame)
        cv2.line(image, (x, axis), (x, axis + 4), INK, 1)
        label = timecode(frame / fps)
        text(image, label, min(max(x - 20, 0), width - 60), axis + 17, 0.38)
    text(image, f"distance to the source (dashed: {limit:g}); red: misses and findings",
         x0, 10, 0.36, (110, 110, 110))
    return image


def _fps(value: Any) -> float:
    try:
        rate = float(Fraction(str(value)))
    except (ValueError, ZeroDivisionError):
        rate = 25.0
    return rate if rate > 0 else 25.0
