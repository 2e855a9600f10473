"""A shared box: the device lock around real renders, the job spool with real worker processes,
folder mode as a batch. No GPU: the lock tests use a fake device name."""
from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from render.standins import media as mf
from conftest import ROOT, cli_env, model_args, run_cli


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return mf.make_clip(tmp_path_factory.mktemp("spoolclip") / "clip.mp4", width=480, height=270,
                        seconds=4.0)


def start(*args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "render", *args], env=cli_env(**env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def common(workdir: Path, standin_models: Path, *extra: str) -> list[str]:
    return ["profile=low", "segment.seconds=1", "execution.threads=1", "mark.enabled=false",
            f"lock_dir={workdir / 'locks'}", "lock.device=fake-gpu-0",
            *model_args(standin_models, workdir / "cache"), *extra]


def hold_interval(report: Path) -> tuple[float, float]:
    from datetime import datetime

    data = json.loads(report.read_text())
    end = datetime.fromisoformat(data["timing"]["ended"]).timestamp()
    return data["lock"]["acquired_ts"], end


# -- the device lock ------------------------------------------------------------------------------
@pytest.mark.parametrize("slots", [1, 2])
def test_two_renders_on_one_device(workdir, standin_models, clip, slots):
    outs = [workdir / "out" / f"r{i}.mp4" for i in (1, 2)]
    procs = []
    for out in outs:
        procs.append(start(*common(workdir, standin_models, f"lock.slots={slots}"),
                           f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                           f"output={out}", "progress=off"))
        time.sleep(0.4)
    errs = []
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        errs.append(err)
    for out in outs:
        assert mf.probe_counts(out).frames == clip.frame_count
    a, b = (hold_interval(out.with_name(out.name + ".report.json")) for out in outs)
    waiting = [ln for e in errs for ln in e.splitlines() if "waiting for fake-gpu-0" in ln]
    if slots == 1:
        assert len(waiting) == 1, errs
        assert "held by job cli-" in waiting[0] and "pid" in waiting[0]
        assert a[1] <= b[0] or b[1] <= a[0], f"lock holds overlap: {a} {b}"
    else:
        assert waiting == []
        assert a[0] < b[1] and b[0] < a[1], f"with 2 slots the renders should overlap: {a} {b}"


def test_two_renders_take_two_free_gpus(workdir, standin_models, clip):
    """Two (fake) GPUs, one slot each: two renders started together run at once, each on its own
    card, and neither waits; the reports say which card (and its CUDA number)."""
    outs = [workdir / "out" / f"g{i}.mp4" for i in (1, 2)]
    procs = [start(*common(workdir, standin_models), "lock.device=fake-gpu-0,fake-gpu-1",
                   f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                   f"output={out}", "progress=off") for out in outs]
    errs = []
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        errs.append(err)
    assert not [ln for e in errs for ln in e.splitlines() if "waiting for" in ln], errs
    locks = [json.loads(out.with_name(out.name + ".report.json").read_text())["lock"]
             for out in outs]
    assert sorted((lk["device"], lk["cuda_device"]) for lk in locks) == \
        [("fake-gpu-0", 0), ("fake-gpu-1", 1)]
    a, b = (hold_interval(out.with_name(out.name + ".report.json")) for out in outs)
    assert a[0] < b[1] and b[0] < a[1], f"the renders should overlap: {a} {b}"


def test_kill_9_of_the_holder_lets_the_waiter_start_within_a_second(workdir, standin_models, tmp_path):
    long = mf.make_clip(tmp_path / "long.mp4", width=640, height=360, seconds=20.0)
    holder = start(*common(workdir, standin_models), f"source={workdir / 'in' / 'source.jpg'}",
                   f"target={long.path}", f"output={workdir / 'out' / 'long.mp4'}", "progress=off")
    lock_file = workdir / "locks" / "fake-gpu-0-0.lock"
    deadline = time.time() + 60
    while time.time() < deadline and not (lock_file.exists() and lock_file.read_text().strip()):
        time.sleep(0.05)
    small = workdir / "out" / "small.mp4"
    waiter = start(*common(workdir, standin_models), f"source={workdir / 'in' / 'source.jpg'}",
                   f"target={long.path}", "trim=0f-10f", f"output={small}", "progress=off")
    time.sleep(2.0)
    assert waiter.poll() is None
    killed_at = time.time()
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    _, err = waiter.communicate(timeout=120)
    assert waiter.returncode == 0, err
    acquired, _ = hold_interval(small.with_name("small.mp4.report.json"))
    assert acquired - killed_at < 1.0
    children = subprocess.run(["pgrep", "-f", f"ffmpeg.*{long.path}"], capture_output=True, text=True)
    assert children.stdout.strip() == ""


# -- the spool and its workers -------------------------------------------------------------------------
def submit(workdir: Path, *keys: str) -> str:
    r = run_cli("submit", f"spool_dir={workdir / 'spool'}", *keys)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def jobs(workdir: Path) -> dict[str, str]:
    spool = workdir / "spool"
    return {p.stem: state for state in ("queued", "running", "done", "failed", "cancelled")
            for p in (spool / state).glob("*.yaml")}


def worker(workdir: Path, standin_models: Path, *extra: str) -> subprocess.Popen:
    return start("work", f"spool_dir={workdir / 'spool'}", *common(workdir, standin_models),
                 "progress=off", "--verbose", *extra)


def test_two_workers_render_every_job_exactly_once(workdir, standin_models, tmp_path):
    short = mf.make_clip(tmp_path / "s.mp4", width=320, height=240, seconds=1.0)
    ids = [submit(workdir, "profile=low", f"source={workdir / 'in' / 'source.jpg'}",
                  f"target={short.path}", f"output={workdir / 'out' / f'j{i}.mp4'}")
           for i in range(6)]
    assert len(set(ids)) == 6 and all(len(i) == 8 for i in ids)
    ws = [worker(workdir, standin_models, "lock.slots=2") for _ in range(2)]
    logs = []
    for w in ws:
        _, err = w.communicate(timeout=300)
        assert w.returncode == 0, err
        logs.append(err)
    assert jobs(workdir) == {i: "done" for i in ids}
    done_lines = [ln for log in logs for ln in log.splitlines() if " done: " in ln]
    for i in ids:
        assert sum(f"job {i} done: 1 rendered" in ln for ln in done_lines) == 1, done_lines
    for i in range(6):
        data = json.loads((workdir / "out" / f"j{i}.mp4.report.json").read_text())
        assert data["job"]["job"] in ids and data["job"]["owner"]


def test_a_worker_killed_mid_job_is_resumed_by_another(workdir, standin_models, tmp_path):
    from test_segments import committed

    clip = mf.make_clip(tmp_path / "k.mp4", width=640, height=360, seconds=6.0)
    ref = workdir / "ref" / "k.mp4"
    r = run_cli(*common(workdir, standin_models), f"source={workdir / 'in' / 'source.jpg'}",
                f"target={clip.path}", f"output={ref}")
    assert r.returncode == 0, r.stderr
    out = workdir / "out" / "k.mp4"
    job = submit(workdir, "profile=low", "segment.seconds=1", "mark.enabled=false",
                 f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}", f"output={out}")
    first = worker(workdir, standin_models)
    deadline = time.time() + 120
    while time.time() < deadline:
        if len(committed(workdir / "out")) >= 2:
            break
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    assert jobs(workdir)[job] == "running"
    second = worker(workdir, standin_models)
    _, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    assert f"job {job}: its worker died; resuming it" in err
    assert jobs(workdir)[job] == "done"
    data = json.loads(out.with_name("k.mp4.report.json").read_text())
    # each segment rendered decodes its own frames, its pre-roll (15 frames in profile low, as
    # many as there are) and its look-ahead (3, where the clip has them): nothing resumed
    rendered = [s["frames"] for s in data["segments"] if s["state"] == "rendered"]
    assert data["timing"]["frames_decoded"] == sum(
        b - a + min(15, a) + min(3, clip.frame_count - b) for a, b in rendered)
    assert [s["state"] for s in data["segments"]][:2] == ["resumed", "resumed"]
    assert sha(out) == sha(ref)


def test_sigterm_finishes_the_segment_and_requeues(workdir, standin_models, tmp_path):
    from test_segments import work_dirs

    clip = mf.make_clip(tmp_path / "t.mp4", width=640, height=360, seconds=6.0)
    job = submit(workdir, "profile=low", "segment.seconds=1", f"source={workdir / 'in' / 'source.jpg'}",
                 f"target={clip.path}", f"output={workdir / 'out' / 't.mp4'}")
    w = worker(workdir, standin_models)
    deadline = time.time() + 120
    while time.time() < deadline and not [p for d in work_dirs(workdir / "out")
                                          for p in d.glob("seg-*.json")]:
        time.sleep(0.05)
    w.send_signal(signal.SIGTERM)
    _, err = w.communicate(timeout=60)
    assert jobs(workdir)[job] == "queued", err
    assert f"job {job}: requeued" in err
    (work,) = work_dirs(workdir / "out")
    assert not list(work.glob("*.tmp-*")), "a segment was cut off instead of finished"
    r = run_cli("work", f"spool_dir={workdir / 'spool'}", *common(workdir, standin_models))
    assert r.returncode == 0, r.stderr
    assert jobs(workdir)[job] == "done"


def test_cancel_a_running_job_stops_within_a_segment(workdir, standin_models, tmp_path):
    clip = mf.make_clip(tmp_path / "c.mp4", width=640, height=360, seconds=8.0)
    job = submit(workdir, "profile=low", "segment.seconds=1", f"source={workdir / 'in' / 'source.jpg'}",
                 f"target={clip.path}", f"output={workdir / 'out' / 'c.mp4'}")
    w = worker(workdir, standin_models)
    deadline = time.time() + 60
    while time.time() < deadline and jobs(workdir).get(job) != "running":
        time.sleep(0.05)
    time.sleep(1.0)
    r = run_cli("jobs", "cancel", job, f"spool_dir={workdir / 'spool'}")
    assert r.returncode == 0 and r.stdout.strip() == f"{job} cancelling"
    _, err = w.communicate(timeout=60)
    assert jobs(workdir)[job] == "cancelled", err
    assert not (workdir / "out" / "c.mp4").exists()
    r = run_cli("jobs", "retry", job, f"spool_dir={workdir / 'spool'}")
    assert r.returncode == 0 and jobs(workdir)[job] == "queued"
    listing = run_cli("jobs", f"spool_dir={workdir / 'spool'}")
    assert job in listing.stdout and "queued #1" in listing.stdout


def test_a_corrupt_job_file_fails_and_the_others_run(workdir, standin_models, tmp_path):
    short = mf.make_clip(tmp_path / "s.mp4", width=320, height=240, seconds=0.6)
    good = submit(workdir, "profile=low", f"source={workdir / 'in' / 'source.jpg'}",
                  f"target={short.path}", f"output={workdir / 'out' / 'g.mp4'}")
    (workdir / "spool" / "queued" / "0badf00d.yaml").write_text("settings: [unclosed\n")
    r = run_cli("work", f"spool_dir={workdir / 'spool'}", *common(workdir, standin_models))
    assert r.returncode == 0, r.stderr
    assert jobs(workdir) == {good: "done", "0badf00d": "failed"}
    result = json.loads((workdir / "spool" / "results" / "0badf00d.json").read_text())
    assert "cannot be read" in result["error"] and "0badf00d.yaml" in result["error"]


def test_submit_a_job_file_and_bad_submissions(workdir, standin_models, tmp_path):
    a = mf.make_clip(tmp_path / "a.mp4", width=320, height=240, seconds=0.6)
    b = mf.make_clip(tmp_path / "b.mp4", width=320, height=240, seconds=0.6)
    jobfile = tmp_path / "job.yaml"
    jobfile.write_text(yaml.safe_dump({"source": str(workdir / "in" / "source.jpg"),
                                       "targets": ["a.mp4", "b.mp4"], "output_dir": "rendered",
                                       "profile": "low", "overrides": {"detect.size": 320},
                                       "priority": 2}))
    job = submit(workdir, str(jobfile))
    spec = yaml.safe_load((workdir / "spool" / "queued" / f"{job}.yaml").read_text())
    assert spec["priority"] == 2 and spec["settings"]["output_dir"] == str(tmp_path / "rendered")
    assert spec["meta"]["targets"] == [str(a.path), str(b.path)]
    r = run_cli("work", f"spool_dir={workdir / 'spool'}", *common(workdir, standin_models))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "rendered").iterdir()) == [
        "a.mp4", "a.mp4.report.json", "b.mp4", "b.mp4.report.json"]
    bad = run_cli("submit", f"spool_dir={workdir / 'spool'}", "detect.sise=3", "output=x.mp4")
    assert bad.returncode == 2 and "did you mean detect.size" in bad.stderr
    bad = run_cli("submit", f"spool_dir={workdir / 'spool'}", f"target={tmp_path / 'nope.mp4'}",
                  "output=x.mp4")
    assert bad.returncode == 2 and "target not found" in bad.stderr


# -- folder mode as a batch -------------------------------------------------------------------------
def test_folder_mode_goes_on_past_a_bad_file_and_reruns_are_idempotent(workdir, standin_models):
    for name in ("a.mp4", "b.mp4", "c.mp4"):
        mf.make_clip(workdir / "in" / name, width=320, height=240, seconds=0.6)
    bad = workdir / "in" / "bad.mov"
    bad.write_bytes(b"not a video at all" * 100)
    args = (*common(workdir, standin_models), f"input_dir={workdir / 'in'}",
            f"output_dir={workdir / 'out'}", "progress=off")
    r = run_cli(*args)
    assert r.returncode == 3, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last == "render: error: 3 rendered, 1 failed: bad.mov", last
    assert len([ln for ln in r.stderr.splitlines() if ln.startswith("render: bad.mov: ")]) == 1, r.stderr
    outs = sorted(p.name for p in (workdir / "out").iterdir() if p.suffix == ".mp4")
    assert outs == ["a.mp4", "b.mp4", "c.mp4"]
    mtimes = {p: p.stat().st_mtime_ns for p in (workdir / "out").iterdir()}
    bad.unlink()
    r = run_cli(*args, "--verbose")
    assert r.returncode == 0, r.stderr
    assert "0 rendered, 3 up to date" in r.stderr
    assert {p: p.stat().st_mtime_ns for p in (workdir / "out").iterdir()} == mtimes


def test_compose_has_the_queue_service_and_the_shared_lock_mount():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    q = compose["services"]["render-queue"]
    assert q["restart"] == "unless-stopped" and q["network_mode"] == "none"
    assert q["command"][:2] == ["work", "follow=true"]
    mounts = " ".join(q["volumes"])
    assert "render-locks:/locks" in mounts and "/data/jobs" in mounts
    for name in ("render", "render-cpu"):
        assert "render-locks:/locks" in compose["services"][name]["volumes"], name
    # one volume name for every compose project on the host: they all see the same locks
    assert compose["volumes"]["render-locks"]["name"].endswith("render-locks}")


def test_an_unknown_key_in_a_job_file_names_the_file(workdir, tmp_path):
    jobfile = tmp_path / "job.yaml"
    jobfile.write_text(yaml.safe_dump({"source": str(workdir / "in" / "source.jpg"),
                                       "target": "a.mp4", "output": "x.mp4",
                                       "overrides": {"detect.sise": 320}}))
    r = run_cli("submit", f"spool_dir={workdir / 'spool'}", str(jobfile))
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert line == f"render: error: job file {jobfile}: unknown key 'detect.sise'; did you mean " \
        f"{line.split('did you mean ', 1)[1]}" and "detect.size" in line, line


# -- progress per frame ---------------------------------------------------------------------------
def test_job_progress_is_written_at_most_every_second_and_at_once_on_a_new_stage(tmp_path):
    from render.job_progress import JobProgress
    from render.spool import Spool

    spool = Spool(tmp_path / "spool")
    spool.ensure()
    now = [100.0]
    writes = []
    spool.progress = lambda job_id, **data: writes.append(dict(data))   # what would be written
    p = JobProgress(spool, "j1", clock=lambda: now[0])
    p.waiting("waiting for fake-gpu-0: held by job abc of bea")
    assert writes[-1] == {"state": "waiting", "waiting": "waiting for fake-gpu-0: held by job abc of bea"}
    p.segment("clip.mp4", None, 0, 1)
    for frame in range(1, 51):                # 50 frames over 2.5 s: at most one write a second
        now[0] += 0.05
        p.frames("clip.mp4", "rendering", frame, 60)
    rendering = [w for w in writes if w["state"] == "rendering" and "frames_done" in w]
    assert 2 <= len(rendering) <= 4, rendering
    last = rendering[-1]
    assert last["frames_total"] == 60 and last["segments_total"] == 1
    assert last["fps"] == pytest.approx(20.0, rel=0.05)
    assert last["eta_s"] == pytest.approx((60 - last["frames_done"]) / 20.0, rel=0.1)
    p.frames("clip.mp4", "marking", 60, 60)   # a new stage is written at once
    assert writes[-1]["state"] == "marking" and writes[-1]["eta_s"] is None


def test_a_worker_records_frames_within_a_single_segment(workdir, standin_models, tmp_path):
    clip = mf.make_clip(tmp_path / "one.mp4", width=1280, height=720, seconds=9.0)
    job = submit(workdir, "profile=low", "segment.seconds=10", "mark.enabled=false",
                 f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                 f"output={workdir / 'out' / 'one.mp4'}")
    w = worker(workdir, standin_models)
    seen = []
    path = workdir / "spool" / "progress" / f"{job}.json"
    deadline = time.time() + 120
    while w.poll() is None and time.time() < deadline:
        try:
            data = json.loads(path.read_text())     # renamed into place: never half-written
        except FileNotFoundError:
            data = None
        if data and data.get("frames_total") and (not seen or seen[-1] != data["frames_done"]):
            seen.append(data["frames_done"])
            assert data["segments_total"] == 1 and data["frames_total"] == clip.frame_count
        time.sleep(0.05)
    _, err = w.communicate(timeout=60)
    assert w.returncode == 0, err
    assert jobs(workdir)[job] == "done"
    moved = [n for n in seen if 0 < n < clip.frame_count]
    assert len(moved) >= 2, seen             # the count moved within the one segment
    assert seen == sorted(seen)
