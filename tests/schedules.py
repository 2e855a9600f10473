"""One output rendered on every schedule a render can have: one segment at a time on one lane,
two segments at once on two lanes, two shards assembled, and a render resumed from half its
segments. Its bytes must be the same on each (the same output name in each folder: the mark
signs the name)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from render.files import sha256_file
from render.report import report_path

#: the keys of the two schedules rendered whole
SCHEDULES = (("execution.parallel_segments=1", "execution.lanes=1"),
             ("execution.parallel_segments=2", "execution.lanes=2"))


def on_every_schedule(render: Callable[..., Path]) -> tuple[Path, dict]:
    """``render(folder, *keys, command=())`` (it asserts its own success and returns the
    output) on each schedule; asserts one SHA-256 for all, and that the resumed render both
    resumed and rendered segments. Returns the resumed output and its report."""
    outputs = [render(f"schedule-{n}", *keys) for n, keys in enumerate(SCHEDULES)]
    render("sharded", "shard=1/2")
    render("sharded", "shard=0/2")
    outputs.append(render("sharded", "shard.count=2", command=("assemble",)))
    render("resumed", "shard=0/2")          # half the segments committed, then the whole render
    resumed = render("resumed")
    report = json.loads(report_path(resumed).read_text())
    states = [seg["state"] for seg in report["segments"]]
    assert "resumed" in states and "rendered" in states, states
    sums = [sha256_file(out) for out in [*outputs, resumed]]
    assert len(set(sums)) == 1, sums
    return resumed, report
