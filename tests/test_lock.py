"""render.lock with real processes: waiting, slots, kill -9, close-on-exec, timeout, listing."""
from __future__ import annotations

import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from render.errors import RenderFailed
from render.gpus import pick_gpu
from render.devices import Device, detect_device, detect_devices
from render.lock import DeviceLock, LockTimeout, holders, lock_needed, lock_path

HELPER = Path(__file__).resolve().parent / "lock_holder.py"


class Procs:
    """Starts lock_holder.py processes and reads their events; kills whatever is left."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.lock_dir = tmp / "locks"
        self.procs: list[subprocess.Popen] = []
        self.pids: list[int] = []           # grandchildren (sleep 30)

    def start(self, name: str, device: str = "fake-dev", slots: int = 1, hold: float = 30,
              *extra: str) -> tuple[subprocess.Popen, Path]:
        events = self.tmp / f"{name}.jsonl"
        p = subprocess.Popen([sys.executable, str(HELPER), str(self.lock_dir), device, str(slots),
                              name, str(hold), str(events), *extra],
                             stdin=subprocess.DEVNULL)
        self.procs.append(p)
        return p, events

    @staticmethod
    def events(path: Path, kind: str | None = None) -> list[dict]:
        if not path.exists():
            return []
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [r for r in rows if kind is None or r["event"] == kind]

    def wait_for(self, path: Path, kind: str, timeout: float = 10) -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            rows = self.events(path, kind)
            if rows:
                return rows[0]
            time.sleep(0.02)
        raise AssertionError(f"no {kind} event in {path} after {timeout} s")

    def cleanup(self) -> None:
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)


@pytest.fixture
def procs(tmp_path):
    ps = Procs(tmp_path)
    try:
        yield ps
    finally:
        ps.cleanup()


def test_second_waits_says_so_once_and_holds_do_not_overlap(procs):
    a, a_ev = procs.start("job-a", hold=1.0)
    procs.wait_for(a_ev, "acquired")
    b, b_ev = procs.start("job-b", hold=0.2)
    assert a.wait(timeout=10) == 0 and b.wait(timeout=10) == 0
    waits = procs.events(b_ev, "wait")
    assert len(waits) == 1
    line = waits[0]["line"]
    assert line.startswith("waiting for fake-dev: held by job job-a (")
    assert f"pid {a.pid}" in line and "\n" not in line
    ra, rb = procs.events(a_ev, "released")[0], procs.events(b_ev, "released")[0]
    assert ra["released_at"] <= rb["acquired_at"]          # no overlap
    assert rb["acquired_at"] - ra["released_at"] < 1.0      # and B noticed quickly
    assert not procs.events(a_ev, "wait")


def test_two_slots_let_two_renders_overlap(procs):
    a, a_ev = procs.start("job-a", "fake-dev", 2, 1.0)
    b, b_ev = procs.start("job-b", "fake-dev", 2, 1.0)
    assert a.wait(timeout=10) == 0 and b.wait(timeout=10) == 0
    ra, rb = procs.events(a_ev, "released")[0], procs.events(b_ev, "released")[0]
    assert {ra["slot"], rb["slot"]} == {0, 1}
    assert max(ra["acquired_at"], rb["acquired_at"]) < min(ra["released_at"], rb["released_at"])
    assert not procs.events(a_ev, "wait") and not procs.events(b_ev, "wait")


def test_waiter_gets_the_lock_within_a_second_of_kill_9(procs):
    a, a_ev = procs.start("job-a", hold=30)
    procs.wait_for(a_ev, "acquired")
    b, b_ev = procs.start("job-b", hold=0)
    procs.wait_for(b_ev, "wait")
    killed = time.time()
    a.send_signal(signal.SIGKILL)
    got = procs.wait_for(b_ev, "acquired")
    assert got["acquired_at"] - killed < 1.0
    assert b.wait(timeout=10) == 0


def test_lock_fd_is_not_inherited_by_children(procs):
    a, a_ev = procs.start("job-a", "fake-dev", 1, 30, "--child")
    child = procs.wait_for(a_ev, "child")["child"]
    procs.pids.append(child)
    a.send_signal(signal.SIGKILL)
    a.wait(timeout=10)
    os.kill(child, 0)                                       # the child still runs ...
    assert Path(f"/proc/{child}/stat").read_text().split(")")[1].split()[0] != "Z"
    [s] = holders(procs.lock_dir)
    assert not s.held                                       # ... and the lock is free
    with DeviceLock(procs.lock_dir, "fake-dev", owner={"job": "me"}, timeout=1) as lock:
        assert lock.slot == 0
        assert fcntl.fcntl(lock._fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC


def test_timeout_is_a_one_line_render_error_naming_device_and_holder(tmp_path):
    dev = Device("gpu-GPU-1234", "GPU 0 (Fake Card)")
    with DeviceLock(tmp_path, dev, owner={"job": "3f2a"}, timeout=None):
        waiting: list[str] = []
        waiter = DeviceLock(tmp_path, dev, owner={"job": "other"}, timeout=0.5,
                            on_wait=waiting.append)
        t0 = time.monotonic()
        with pytest.raises(LockTimeout) as exc:
            waiter.acquire()
        assert 0.5 <= time.monotonic() - t0 < 1.5
    assert isinstance(exc.value, RenderFailed) and exc.value.exit_code == 5
    msg = str(exc.value)
    assert "\n" not in msg and "GPU 0 (Fake Card)" in msg and "job 3f2a" in msg
    assert f"pid {os.getpid()}" in msg
    assert len(waiting) == 1 and waiting[0].startswith("waiting for GPU 0 (Fake Card): held by")
    assert not waiter.locked


def test_all_slots_busy_names_every_holder_and_a_freed_slot_is_taken(tmp_path):
    one = DeviceLock(tmp_path, "cpu", 2, owner={"job": "j1"}, timeout=None).acquire()
    two = DeviceLock(tmp_path, "cpu", 2, owner={"job": "j2"}, timeout=None).acquire()
    waiting: list[str] = []
    with pytest.raises(LockTimeout):
        DeviceLock(tmp_path, "cpu", 2, owner={"job": "j3"}, timeout=0.3,
                   on_wait=waiting.append).acquire()
    assert waiting and waiting[0].startswith("waiting for cpu: all 2 slots busy: job j1 (")
    assert "job j2 (" in waiting[0]
    one.release()
    with DeviceLock(tmp_path, "cpu", 2, owner={"job": "j3"}, timeout=1) as three:
        assert three.slot == 0
    two.release()
    assert one.released_at >= one.acquired_at


def test_holders_lists_the_live_holder_not_a_dead_one(procs):
    live, live_ev = procs.start("job-live", "dev-live", 1, 30)
    dead, dead_ev = procs.start("job-dead", "dev-dead", 1, 30)
    procs.wait_for(live_ev, "acquired")
    procs.wait_for(dead_ev, "acquired")
    dead.send_signal(signal.SIGKILL)                        # leaves its JSON behind, stale
    dead.wait(timeout=10)
    assert "job-dead" in lock_path(procs.lock_dir, "dev-dead", 0).read_text()
    by_dev = {s.device_id: s for s in holders(procs.lock_dir)}
    assert set(by_dev) == {"dev-live", "dev-dead"}
    assert by_dev["dev-live"].held and by_dev["dev-live"].holder["job"] == "job-live"
    assert by_dev["dev-live"].holder["pid"] == live.pid
    assert by_dev["dev-live"].holder["device"] == "dev-live"
    assert not by_dev["dev-dead"].held and by_dev["dev-dead"].holder is None
    # the probe did not disturb the holder, and works from inside a holding process too
    with DeviceLock(procs.lock_dir, "dev-dead", owner={"job": "mine"}, timeout=1):
        assert {s.device_id: s.held for s in holders(procs.lock_dir)} == \
            {"dev-live": True, "dev-dead": True}
    assert lock_path(procs.lock_dir, "dev-dead", 0).read_text() == ""   # truncated on release


def test_lock_folder_and_files_are_shared(tmp_path):
    d = tmp_path / "a" / "locks"
    with DeviceLock(d, "x", owner={"job": "j"}, timeout=1) as lock:
        assert stat.S_IMODE(d.stat().st_mode) == 0o1777
        assert stat.S_IMODE(lock.path.stat().st_mode) == 0o666
        info = json.loads(lock.path.read_text())
        assert {"job", "pid", "host", "user", "device", "since"} <= set(info)


def test_lock_not_needed_under_slurm():
    assert lock_needed({"SLURM_JOB_ID": "1234"}) is False
    assert lock_needed({}) is True


def test_detect_device():
    assert detect_device(["cuda"], fake="fake gpu/1") == Device("fake_gpu_1", "fake gpu/1", 0)
    assert detect_device(["cpu"]) == Device("cpu", "cpu")
    assert detect_device(["cuda", "cpu"], available=["CPUExecutionProvider"]).id == "cpu"
    assert detect_device(["cuda"], env={"CUDA_VISIBLE_DEVICES": ""},
                         available=["CUDAExecutionProvider"]).id == "cpu"


def test_pick_gpu_follows_cuda_visible_devices():
    gpus = [(0, "GPU-aaaa-1111", "Card A"), (1, "GPU-bbbb-2222", "Card B")]
    assert pick_gpu(gpus, None) == gpus[0]
    assert pick_gpu(gpus, "1") == gpus[1]
    assert pick_gpu(gpus, "GPU-bbbb") == gpus[1]
    assert pick_gpu(gpus, "bbbb-2222") == gpus[1]
    assert pick_gpu(gpus, "7") is None


# -- several GPUs: any free one ----------------------------------------------------------------------
GPUS = [(0, "GPU-aaaa-1111", "Card A"), (1, "GPU-bbbb-2222", "Card B"), (2, "GPU-cccc-3333", "Card C")]
CUDA = ["CUDAExecutionProvider", "CPUExecutionProvider"]


@pytest.mark.parametrize("visible,want", [
    (None, [("gpu-GPU-aaaa-1111", 0), ("gpu-GPU-bbbb-2222", 1), ("gpu-GPU-cccc-3333", 2)]),
    ("2,0", [("gpu-GPU-cccc-3333", 0), ("gpu-GPU-aaaa-1111", 1)]),     # CUDA's numbering
    ("GPU-bbbb,0", [("gpu-GPU-bbbb-2222", 0), ("gpu-GPU-aaaa-1111", 1)]),
    ("1,7,0", [("gpu-GPU-bbbb-2222", 0)]),     # CUDA stops at the first entry matching no GPU
    ("1,-1,0", [("gpu-GPU-bbbb-2222", 0)]),
    ("", [("cpu", None)]),
    ("MIG-x1,MIG-x2", [("gpu-MIG-x1", 0), ("gpu-MIG-x2", 1)]),
])
def test_detect_devices_lists_every_visible_gpu_in_cuda_numbering(visible, want):
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    got = detect_devices(["cuda", "cpu"], env=env, available=CUDA, found=GPUS)
    assert [(d.id, d.ordinal) for d in got] == want
    if visible == "2,0":
        assert got[0].label == "GPU 2 (Card C)"
    assert detect_devices(["cpu"], env=env, available=CUDA, found=GPUS) == [Device("cpu", "cpu")]
    assert detect_devices(["cuda"], fake="gpu-a, gpu-b") == [Device("gpu-a", "gpu-a", 0),
                                                           Device("gpu-b", "gpu-b", 1)]


def test_renders_spread_over_the_gpus_before_two_share_one(tmp_path):
    """Two GPUs with two slots each: the first two renders take slot 0 of each GPU, the third
    the second slot of the first GPU; a freed slot is taken again."""
    devices = detect_devices(["cuda"], fake="gpu-a,gpu-b")
    held = [DeviceLock(tmp_path, devices, 2, owner={"job": f"j{i}"}, timeout=1).acquire()
            for i in range(3)]
    assert [(h.device.label, h.slot) for h in held] == [("gpu-a", 0), ("gpu-b", 0), ("gpu-a", 1)]
    assert json.loads(held[1].path.read_text())["cuda_device"] == 1
    held[1].release()
    with DeviceLock(tmp_path, devices, 2, owner={"job": "j3"}, timeout=1) as again:
        assert (again.device.label, again.slot) == ("gpu-b", 0)
    for h in held:
        h.release()


def test_a_render_takes_any_free_gpu_and_waits_only_when_all_are_busy(procs):
    """Three renders, two GPUs: the first two run at once on different cards, the third waits
    for either (one line naming both holders) and takes the card freed by a kill -9."""
    a, a_ev = procs.start("job-a", "gpu-a,gpu-b", 1, 30)
    b, b_ev = procs.start("job-b", "gpu-a,gpu-b", 1, 30)
    got = {procs.wait_for(a_ev, "acquired")["device"], procs.wait_for(b_ev, "acquired")["device"]}
    assert got == {"gpu-a", "gpu-b"}
    assert not procs.events(a_ev, "wait") and not procs.events(b_ev, "wait")
    c, c_ev = procs.start("job-c", "gpu-a,gpu-b", 1, 0.1)
    line = procs.wait_for(c_ev, "wait")["line"]
    assert line.startswith("waiting for gpu-a or gpu-b: all 2 slots busy: ")
    assert "job job-a (" in line and "job job-b (" in line
    freed = procs.wait_for(b_ev, "acquired")["device"]
    b.send_signal(signal.SIGKILL)
    took = procs.wait_for(c_ev, "acquired", timeout=5)
    assert took["device"] == freed and took["ordinal"] == ["gpu-a", "gpu-b"].index(freed)
    assert c.wait(timeout=10) == 0
