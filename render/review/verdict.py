"""The review's rules: which of a track's frames need a look, and why, in words.

A track is "ok" unless one of these holds; each finding names its frames:

- **missed**: the track lost its face for ``review.misses`` frames in a row or more;
- **distance**: a sampled face is further than ``review.distance`` from the source (consecutive
  flagged samples make one finding);
- **jump**: the crop moved more than ``review.jump`` face widths from one frame to the next;
- **colour**: a sampled face's mean colour moved more than ``review.colour`` (ΔE) from the
  target's.

Frames are the output's (from 0), times its time codes at the render's frame rate.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Iterable, Mapping, Sequence

WHYS = ("missed", "distance", "jump", "colour")


@dataclass(frozen=True)
class Thresholds:
    every: int
    distance: float
    misses: int
    jump: float
    colour: float

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> "Thresholds":
        """From a plan's or a report's config (its ``review.*`` keys)."""
        return cls(every=int(config["review.every"]), distance=float(config["review.distance"]),
                   misses=int(config["review.misses"]), jump=float(config["review.jump"]),
                   colour=float(config["review.colour"]))

    def limit(self, why: str) -> float:
        return float(getattr(self, "misses" if why == "missed" else why))


@dataclass(frozen=True)
class Clock:
    """Target frame numbers as the output's frames and time codes."""

    start: int            # the target's frame that is the output's frame 0
    fps: Fraction

    def frame(self, target_frame: int) -> int:
        return target_frame - self.start

    def at(self, target_frame: int) -> str:
        return timecode(self.frame(target_frame) / float(self.fps))


def timecode(seconds: float) -> str:
    """00:41.2, or 1:02:03.4 from an hour on (tenths, rounded down: the frame is inside it)."""
    tenths = int(max(0.0, seconds) * 10 + 1e-6)
    minutes, rest = divmod(tenths, 600)
    hours, minutes = divmod(minutes, 60)
    text = f"{minutes:02d}:{rest // 10:02d}.{rest % 10}"
    return f"{hours}:{text}" if hours else text


@dataclass(frozen=True)
class Finding:
    """One thing to look at: ``why``, the target frames it spans, the frame that shows it best,
    its size (frames missed, the worst distance, jump or ΔE) and the face's box there."""

    why: str
    first: int
    last: int
    frame: int
    value: float
    box: Sequence[float]
    sampled: tuple[int, ...] = ()

    def severity(self, limits: Thresholds) -> float:
        """How far past its threshold (1: just past): ranks the weakest frames."""
        return self.value / max(limits.limit(self.why), 0.01)

    def text(self, limits: Thresholds, clock: Clock) -> str:
        start, end = clock.at(self.first), clock.at(self.last)
        if self.why == "missed":
            n = int(self.value)
            return f"missed {n} frame{'s' if n != 1 else ''} at {start}"
        at = start if end == start else f"{start}–{end}"
        if self.why == "distance":
            many = f", {len(self.sampled)} samples" if len(self.sampled) > 1 else ""
            return (f"far from the source at {at}{many} ({'up to ' if many else ''}"
                    f"{self.value:.2f} > {limits.distance:g})")
        if self.why == "jump":
            return f"the crop jumped {self.value:.2f} face widths at {at} (> {limits.jump:g})"
        return f"colour shifted by ΔE {self.value:.0f} at {at} (> {limits.colour:g})"


Point = tuple[int, float, Sequence[float]]        # (target frame, value, box)


def runs_over(points: Iterable[Point], limit: float, why: str, *,
              consecutive: Callable[[int, int], bool], sampled: bool = False) -> list[Finding]:
    """Findings of the ``points`` above ``limit``: neighbours (``consecutive(a, b)`` of two
    points' frames, both above it) make one, shown at its worst point."""
    out: list[Finding] = []
    run: list[Point] = []
    previous: int | None = None

    def close() -> None:
        if run:
            worst = max(run, key=lambda p: (p[1], -p[0]))
            out.append(Finding(why, run[0][0], run[-1][0], worst[0], worst[1], worst[2],
                               tuple(p[0] for p in run) if sampled else ()))
            run.clear()

    for point in points:
        if point[1] > limit:
            if run and not consecutive(previous, point[0]):
                close()
            run.append(point)
        else:
            close()
        previous = point[0]
    close()
    return out


def findings(*, misses: Iterable[tuple[int, int, Sequence[float]]], jumps: Iterable[Point],
             samples: Sequence[tuple[int, float | None, float | None, Sequence[float]]],
             limits: Thresholds) -> list[Finding]:
    """Every finding of one track, in frame order: ``misses`` (first, last missed frame, the box
    before), ``jumps`` (each frame whose previous frame had the face), ``samples`` (frame,
    distance or None, colour shift or None, box)."""
    out = [Finding("missed", a, b, a, float(b - a + 1), box)
           for a, b, box in misses if b - a + 1 >= limits.misses]
    out += runs_over(jumps, limits.jump, "jump", consecutive=lambda a, b: b == a + 1)
    for why, k in (("distance", 1), ("colour", 2)):
        values = [(s[0], s[k], s[3]) for s in samples if s[k] is not None]
        out += runs_over(values, limits.limit(why), why, consecutive=lambda a, b: True,
                         sampled=True)
    return sorted(out, key=lambda f: (f.first, WHYS.index(f.why)))


def summary(tracks_to_look_at: int) -> str:
    """The verdict in a few words: "ok" or "look: 2 tracks"."""
    if not tracks_to_look_at:
        return "ok"
    return f"look: {tracks_to_look_at} track{'s' if tracks_to_look_at != 1 else ''}"
