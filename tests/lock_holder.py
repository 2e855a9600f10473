"""Test helper: take a DeviceLock in its own process, hold it, and report events as JSON lines.

usage: lock_holder.py LOCK_DIR DEVICE[,DEVICE...] SLOTS JOB HOLD_S EVENTS_FILE [--timeout S] [--child]
Events: wait (the one waiting line), acquired, child (pid of a spawned `sleep 30`), released,
timeout. Appended one JSON object per line, flushed at once.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from render.devices import detect_devices  # noqa: E402
from render.lock import DeviceLock, LockTimeout  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    for name in ("lock_dir", "device", "slots", "job", "hold_s", "events"):
        ap.add_argument(name)
    ap.add_argument("--timeout", type=float, default=None)
    ap.add_argument("--child", action="store_true")
    a = ap.parse_args()

    def event(kind: str, **kw: object) -> None:
        with open(a.events, "a") as f:
            f.write(json.dumps({"event": kind, "pid": os.getpid(), "t": time.time(), **kw}) + "\n")

    # DEVICE: a name, or several comma-separated (any free one of them is taken)
    lock = DeviceLock(Path(a.lock_dir), detect_devices(["cuda"], fake=a.device), int(a.slots),
                      owner={"job": a.job},
                      timeout=a.timeout, on_wait=lambda line: event("wait", line=line))
    try:
        lock.acquire()
    except LockTimeout as exc:
        event("timeout", message=str(exc), exit_code=exc.exit_code)
        return exc.exit_code
    event("acquired", slot=lock.slot, device=lock.device.label, ordinal=lock.device.ordinal,
          acquired_at=lock.acquired_at)
    if a.child:
        # close_fds=False: only O_CLOEXEC keeps the lock fd out of the child
        child = subprocess.Popen(["sleep", "30"], close_fds=False)
        event("child", child=child.pid)
    time.sleep(float(a.hold_s))
    lock.release()
    event("released", slot=lock.slot, acquired_at=lock.acquired_at, released_at=lock.released_at)
    return 0


if __name__ == "__main__":
    sys.exit(main())
