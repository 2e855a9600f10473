"""Each segment's review record beside the committed segment in the work folder
(``seg-0003.mp4.review.json``), written temp → fsync → rename before the segment is committed:
a committed segment always has the record of the pass that made it, so a resumed render, a
render of several segments at once and the shards of a cluster render leave the same records.
The assembly reads them back (:func:`render_quality`) before the work folder goes."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files import write_atomic
from .recorder import RECORD_VERSION, SegmentReview

if TYPE_CHECKING:
    from ..plan import RenderPlan, SegmentPlan

log = logging.getLogger(__name__)

SUFFIX = ".review.json"


def record_path(work_dir: str | Path, segment: SegmentPlan) -> Path:
    return Path(work_dir) / f"{segment.name}{SUFFIX}"


def save(work_dir: str | Path, segment: SegmentPlan, review: SegmentReview) -> None:
    """Write ``review``'s record of ``segment`` (before the segment is committed)."""
    data = review.record(segment.index, segment.start, segment.end)
    write_atomic(record_path(work_dir, segment), json.dumps(data, separators=(",", ":")).encode())


def load(work_dir: str | Path, segment: SegmentPlan) -> dict[str, Any] | None:
    """The record of ``segment``; None where there is none or it is not of this segment (the
    segment was rendered with review.enabled=false, or by an older version)."""
    path = record_path(work_dir, segment)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("review record %s is unreadable (%s): segment %d is left out of the review",
                    path.name, exc, segment.index)
        return None
    if not isinstance(data, dict) or data.get("version") != RECORD_VERSION or \
            data.get("frames") != [segment.start, segment.end]:
        return None
    return data


def render_quality(plan: RenderPlan) -> dict[str, Any] | None:
    """The report's quality section from the committed segments' records (None: review off)."""
    from .quality import quality_section

    if not plan.config.get("review.enabled", False) or plan.kind != "video":
        return None
    return quality_section(plan, {s.index: load(plan.work_dir, s) for s in plan.segments})
