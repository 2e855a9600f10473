"""`render slurm submit` on a real single-node Slurm cluster (tests/slurm_cluster.py): four shards
give the bytes of a single-process render; a shard killed with scancel and requeued completes it."""
from __future__ import annotations

import hashlib
import re
import sys
import time
from pathlib import Path

import pytest

from render.standins import media as mf
from conftest import model_args, run_cli
from slurm_cluster import slurm_cluster  # noqa: F401  (the module-scoped fixture)


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def keys(d: Path, standin_models: Path, clip: Path, out: Path, signing: list[str]) -> list[str]:
    return ["profile=low", "segment.seconds=0.5", f"source={d / 'in' / 'source.jpg'}",
            f"target={clip}", f"output={out}", "progress=off", *signing,
            *model_args(standin_models, d / "cache")[:2]]


def submit(c, d: Path, k: list[str], shards: int, *extra: str) -> tuple[str, str]:
    r = run_cli("slurm", "submit", f"shards={shards}", "parallel=2", "launcher=plain",
                f"python={sys.executable}", f"logs={d / 'logs'}", *extra, *k,
                SLURM_CONF=c.env["SLURM_CONF"], PATH=c.env["PATH"])
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(r"array=(\d+) assemble=(\d+)", r.stdout.strip())
    assert m, r.stdout
    return m.group(1), m.group(2)


def logs(d: Path) -> str:
    return "\n".join(f"== {p.name}\n{p.read_text()}" for p in sorted((d / "logs").glob("*.out")))


@pytest.fixture()
def job(tmp_path, standin_models, signing):
    d = tmp_path
    (d / "in").mkdir()
    mf.make_source_image(d / "in" / "source.jpg")
    clip = mf.make_clip(d / "in" / "clip.mp4", width=480, height=270, seconds=4.0)
    ref = d / "ref" / "clip.mp4"
    r = run_cli(*keys(d, standin_models, clip.path, ref, signing), "lock.device=none")
    assert r.returncode == 0, r.stderr
    return d, clip, sha(ref)


def test_four_shards_give_the_single_process_bytes(slurm_cluster, job, standin_models, signing):
    c = slurm_cluster
    d, clip, ref = job
    out = d / "out" / "clip.mp4"
    array, assemble = submit(c, d, keys(d, standin_models, clip.path, out, signing), 4)
    c.wait_done([array, assemble], timeout=240)
    assert c.state(assemble) == "COMPLETED", logs(d)
    assert all(c.state(f"{array}_{i}") == "COMPLETED" for i in range(4)), logs(d)
    assert sha(out) == ref, logs(d)


def test_a_cancelled_and_requeued_shard_completes_the_render(slurm_cluster, job, standin_models,
                                                            signing):
    c = slurm_cluster
    d, clip, ref = job
    out = d / "out" / "clip.mp4"
    # two shards, one at a time (one GPU on the node): shard 0 is killed while it renders
    array, assemble = submit(c, d, keys(d, standin_models, clip.path, out, signing), 2,
                             "execution.threads=1")
    deadline = time.monotonic() + 60
    while c.state(f"{array}_0") != "RUNNING":
        assert time.monotonic() < deadline, c.jobs()
        time.sleep(0.2)
    # cancelled once it renders (its work folder is there): a SIGTERM during the interpreter's
    # start, before the renderer's handler is set, would end it without its one-line error
    while not [p for p in out.parent.glob(".*") if p.is_dir() and ".render-" in p.name]:
        assert time.monotonic() < deadline, logs(d)
        time.sleep(0.05)
    c.run("scancel", f"{array}_0")
    c.wait_state(f"{array}_0", {"CANCELLED"}, timeout=30)
    c.run("scontrol", "requeue", f"{array}_0")
    c.wait_done([array], timeout=120 + 2 * c.cred_expire)
    assert all(c.state(f"{array}_{i}") == "COMPLETED" for i in range(2)), logs(d)
    assert "render: error: terminated" in (d / "logs" / f"render-{array}_0.out").read_text()
    # scancel made the array fail its afterok dependency (Slurm keeps a requeued task's earlier
    # failure), so Slurm dropped the assembly job; the same assembly script, submitted again once
    # the array is done, finds every segment (the requeued task skipped the ones it had committed
    # before it was killed) and commits the output
    c.wait_state(assemble, {"CANCELLED", "COMPLETED"}, timeout=30)
    again = c.sbatch(str(d / "logs" / "render-assemble.sbatch"))
    c.wait_done([again], timeout=120)
    assert c.state(again) == "COMPLETED", logs(d)
    assert sha(out) == ref, logs(d)
