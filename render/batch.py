"""Every job of a Config rendered under the device lock: a folder of targets goes on past a
failed one and ends with a summary."""
from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from . import report
from .config import Config
from .errors import MediaError, RenderError, RenderFailed, UsageError
from .work_folder import AlreadyDone
from .interrupts import StopToken
from .jobs import Job, plan_jobs
from .devices import detect_devices
from .lock import DeviceLock, lock_needed
from .renderer import Renderer, RenderResult

log = logging.getLogger(__name__)


@dataclass
class Batch:
    """What :func:`render_all` did: rendered, up to date (skipped), failed (job, error)."""

    rendered: list[RenderResult] = field(default_factory=list)
    skipped: list[Job] = field(default_factory=list)
    failed: list[tuple[Job, RenderError]] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{len(self.rendered)} rendered"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} up to date")
        text = ", ".join(parts)
        if self.failed:      # each failure's reason was its own line, as it happened
            text += f", {len(self.failed)} failed: " + ", ".join(
                job.target.name for job, _ in self.failed)
        return text

    def reasons(self) -> str:
        """Each failed target with its reason, for a record read later (a job of the spool)."""
        return "; ".join(f"{job.target.name} — {exc}" for job, exc in self.failed)


class BatchFailed(RenderError):
    """Some targets of a folder failed (the others were rendered)."""

    def __init__(self, batch: Batch) -> None:
        super().__init__(batch.summary())
        self.batch = batch
        self.exit_code = batch.failed[0][1].exit_code


@contextmanager
def device_lock(cfg: Config, owner: Mapping[str, Any],
                on_wait: Callable[[str], None] | None = None):
    """The render lock of a free device among those this config may render on (every visible GPU
    by its UUID, else ``cpu``), held for the whole block; None where no lock is taken
    (``lock.device=none``, or under Slurm, whose scheduler hands out the GPUs)."""
    if cfg.lock.device == "none" or not lock_needed():
        yield None
        return
    devices = detect_devices(cfg.execution.providers, fake=cfg.lock.device)
    held = DeviceLock(cfg.lock_path, devices, cfg.lock.slots, owner=owner,
                      timeout=cfg.lock.timeout or None,
                      on_wait=lambda line: (log.warning("%s", line),
                                            on_wait(line) if on_wait else None))
    with held:
        yield held


def lock_record(held: DeviceLock | None) -> dict | None:
    if held is None:
        return None
    return {"device": held.device.label, "device_id": held.device.id,
            "cuda_device": held.device.ordinal, "slot": held.slot,
            "acquired": report.iso(held.acquired_at), "acquired_ts": held.acquired_at,
            "waited_s": round(held.waited_s, 3)}


def render_all(cfg: Config, *, meta: Mapping[str, Any] | None = None,
               stop: StopToken | None = None,
               on_segment: Callable[[Job, Any, int, int], None] | None = None,
               on_wait: Callable[[str], None] | None = None,
               on_progress: Callable[[Job, str, int, int], None] | None = None,
               on_device: Callable[[str], None] | None = None) -> Batch:
    """Render every planned job under the device lock. In folder mode a failing target does not
    stop the others: the batch goes on and ends with a summary ("9 rendered, 1 failed: clip7.mov —
    reason"), raised as :class:`BatchFailed` when any failed. Outputs that are complete and whose
    report has this render's job key are skipped (``skip_done``). ``on_segment`` and
    ``on_progress`` get the job, then what :class:`~render.execute.Hooks` tells; ``on_device``
    the device taken."""
    batch = Batch()
    jobs = plan_jobs(cfg, batch.failed)
    for job, exc in batch.failed:           # targets of a folder refused before any work
        log.error("%s: %s", job.target.name, exc)
    if not jobs:
        raise BatchFailed(batch)
    folder = len(jobs) + len(batch.failed) > 1
    owner = {"job": (meta or {}).get("job") or f"cli-{os.getpid()}",
             "target": jobs[0].target.name if not folder else str(jobs[0].target.parent)}
    with device_lock(cfg, owner, on_wait) as held:
        if held is not None and on_device is not None:
            on_device(held.device.label)
        renderer = Renderer(cfg, device_id=held.device.ordinal if held is not None else None)
        # every job shares the source: a source without a face fails once, before any target
        renderer.check_sources(jobs[0])
        for job in jobs:
            try:
                if cfg.skip_done and renderer.up_to_date(job):
                    log.info("%s: up to date (%s), skipped", job.target.name, job.output.name)
                    batch.skipped.append(job)
                    continue
                hook = (lambda rec, done, total, job=job: on_segment(job, rec, done, total)) \
                    if on_segment is not None else None
                frames = (lambda stage, done, total, job=job: on_progress(job, stage, done, total)) \
                    if on_progress is not None else None
                batch.rendered.append(renderer.render(job, meta=meta, lock=lock_record(held),
                                                      stop=stop, on_segment=hook,
                                                      on_progress=frames))
            except AlreadyDone as done:
                log.info("%s: up to date (%s), skipped", job.target.name, done)
                batch.skipped.append(job)
            except (MediaError, UsageError, RenderFailed) as exc:
                if not folder:
                    raise
                log.error("%s: %s", job.target.name, exc)
                batch.failed.append((job, exc))
    if batch.failed:
        raise BatchFailed(batch)
    if folder:
        log.info("%s", batch.summary())
    return batch
