"""A small class at once (issue 43; the full one is ``python -m bench.classroom_load``): a real
server and worker on 127.0.0.1, renders slower than the arrivals so a queue forms, one student
keeping the class limit's worth of jobs queued."""
from __future__ import annotations

from types import SimpleNamespace

from bench import classroom_load
from render.queue_order import fair_order, served, waits


def _job(job_id: str, owner: str, submitted: str, state: str = "queued", changed: float = 0.0,
         priority: int = 0, **extra):
    spec = {"owner": owner, "submitted": submitted, "priority": priority}
    return SimpleNamespace(id=job_id, owner=owner, submitted=submitted, state=state,
                           changed=changed, priority=priority, spec=spec, **extra)


def test_each_owners_first_job_goes_before_anyones_second():
    """Greedy queued three at once and has one running; a, b, c one each, later: a, b, c first,
    then greedy's in order; a priority job still goes first."""
    running = _job("g0", "greedy", "09:00:00", state="running", changed=100.0)
    queued = [_job("g1", "greedy", "09:00:01"), _job("g2", "greedy", "09:00:02"),
              _job("a1", "a", "09:00:05"), _job("b1", "b", "09:00:09"),
              _job("g3", "greedy", "09:00:10"), _job("c1", "c", "09:00:30"),
              _job("a2", "a", "09:00:31"), _job("t1", "teacher", "09:00:40", priority=5)]
    order = fair_order(queued, served([running, *queued], now=200.0))
    assert [j.id for j in order] == ["t1", "a1", "b1", "c1", "g1", "a2", "g2", "g3"]
    # a job finished over the window ago no longer counts against its owner
    old = _job("x0", "x", "08:00:00", state="done", changed=0.0)
    assert served([old], now=3601.0) == {}
    assert served([old], now=3599.0) == {"x": 1}


def test_the_wait_shown_counts_the_running_jobs_left_and_the_jobs_ahead():
    order = [_job(f"q{k}", f"o{k}", f"09:00:0{k}") for k in range(3)]
    running = [_job("r", "r", "08:59:00", state="running", changed=90.0,
                    progress={"eta_s": 12.0})]
    assert waits(order, running, 30.0, now=100.0) == {"q0": 12.0, "q1": 42.0, "q2": 72.0}
    assert waits(order, [], None, now=100.0) == {"q0": None, "q1": None, "q2": None}


def test_a_small_class_at_once(tmp_path):
    fig = classroom_load.run(tmp_path, students=5, window=5.0, job_seconds=2.0, poll=0.5)
    assert fig["errors"] == [] and fig["5xx"] == 0, classroom_load.report(fig)
    assert fig["jobs"] >= 6 and fig["done"] == fig["jobs"] == fig["verified"], fig
    assert fig["first_before_second"], fig["start_rounds"]
    assert fig["places_shown"] >= 1 and fig["estimates"], classroom_load.report(fig)
    assert fig["answers"].get("429", 0) >= 1       # the greedy student met the class limit
