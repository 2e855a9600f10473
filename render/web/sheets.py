"""The review picture of a job on the page: ``render review``'s contact sheet of its output (the
weakest frames with their time codes, track and why, over the timeline of every track; made by
:func:`render.review_sheet.command.review_sheet`), served to the job's owner and the teacher only.

It is made the first time it is asked for and kept beside the output under the name ``render
review`` gives it (``files/<id>/out/result.mp4.review.png``, removed with the job's folder),
written temp → fsync → rename; a sheet older than its output or report (the job rendered again)
is made again. Making one seeks a few frames with ffmpeg, so it runs on the server's own pool of
WORKERS sheet makers, never on a request's thread: a request waits for it at most WAIT_S, then
answers 503 with ``Retry-After`` while the sheet goes on being made for the next request. A job
asked for by several requests at once is made once: one future per job in this process, and an
exclusive flock on the output's folder against a second server on the same state folder (who
gets the lock second finds the sheet made).

What has no picture answers 404 in one line, "no review picture: …": a job that is not done, a
result that is gone, a picture (only videos are reviewed), a render without review.
"""
from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import anyio
import cv2
import numpy as np
from fastapi import Depends, FastAPI
from fastapi.responses import FileResponse, JSONResponse

from ..errors import RenderError
from ..files import write_atomic
from ..media.formats import is_image_path
from ..report import report_path
from ..review_sheet.command import SHEET_SUFFIX, review_sheet
from ..review_sheet.reports import quality_of
from ..spool import Job
from .accounts import User
from .classroom import Classroom
from .errors import Refused
from .results import download_name
from .views import classroom_meta

log = logging.getLogger(__name__)

WORKERS = 2               # sheets made at once (each: one ffmpeg seek per tile)
WAIT_S = 20.0             # a request waits this long for a sheet being made, then 503
RETRY_S = 3               # the 503's Retry-After


def no_picture(why: str) -> Refused:
    return Refused(404, f"no review picture: {why}")


@dataclass(frozen=True)
class Wanted:
    """The sheet of one job's output."""

    job: Job
    output: Path
    full: bool            # the teacher: the renderer's own words for what went wrong

    @property
    def sheet(self) -> Path:
        return self.output.with_name(self.output.name + SHEET_SUFFIX)


def fresh(sheet: Path, output: Path) -> bool:
    """``sheet`` exists and was made after ``output`` and its report were written."""
    try:
        made = sheet.stat().st_mtime_ns
        return all(made >= p.stat().st_mtime_ns for p in (output, report_path(output)))
    except OSError:
        return False


def draw(output: Path) -> np.ndarray:
    return review_sheet(output).image


class Sheets:
    """The review pictures of a classroom's jobs; ``draw`` makes one (the contact sheet)."""

    def __init__(self, classroom: Classroom, *, draw: Callable[[Path], np.ndarray] = draw,
                 workers: int = WORKERS) -> None:
        self.classroom = classroom
        self.draw = draw
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="review-sheet")
        self._making: dict[str, Future] = {}
        self._lock = threading.RLock()      # a future already done runs its callback in submit

    def wanted(self, user: User, job_id: str) -> Wanted:
        """The job's sheet if ``user`` may see it and it can have one; else Refused (404)."""
        job = self.classroom.job_for(user, job_id)       # someone else's: "no such job"
        output = self.classroom.output_of(job)
        if job.state != "done":
            raise no_picture(f"the job is {job.state}, not done")
        if output is None:
            raise no_picture("the job did not come from this page")
        if not output.is_file():
            raise no_picture("the result is no longer on the server")
        if is_image_path(output):
            raise no_picture("the result is a picture: only videos are reviewed")
        wanted = Wanted(job, output, user.teacher)
        if not fresh(wanted.sheet, output):
            try:
                quality_of(output, report_path(output))
            except RenderError as exc:
                raise no_picture(str(exc) if user.teacher else "this render was not reviewed") \
                    from None
        return wanted

    async def sheet(self, wanted: Wanted, timeout: float = WAIT_S) -> Path | None:
        """The sheet's path, made first if need be; None when it is not made within
        ``timeout`` (it goes on being made)."""
        if fresh(wanted.sheet, wanted.output):
            return wanted.sheet
        waiter = asyncio.wrap_future(self.making(wanted))
        waiter.add_done_callback(_seen)
        done, _ = await asyncio.wait({waiter}, timeout=timeout)
        return waiter.result() if done else None

    def making(self, wanted: Wanted) -> Future:
        """The future of ``wanted``'s sheet: the one being made, or a new one."""
        key = wanted.job.id
        with self._lock:
            future = self._making.get(key)
            if future is None or future.cancelled():
                future = self._pool.submit(self._make, wanted)
                self._making[key] = future
                future.add_done_callback(lambda f: self._forget(key, f))
            return future

    def _forget(self, key: str, future: Future) -> None:
        with self._lock:
            if self._making.get(key) is future:
                del self._making[key]

    def _make(self, wanted: Wanted) -> Path:
        sheet = wanted.sheet
        fd = os.open(sheet.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)        # against another server on this state folder
            if fresh(sheet, wanted.output):
                return sheet
            started = time.monotonic()
            try:
                image = self.draw(wanted.output)
            except RenderError as exc:            # the report changed, a frame cannot be read
                log.warning("job %s: no review picture: %s", wanted.job.id, exc)
                raise no_picture(str(exc) if wanted.full else
                                 "the result's frames could not be read") from None
            ok, data = cv2.imencode(".png", image)
            if not ok:
                raise no_picture("the contact sheet could not be encoded")
            write_atomic(sheet, data.tobytes())
            log.info("job %s: review picture made (%d x %d, %.1f s)", wanted.job.id,
                     image.shape[1], image.shape[0], time.monotonic() - started)
            return sheet
        finally:
            os.close(fd)


def _seen(waiter: asyncio.Future) -> None:
    """Its outcome is read here too, so a request that stopped waiting leaves no warning."""
    if not waiter.cancelled():
        waiter.exception()


def add_review_routes(app: FastAPI, classroom: Classroom, member: Callable) -> Sheets:
    sheets = Sheets(classroom)

    @app.get("/api/jobs/{job_id}/review", tags=["jobs"], response_class=FileResponse,
             summary="The review picture (PNG): the frames to look at and each track's "
                     "timeline, made when first asked for (503 with Retry-After meanwhile)")
    async def review_picture(job_id: str, c=Depends(member)):
        wanted = await anyio.to_thread.run_sync(sheets.wanted, c.user, job_id)
        path = await sheets.sheet(wanted)
        if path is None:
            return JSONResponse({"detail": "the review picture is still being made: ask again "
                                           "in a few seconds"},
                                status_code=503, headers={"Retry-After": str(RETRY_S)})
        name = ((classroom_meta(wanted.job) or {}).get("target") or {}).get("name") or "render"
        return FileResponse(path, media_type="image/png", content_disposition_type="inline",
                            filename=download_name(name, "-review.png"))

    return sheets
