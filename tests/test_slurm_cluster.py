"""A real single-node Slurm cluster (tests/slurm_cluster.py) runs what a sharded render needs.

Trivial jobs only, no renderer: a throttled array with a dependent job, a killed-and-requeued
array task, GPU gres serialising jobs, and render.slurm.submit end to end with a stand-in renderer.
Skips when not root or Slurm/munge are not installed (apt-get install slurmctld slurmd
slurm-client munge).
"""
from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from slurm_cluster import slurm_cluster  # noqa: F401  (the module-scoped fixture)

from render import slurm

# Each job appends "START END" (epoch seconds, ns resolution) to its own file.
STAMP = 'date +%s.%N'


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/bash\nset -eu\n" + body)
    path.chmod(0o755)
    return path


def _intervals(folder: Path, pattern: str) -> dict[str, tuple[float, float]]:
    out = {}
    for f in sorted(folder.glob(pattern)):
        start, end = f.read_text().split()[-2:]
        out[f.name] = (float(start), float(end))
    return out


def _max_overlap(intervals) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    now = peak = 0
    for _, d in events:
        now += d
        peak = max(peak, now)
    return peak


def test_throttled_array_then_dependent_job(slurm_cluster, tmp_path):
    c = slurm_cluster
    task = _script(tmp_path / "task.sh", f"""\
s=$({STAMP})
echo "$SLURM_ARRAY_TASK_ID" > {tmp_path}/id.$SLURM_ARRAY_TASK_ID
sleep 1
echo "$s $({STAMP})" > {tmp_path}/t.$SLURM_ARRAY_TASK_ID
""")
    after = _script(tmp_path / "after.sh", f"""\
s=$({STAMP})
ls {tmp_path} | grep -c '^t\\.' > {tmp_path}/after.count
echo "$s $({STAMP})" > {tmp_path}/after.t
""")
    array = c.sbatch("--array=0-3%2", "-o", f"{tmp_path}/%A_%a.out", str(task))
    dep = c.sbatch(f"--dependency=afterok:{array}", "-o", f"{tmp_path}/after.out", str(after))
    c.wait_done([array, dep], timeout=40)

    for i in range(4):
        assert (tmp_path / f"id.{i}").read_text().strip() == str(i)
        assert c.state(f"{array}_{i}") == "COMPLETED"
    assert c.state(dep) == "COMPLETED"
    tasks = _intervals(tmp_path, "t.*")
    assert len(tasks) == 4
    assert _max_overlap(tasks.values()) <= 2, tasks  # %2: two at a time at most
    (dep_start, _), = _intervals(tmp_path, "after.t").values()
    assert dep_start >= max(end for _, end in tasks.values()), (tasks, dep_start)
    assert (tmp_path / "after.count").read_text().strip() == "4"


def test_killed_array_tasks_are_requeued_and_complete(slurm_cluster, tmp_path):
    """`scontrol requeue` of a running task (what a node failure or preemption does) and of a
    task that `scancel` killed: both run again from the start, with SLURM_RESTART_COUNT=1."""
    c = slurm_cluster
    task = _script(tmp_path / "task.sh", f"""\
n=${{SLURM_RESTART_COUNT:-0}}
echo "$n" >> {tmp_path}/runs.$SLURM_ARRAY_TASK_ID
if [ "$n" = 0 ]; then sleep 60; fi   # the first run waits to be killed
echo ok > {tmp_path}/done.$SLURM_ARRAY_TASK_ID
""")
    array = c.sbatch("--array=0-1", "--requeue", "-o", f"{tmp_path}/%A_%a.out", "--open-mode=append", str(task))
    deadline = time.monotonic() + 20
    while not all((tmp_path / f"runs.{i}").exists() for i in (0, 1)):
        assert time.monotonic() < deadline, c.jobs()
        time.sleep(0.2)
    assert c.state(f"{array}_0") == c.state(f"{array}_1") == "RUNNING"

    c.run("scontrol", "requeue", f"{array}_0")       # running → killed, back to pending
    c.run("scancel", f"{array}_1")                    # cancelled for good ...
    c.wait_state(f"{array}_1", {"CANCELLED"}, timeout=15)
    c.run("scontrol", "requeue", f"{array}_1")       # ... until requeued (a finished batch job may be)
    assert c.state(f"{array}_1") in {"PENDING", "REQUEUED", "RUNNING"}

    c.wait_done([array], timeout=20 + 2 * c.cred_expire)
    for i in (0, 1):
        assert (tmp_path / f"runs.{i}").read_text().split() == ["0", "1"]
        assert (tmp_path / f"done.{i}").read_text().strip() == "ok"
        info = c.job_info(f"{array}_{i}")
        assert info["JobState"] == "COMPLETED" and info["Restarts"] == "1"
    assert "DUE TO JOB REQUEUE" in (tmp_path / f"{array}_0.out").read_text()


def test_gpu_gres_serialises_jobs_others_run_in_parallel(slurm_cluster, tmp_path):
    c = slurm_cluster
    job = _script(tmp_path / "job.sh", f"""\
s=$({STAMP})
echo "${{CUDA_VISIBLE_DEVICES:-none}}" > {tmp_path}/$1.cuda
sleep 1.5
echo "$s $({STAMP})" > {tmp_path}/$1.t
""")
    # Two GPU jobs on a node with 2 CPUs and 1 GPU: the second waits for the GPU, not for a CPU.
    gpu = [c.sbatch("--gres=gpu:1", "-o", "/dev/null", str(job), f"gpu{i}") for i in range(2)]
    c.wait_done(gpu, timeout=30)
    # Then two jobs without gres: they run side by side.
    cpu = [c.sbatch("-o", "/dev/null", str(job), f"cpu{i}") for i in range(2)]
    c.wait_done(cpu, timeout=30)
    assert all(c.state(j) == "COMPLETED" for j in gpu + cpu)
    g = _intervals(tmp_path, "gpu*.t")
    assert len(g) == 2 and _max_overlap(g.values()) == 1, g  # one GPU: one after the other
    assert all((tmp_path / f"gpu{i}.cuda").read_text().strip() == "0" for i in range(2))
    cp = _intervals(tmp_path, "cpu*.t")
    assert len(cp) == 2 and _max_overlap(cp.values()) == 2, cp


FAKE_RENDER = """#!{python}
# Stands in for `python -m render`: records its arguments and the array index it was given.
import json, os, sys, time
out = {out!r}
rec = {{"argv": sys.argv[1:], "task": os.environ.get("SLURM_ARRAY_TASK_ID"),
        "job": os.environ.get("SLURM_JOB_ID"), "cwd": os.getcwd(), "time": time.time()}}
name = "assemble" if "assemble" in sys.argv[1:] else "shard-" + str(rec["task"])
with open(os.path.join(out, name + ".json"), "w") as f:
    json.dump(rec, f)
"""


def test_submit_runs_four_shards_then_the_assembly(slurm_cluster, tmp_path):
    c = slurm_cluster
    out = tmp_path / "out"
    out.mkdir()
    fake = tmp_path / "fakepython"
    fake.write_text(FAKE_RENDER.format(python=sys.executable, out=str(out)))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    keys = ["source=/data/in/face.jpg", "target=/data/in/my clip.mp4", "output=/data/out/it's.mp4", "profile=low"]
    array, assemble = slurm.submit(keys, 4, 2, launcher="plain", python=str(fake), log_dir=tmp_path / "logs",
                                   script_dir=tmp_path / "jobs", env=c.env, cwd=tmp_path)
    assert array.isdigit() and assemble.isdigit() and array != assemble
    info = c.job_info(assemble)
    assert f"afterok:{array}" in info["Dependency"] or info["JobState"] in {"RUNNING", "COMPLETED"}
    c.wait_done([array, assemble], timeout=40)

    shards = {i: json.loads((out / f"shard-{i}.json").read_text()) for i in range(4)}
    for i, r in shards.items():
        assert r["argv"] == ["-m", "render", "shard.count=4", *keys]
        assert r["task"] == str(i)
        assert c.state(f"{array}_{i}") == "COMPLETED"
    a = json.loads((out / "assemble.json").read_text())
    assert a["argv"] == ["-m", "render", "assemble", *keys]
    assert a["job"] == assemble and a["task"] is None and a["cwd"] == str(tmp_path)
    assert a["time"] >= max(r["time"] for r in shards.values())
    assert c.state(assemble) == "COMPLETED"
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert logs == sorted([f"render-{array}_{i}.out" for i in range(4)] + [f"render-assemble-{assemble}.out"])
    assert not os.path.exists(out / "shard-4.json")
