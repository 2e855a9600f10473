"""The report's ``quality`` section: the segments' review records merged into one entry per face
track over the whole render, each with its counts, misses, worst jump, sampled identity
distances and colour shifts, and a verdict ("ok", or "look" with the findings of
``render.review.verdict``).

A pure function of the plan and the records, with values rounded once, so the section (and its
SHA-256) is the same whichever schedule rendered the segments. Frames are the output's, from 0.
"""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..face_window import DETECTED, FILLED, TRACKED
from .linking import LINK_SECONDS, FaceAt, ReviewTrack, faces_of, link
from .measure import key_point_jump
from .verdict import Clock, Finding, Thresholds, findings, summary

if TYPE_CHECKING:
    from ..plan import RenderPlan

SECTION_VERSION = 1


class _Frames:
    """Turns target frames and decoded-frame boxes into the output's frames, times and pixels."""

    def __init__(self, plan: RenderPlan) -> None:
        self.clock = Clock(plan.start, Fraction(plan.fps))
        out_w, out_h = plan.output_size
        self.scale = (out_w / plan.width, out_h / plan.height)

    def box(self, box: Sequence[float]) -> list[int]:
        sx, sy = self.scale
        return [int(round(v * (sx if k % 2 == 0 else sy))) for k, v in enumerate(box)]


def _unreviewed(plan: RenderPlan, records: Mapping[int, Any]) -> list[tuple[int, int]]:
    """Target frame ranges [a, b) of the segments without a record, neighbours joined."""
    out: list[tuple[int, int]] = []
    for seg in plan.segments:
        if records.get(seg.index) is None:
            if out and out[-1][1] == seg.start:
                out[-1] = (out[-1][0], seg.end)
            else:
                out.append((seg.start, seg.end))
    return out


def _misses(faces: list[FaceAt], unreviewed: list[tuple[int, int]]
            ) -> list[tuple[int, int, Sequence[float]]]:
    """The runs of frames between two faces of a track (first, last, the box before), except
    those reaching into frames nobody reviewed."""
    out = []
    for before, after in zip(faces, faces[1:]):
        a, b = before.frame + 1, after.frame - 1
        if b >= a and not any(a < end and start <= b for start, end in unreviewed):
            out.append((a, b, before.box))
    return out


def _jumps(faces: list[FaceAt]) -> list[tuple[int, float, Sequence[float]]]:
    """Each face's key point movement since the previous frame's (where that frame had it)."""
    return [(after.frame, round(key_point_jump(before.kps, after.kps, before.box), 4), after.box)
            for before, after in zip(faces, faces[1:]) if after.frame == before.frame + 1]


def _finding(f: Finding, limits: Thresholds, frames: _Frames) -> dict[str, Any]:
    clock = frames.clock
    out = {"why": f.why, "frames": [clock.frame(f.first), clock.frame(f.last)],
           "frame": clock.frame(f.frame), "at": clock.at(f.first), "value": round(f.value, 3),
           "severity": round(f.severity(limits), 3), "box": frames.box(f.box),
           "text": f.text(limits, clock)}
    if f.sampled:
        out["sampled"] = [clock.frame(n) for n in f.sampled]
    return out


def _worst(points: list[tuple[int, float]], frames: _Frames) -> dict[str, Any] | None:
    if not points:
        return None
    frame, value = max(points, key=lambda p: (p[1], -p[0]))
    return {"frame": frames.clock.frame(frame), "value": round(value, 3)}


def track_section(track: ReviewTrack, limits: Thresholds, frames: _Frames,
                  unreviewed: list[tuple[int, int]]) -> dict[str, Any]:
    """One track's entry: counts, misses, worst jump, samples and its verdict."""
    faces = track.faces
    clock = frames.clock
    misses = _misses(faces, unreviewed)
    jumps = _jumps(faces)
    samples = [(f.frame, f.distance, f.colour, f.box) for f in faces if f.sampled]
    found = findings(misses=misses, jumps=jumps, samples=samples, limits=limits)
    hows = [f.how for f in faces]
    return {
        "track": track.id,
        "frames": [clock.frame(faces[0].frame), clock.frame(faces[-1].frame)],
        "swapped": len(faces),
        "detected": hows.count(DETECTED), "tracked": hows.count(TRACKED),
        "filled": hows.count(FILLED),
        "missed": sum(b - a + 1 for a, b, _ in misses),
        "misses": [[clock.frame(a), clock.frame(b)] for a, b, _ in misses],
        "worst_jump": _worst([(n, v) for n, v, _ in jumps], frames),
        "worst_distance": _worst([(n, d) for n, d, _, _ in samples if d is not None], frames),
        "worst_colour": _worst([(n, c) for n, _, c, _ in samples if c is not None], frames),
        "samples": [[clock.frame(n), None if d is None else round(d, 3),
                     None if c is None else round(c, 1)] for n, d, c, _ in samples],
        "verdict": "look" if found else "ok",
        "look": [_finding(f, limits, frames) for f in found],
    }


def quality_section(plan: RenderPlan, records: Mapping[int, Mapping[str, Any] | None]
                    ) -> dict[str, Any]:
    """The quality section of ``plan``'s render from its segments' ``records`` (segment index →
    record, None where a segment has none)."""
    limits = Thresholds.of(plan.config)
    frames = _Frames(plan)
    unreviewed = _unreviewed(plan, records)
    gap = max(1, int(round(LINK_SECONDS * float(Fraction(plan.fps)))))
    tracks = [track_section(t, limits, frames, unreviewed)
              for t in link(faces_of(records), gap)]
    looks = sum(t["verdict"] == "look" for t in tracks)
    reviewed = len(unreviewed) == 0 or any(r is not None for r in records.values())
    return {
        "version": SECTION_VERSION,
        "verdict": ("look" if looks else "ok") if reviewed else "unreviewed",
        "summary": summary(looks) if reviewed else "not reviewed",
        "frames": plan.frames,
        "fps": str(plan.fps),
        "size": list(plan.output_size),
        "thresholds": {"every": limits.every, "distance": limits.distance,
                       "misses": limits.misses, "jump": limits.jump, "colour": limits.colour},
        "unreviewed": [[frames.clock.frame(a), frames.clock.frame(b) - 1] for a, b in unreviewed],
        "tracks": tracks,
    }
