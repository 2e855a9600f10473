"""The order workers take queued jobs, and how long a queued job may wait.

Fair share per owner: priority first (high first), then rounds. An owner's jobs are counted from
those already served (running, or finished within ``FAIR_WINDOW_S``): their first job waiting is
in round n where n is that count, their second in round n + 1, and so on; a round's jobs go by
submit time. So a student who keeps two jobs queued waits behind every classmate's first job,
and a class that uploads at once is served one job per student before anyone's second — where
first-in-first-out let whoever submitted most at the start take the worker for all of it.

The wait of a queued job is an estimate: the typical time of the last finished jobs for each job
ahead, plus what the running jobs have left (their ETA, else the typical time less what they ran),
spread over the jobs running at once. None until a job has finished to go by.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Iterable, Mapping

from .spool_job import Job

#: finished jobs served this recently still count against their owner's share (a class's hour)
FAIR_WINDOW_S = 3600.0
#: the finished jobs the typical time is taken from (the newest)
TYPICAL_OF = 20


def served(jobs: Iterable[Job], now: float) -> dict[str, int]:
    """Owner → jobs running, or done or failed within the last ``FAIR_WINDOW_S``."""
    out: dict[str, int] = defaultdict(int)
    for job in jobs:
        if job.state == "running" or (job.state in ("done", "failed") and
                                      now - job.changed <= FAIR_WINDOW_S):
            out[job.owner] += 1
    return dict(out)


def queued_in_order(jobs: Iterable[Job], now: float) -> list[Job]:
    """The queued jobs of ``jobs`` in the order workers take them, each owner's share counted
    from the jobs of ``jobs`` already served: the spool's queue and the pages' are this one."""
    jobs = list(jobs)
    return fair_order([j for j in jobs if j.state == "queued"], served(jobs, now))


def fair_order(queued: Iterable[Job], already: Mapping[str, int]) -> list[Job]:
    """``queued`` in the order workers take them (see the module's docstring)."""
    rounds: dict[str, int] = defaultdict(int)
    keyed = []
    for job in sorted(queued, key=lambda j: (j.submitted, j.id)):
        n = already.get(job.owner, 0) + rounds[job.owner]
        rounds[job.owner] += 1
        keyed.append(((-job.priority, n, job.submitted, job.id), job))
    return [job for _, job in sorted(keyed, key=lambda kj: kj[0])]


def typical_seconds(jobs: Iterable[Job]) -> float | None:
    """The median time of the newest finished jobs that ran (start to end), or None."""
    done = [(j.changed, float(j.result["seconds"])) for j in jobs
            if j.state == "done" and j.result and isinstance(j.result.get("seconds"), (int, float))]
    if not done:
        return None
    return statistics.median(s for _, s in sorted(done)[-TYPICAL_OF:])


def waits(order: list[Job], running: list[Job], typical: float | None, now: float
          ) -> dict[str, float | None]:
    """Job id → seconds until it may start (an estimate; None without a typical time)."""
    if typical is None:
        return {job.id: None for job in order}
    left = 0.0
    for job in running:
        eta = (job.progress or {}).get("eta_s")
        ran = now - job.changed
        left += float(eta) if isinstance(eta, (int, float)) else max(0.0, typical - ran)
    slots = max(1, len(running))
    return {job.id: (left + k * typical) / slots for k, job in enumerate(order)}
