"""The files of a job on the page: the result (HTTP range requests, so that the player seeks), a
poster frame, the report as JSON and as a card, and the uploads. The download names keep the
uploaded file's name and container ("clip.webm" → "clip-swapped.webm")."""
from __future__ import annotations

import json
import logging
import os
import re
import secrets
import subprocess
from pathlib import Path
from typing import Any, Callable

from fastapi import Depends, FastAPI, Request
from fastapi.responses import FileResponse

from ..files import fsync_dir
from ..report import report_path
from .classroom import Classroom, classroom_meta
from .errors import not_found

log = logging.getLogger(__name__)

POSTER = "poster.jpg"        # in the job's folder: removed with it
POSTER_WIDTH = 640


def download_name(label: str, suffix: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(label).stem).strip("._") or "render"
    return f"{stem[:60]}{suffix}"


def _disposition(request: Request) -> str:
    """``?inline=1``: shown in the browser (the JSON), else a download."""
    return "inline" if request.query_params.get("inline") in ("1", "true") else "attachment"


def make_poster(output: Path, poster: Path) -> Path:
    """The result's first frame, scaled to at most POSTER_WIDTH, written temp → fsync → rename."""
    tmp = poster.with_name(f".{poster.name}.{secrets.token_hex(3)}.jpg")
    try:
        subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(output),
                        "-frames:v", "1", "-vf", f"scale='min({POSTER_WIDTH},iw)':-2", "-q:v", "4",
                        str(tmp)], check=True, capture_output=True, timeout=60)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, poster)
        fsync_dir(poster.parent)
    finally:
        tmp.unlink(missing_ok=True)
    return poster


def report_card(data: dict[str, Any], job_meta: dict[str, Any]) -> dict[str, Any]:
    """What a student reads in the report: what was made, with which models, how long, the
    synthetic marks and the consent record; no server paths."""
    out = data.get("output") or {}
    timing = data.get("timing") or {}
    marks = data.get("marks") or {}
    consent = (job_meta or {}).get("consent") or {}
    return {
        "status": data.get("status"),
        "made": {k: out.get(k) for k in ("kind", "width", "height", "frames", "duration",
                                         "video_codec", "bytes")},
        "swapped": data.get("swapped"),
        "models": [{"role": m.get("role"), "name": m.get("name"), "precision": m.get("precision")}
                   for m in data.get("models") or [] if isinstance(m, dict)],
        "seconds": timing.get("seconds"),
        "fps": timing.get("fps"),
        "started": timing.get("started"),
        "synthetic": bool(data.get("synthetic")),
        "marks": sorted(k for k, v in marks.items() if k != "enabled" and v)
        if isinstance(marks, dict) else [],
        "consent": {"given": bool(consent.get("given")), "statement": consent.get("statement"),
                    "at": consent.get("at"), "by": (job_meta or {}).get("submitted_by")},
        "profile": (data.get("config") or {}).get("profile"),
    }


def add_result_routes(app: FastAPI, classroom: Classroom, member: Callable) -> None:
    def label(job) -> str:
        return ((classroom_meta(job) or {}).get("target") or {}).get("name") or "render"

    def result_of(c, job_id: str):
        job = classroom.job_for(c.user, job_id)
        path = classroom.output_of(job)
        if job.state != "done" or path is None or not path.is_file():
            raise not_found("result (the job is not done)")
        return job, path

    @app.get("/api/jobs/{job_id}/output", tags=["jobs"], response_class=FileResponse,
             summary="The result (range requests: a player seeks in it; ?inline=1 to show it)")
    def output(job_id: str, request: Request, c=Depends(member)) -> FileResponse:
        job, path = result_of(c, job_id)
        return FileResponse(path, filename=download_name(label(job), "-swapped" + path.suffix),
                            content_disposition_type=_disposition(request))

    @app.get("/api/jobs/{job_id}/poster", tags=["jobs"], response_class=FileResponse,
             summary="The result's first frame (JPEG), for the player")
    def poster(job_id: str, c=Depends(member)) -> FileResponse:
        job, path = result_of(c, job_id)
        if path.suffix.lower() in (".png", ".jpg", ".jpeg", ".webp"):
            return FileResponse(path)              # a picture is its own poster
        folder = classroom.folders / str((classroom_meta(job) or {}).get("folder"))
        made = folder / POSTER
        if not made.is_file():
            try:
                make_poster(path, made)
            except (OSError, subprocess.SubprocessError) as exc:
                log.warning("job %s: no poster frame: %s", job.id, exc)
                raise not_found("poster frame") from None
        return FileResponse(made, media_type="image/jpeg")

    def report_file(c, job_id: str):
        job = classroom.job_for(c.user, job_id)
        path = classroom.output_of(job)
        report = report_path(path) if path is not None else None
        if report is None or not report.is_file():
            raise not_found("report")
        return job, report

    @app.get("/api/jobs/{job_id}/report", tags=["jobs"], response_class=FileResponse,
             summary="The report of the result (JSON; ?inline=1 to show it)")
    def report(job_id: str, request: Request, c=Depends(member)) -> FileResponse:
        job, path = report_file(c, job_id)
        return FileResponse(path, media_type="application/json",
                            filename=download_name(label(job), "-swapped.report.json"),
                            content_disposition_type=_disposition(request))

    @app.get("/api/jobs/{job_id}/card", tags=["jobs"],
             summary="The report as the page's card: what was made, models, time, marks, consent")
    def card(job_id: str, c=Depends(member)) -> dict[str, Any]:
        job, path = report_file(c, job_id)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            raise not_found("report") from None
        return report_card(data if isinstance(data, dict) else {},
                           (job.spec or {}).get("meta") or {})

    @app.get("/api/files/{file_id}", tags=["jobs"], response_class=FileResponse,
             summary="One of your uploads (range requests)")
    def uploaded(file_id: str, request: Request, c=Depends(member)) -> FileResponse:
        path, name = classroom.file_for(c.user, file_id)
        return FileResponse(path, filename=download_name(name, path.suffix),
                            content_disposition_type=_disposition(request))
