"""``render submit``, ``render work`` and ``render jobs``: batch renders on a shared box.

- ``render submit JOBFILE`` or ``render submit key=value ...`` validates the job and queues it in
  the spool (``spool_dir``), printing its id.
- ``render work [follow=true]`` takes queued jobs in order (priority, then a fair share per owner:
  :mod:`render.queue_order`), renders each under the device lock, and moves it to done or failed
  with its report paths or the one-line error. A job left in ``running/`` by a worker that died is
  taken first and resumes from its committed segments. SIGTERM (or Ctrl-C) stops the render within
  about a second, requeues the job (its committed segments are kept for the next worker) and ends
  the worker with exit 130 and one line, whether it was rendering or idle; a cancelled job stops as
  fast and ends cancelled.
- ``render jobs`` lists the jobs; ``render jobs retry|cancel|remove ID``; ``render jobs clean older=7d``.

A job file, and how a job is checked before it is queued: :mod:`render.job_spec`.
"""
from __future__ import annotations

import logging
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Mapping, Sequence

import yaml

from .config import load_config, parse_overrides
from .errors import Interrupted, RenderError, UsageError
from .interrupts import StopToken
from .job_progress import JobProgress, describe_progress
from .job_spec import absolute, read_job_file, validate
from .spool import Spool, parse_age

log = logging.getLogger(__name__)

#: keys that belong to the worker's machine, not to a job: the worker's own values are used
WORKER_KEYS = ("spool_dir",)
POLL_S = 1.0


# -- submit ---------------------------------------------------------------------------------------
def submit_main(args: Sequence[str], stream: IO[str] | None = None) -> int:
    stream = stream or sys.stdout
    files = [a for a in args if "=" not in a]
    pairs = [a for a in args if "=" in a]
    prio = [a.split("=", 1)[1] for a in pairs if a.split("=", 1)[0] == "priority"]
    keys = parse_overrides([a for a in pairs if a.split("=", 1)[0] != "priority"])
    try:
        priority = int(prio[-1]) if prio else 0
    except ValueError:
        raise UsageError("priority must be a whole number") from None
    if len(files) > 1:
        raise UsageError("usage: render submit JOBFILE | key=value ...")
    if files:
        settings, targets, file_priority = read_job_file(Path(files[0]))
        settings.update(absolute(keys, Path.cwd()))
        priority = priority if prio else file_priority
    else:
        settings, targets = absolute(keys, Path.cwd()), []
    spool_key = settings.pop("spool_dir", None)
    validate(settings, targets)
    spool_dir = load_config({"spool_dir": spool_key} if spool_key else {}).spool_path
    job_id = Spool(spool_dir).submit(settings, priority=priority,
                                     meta={"targets": targets} if targets else None)
    stream.write(job_id + "\n")
    return 0


# -- work -----------------------------------------------------------------------------------------
class Worker:
    """Runs jobs from one spool until it is empty (or forever with ``follow``)."""

    def __init__(self, spool: Spool, defaults: Mapping[str, str], *, follow: bool = False,
                 stop: StopToken | None = None) -> None:
        self.spool = spool
        self.defaults = dict(defaults)
        self.follow = follow
        #: the process's stop token (its signal handlers set it); each job adds its cancel request
        self.stop = stop or StopToken()

    def run(self) -> int:
        """Run jobs until the queue is empty (or for ever with ``follow``); a stop by a signal
        raises :class:`Interrupted` once the job it stopped is requeued."""
        self.spool.ensure()
        ran = 0
        while not self._stopped():
            for bad in [j for j in self.spool.jobs(("queued",)) if j.spec is None]:
                log.error("job %s: %s", bad.id, bad.error)
                self.spool.fail_unreadable(bad)
            claim = self.spool.claim()
            if claim is None:
                if not self.follow:
                    break
                time.sleep(POLL_S)
                continue
            ran += 1
            self.run_job(claim)
        if self._stopped():
            raise Interrupted(self._stopped())
        return ran

    def _stopped(self) -> str | None:
        """Why this worker stops (a signal, or a stop requested in-process), None while it runs on;
        a job's cancel request stops only that job."""
        return self.stop.signalled or self.stop.reason

    def run_job(self, claim) -> None:
        from .batch import BatchFailed, render_all
        from .review_sheet.reports import verdict_of_reports

        job = claim.job
        if job.spec is None:
            self.spool.finish(claim, "failed", {"error": job.error})
            return
        started = time.monotonic()
        targets = list((job.spec.get("meta") or {}).get("targets") or [])
        settings = {**self.defaults, **job.settings}
        meta = {"job": job.id, "owner": job.owner, "submitted": job.submitted,
                **{k: v for k, v in (job.spec.get("meta") or {}).items() if k != "targets"}}
        reports: list[str] = []
        counts = {"rendered": 0, "up_to_date": 0}
        progress = JobProgress(self.spool, job.id)

        def cancelled() -> str | None:
            return "cancelled" if self.spool.cancel_requested(job.id) else None

        def on_segment(render_job, record, done: int, total: int) -> None:
            progress.segment(render_job.target.name, record, done, total)

        def on_progress(render_job, stage: str, done: int, total: int) -> None:
            progress.frames(render_job.target.name, stage, done, total)

        try:
            with self.stop.watching(cancelled):
                for target in targets or [None]:
                    run = dict(settings)
                    if target is not None:
                        run["target"] = target
                    cfg = load_config(run)
                    batch = render_all(cfg, meta=meta, stop=self.stop, on_segment=on_segment,
                                       on_wait=progress.waiting, on_progress=on_progress,
                                       on_device=progress.device)
                    counts["rendered"] += len(batch.rendered)
                    counts["up_to_date"] += len(batch.skipped)
                    reports += [str(r.report_path) for r in batch.rendered]
                    reports += [str(_report_of(j.output)) for j in batch.skipped]
        except (Interrupted, KeyboardInterrupt) as exc:    # run() ends the worker after a signal
            if str(exc) == "cancelled":
                self.spool.finish(claim, "cancelled", {"error": "cancelled while running",
                                                       "reports": reports, **counts})
                log.info("job %s: cancelled", job.id)
            else:
                self.spool.requeue(claim)      # the next worker resumes its committed segments
                log.info("job %s: requeued (%s)", job.id, self._stopped() or exc)
            return
        except BatchFailed as exc:
            reports += [str(r.report_path) for r in exc.batch.rendered]
            self.spool.finish(claim, "failed", {"error": f"{exc} ({exc.batch.reasons()})",
                                                "reports": reports,
                                                "rendered": counts["rendered"] + len(exc.batch.rendered)})
            log.error("job %s failed: %s", job.id, exc)
            return
        except RenderError as exc:
            self.spool.finish(claim, "failed", {"error": str(exc), "reports": reports, **counts})
            log.error("job %s failed: %s", job.id, exc)
            return
        except Exception as exc:  # noqa: BLE001 - a job never takes the worker down with it
            text = f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())}"
            self.spool.finish(claim, "failed", {"error": text, "reports": reports, **counts})
            log.exception("job %s failed", job.id)
            return
        self.spool.finish(claim, "done", {"error": None, "reports": reports, **counts,
                                          "seconds": round(time.monotonic() - started, 3),
                                          "review": verdict_of_reports(reports)})
        log.info("job %s done: %d rendered, %d up to date", job.id, counts["rendered"],
                 counts["up_to_date"])


def _report_of(output: Path) -> Path:
    from .report import report_path

    return report_path(output.absolute())


def work_main(args: Sequence[str], stop: StopToken | None = None) -> int:
    keys = parse_overrides([a for a in args if a.split("=", 1)[0] != "follow"])
    follow_arg = [a.split("=", 1)[1] for a in args if a.split("=", 1)[0] == "follow"]
    follow = bool(follow_arg) and follow_arg[-1].lower() in ("1", "true", "yes", "on")
    cfg = load_config(dict(keys))
    spool = Spool(cfg.spool_path)
    defaults = {k: v for k, v in keys.items() if k not in WORKER_KEYS}
    Worker(spool, defaults, follow=follow, stop=stop).run()
    return 0


# -- jobs -----------------------------------------------------------------------------------------
def _age(job) -> str:
    try:
        t = datetime.fromisoformat(job.submitted)
    except ValueError:
        return "?"
    s = (datetime.now(timezone.utc) - t).total_seconds()
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s / n:.0f}{unit}"
    return f"{s:.0f}s"


def jobs_main(args: Sequence[str], stream: IO[str] | None = None) -> int:
    stream = stream or sys.stdout
    words = [a for a in args if "=" not in a]
    keys = dict(a.split("=", 1) for a in args if "=" in a)
    older = keys.pop("older", None)
    cfg = load_config(parse_overrides([f"{k}={v}" for k, v in keys.items()]))
    spool = Spool(cfg.spool_path)
    if not words or words[0] == "list":
        jobs = sorted(spool.jobs(), key=lambda j: (j.submitted, j.id))
        order = {j.id: i + 1 for i, j in enumerate(spool.queue())}
        stream.write(f"{'ID':<9} {'STATE':<10} {'AGE':>5}  {'OWNER':<10} PROGRESS\n")
        for j in jobs:
            state = j.state + (f" #{order[j.id]}" if j.id in order else "")
            stream.write(f"{j.id:<9} {state:<10} {_age(j):>5}  {j.owner:<10} "
                         f"{describe_progress(j)}\n")
        return 0
    verb, rest = words[0], words[1:]
    if verb == "clean":
        gone = spool.clean(parse_age(older or "7d"))
        stream.write(f"removed {len(gone)} finished job(s)\n")
        return 0
    if verb in ("retry", "cancel", "remove", "show") and len(rest) == 1:
        job_id = rest[0]
        if verb == "retry":
            spool.retry(job_id)
            stream.write(f"{job_id} queued\n")
        elif verb == "cancel":
            stream.write(f"{job_id} {spool.cancel(job_id)}\n")
        elif verb == "remove":
            spool.remove(job_id)
            stream.write(f"{job_id} removed\n")
        else:
            job = spool.get(job_id)
            stream.write(yaml.safe_dump({"id": job.id, "state": job.state, "spec": job.spec,
                                         "result": job.result, "progress": job.progress},
                                        sort_keys=False))
        return 0
    raise UsageError("usage: render jobs [list] | retry ID | cancel ID | remove ID | show ID | "
                     "clean older=7d")
