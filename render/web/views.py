"""A job as the pages and the API show it: its phase, queue place, progress (frames, fps, ETA,
stage), files and links; messages in the student's terms unless the teacher asks."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from ..job_progress import describe_progress
from ..media.formats import IMAGE_FORMATS
from ..report import report_path
from ..spool import FINAL, Job
from .extras import describe as describe_extras
from .verdicts import VERDICTS, recorded_reports
from .wording import for_student, people

PROGRESS_KEYS = ("segments_done", "segments_total", "frames_done", "frames_total", "fps", "eta_s",
                 "device")


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


def ts(text: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return None


def classroom_meta(job: Job) -> dict[str, Any] | None:
    meta = ((job.spec or {}).get("meta") or {})
    found = meta.get("classroom")
    return found if isinstance(found, dict) else None


def job_view(job: Job, *, order: Mapping[str, int], retention: int, output: Path | None,
             cancelling: bool, full: bool, wait_s: float | None = None) -> dict[str, Any]:
    c = classroom_meta(job) or {}
    meta = (job.spec or {}).get("meta") or {}
    p = job.progress or {}
    phase = job.state
    if job.state == "running":
        if cancelling:
            phase = "cancelling"
        elif job.worker_gone:
            phase = "worker gone"
        else:
            phase = p.get("state") or "starting"
    result = job.result or {}
    finished = ts(result.get("finished")) if job.state in FINAL else None
    if job.state in FINAL and finished is None:
        finished = job.changed or None
    report = report_path(output) if output is not None else None
    done = job.state == "done" and output is not None and output.is_file()
    live = job.state == "running" and not job.worker_gone
    reported = report is not None and report.is_file()
    review = VERDICTS.of(job, [report] if reported else [] if c else recorded_reports(job))
    video = output is not None and output.suffix.lower() not in IMAGE_FORMATS
    words = (lambda text: text) if full or not c else \
        (lambda text: for_student(text, job.settings, c))
    return {
        "id": job.id,
        "owner": job.owner,
        "classroom": bool(c),
        "state": job.state,
        "phase": phase,
        "submitted": job.submitted,
        "profile": job.settings.get("profile"),
        #: what was asked beside the swap: "upscale", "age +30", "expression kept", ...
        "extras": describe_extras(job.settings),
        "source": c.get("source"),
        "target": c.get("target"),
        #: whose faces it puts in: "2 photos of one person", "2 people" (None: one photo)
        "mode": people(job.settings, c),
        "source2": c.get("source2"),
        #: the voice the lips move to (lip sync): {file, name, bytes, seconds}
        "voice": c.get("voice"),
        #: a second person: the faces clicked on the target, as the renderer's references
        "references": [c[k] for k in ("reference1", "reference2") if isinstance(c.get(k), dict)],
        "consent": bool((meta.get("consent") or {}).get("given")),
        "queue_position": order.get(job.id),
        "queue_length": len(order),
        #: seconds until it may start, estimated from the last finished jobs (None: no estimate)
        "wait_s": round(wait_s) if wait_s is not None and job.state == "queued" else None,
        "waiting_for": p.get("waiting") if phase == "waiting" else None,
        "progress": ({"stage": p.get("state"), **{k: p.get(k) for k in PROGRESS_KEYS}}
                     if live and (p.get("segments_total") or p.get("frames_total")) else None),
        "message": words(describe_progress(job)),
        "error": words(result.get("error")) if job.state in ("failed", "cancelled") else None,
        "finished": iso(finished),
        "expires": iso(finished + retention * 86400) if finished and c else None,
        "output": f"/api/jobs/{job.id}/output" if done else None,
        "kind": ("image" if output.suffix.lower() in IMAGE_FORMATS else "video")
        if output is not None else None,
        "poster": f"/api/jobs/{job.id}/poster" if done else None,
        "report": f"/api/jobs/{job.id}/report" if reported else None,
        "card": f"/api/jobs/{job.id}/card" if reported else None,
        #: the review's verdict: {verdict: ok/look, summary: "look: 2 tracks", reason, more}
        "review": review,
        #: the review picture (render review's contact sheet, made when first asked for)
        "review_sheet": f"/api/jobs/{job.id}/review" if done and video and review else None,
    }
