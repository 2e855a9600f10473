"""What a measured process does to the machine: files it writes, and the peak RSS of its tree."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path


Snapshot = dict[str, tuple[int, int, int]]   # path -> (inode, size, mtime_ns)


def snapshot(dirs: list[Path], exclude: list[Path]) -> Snapshot:
    snap: Snapshot = {}
    excl = [str(e) for e in exclude]
    for d in dirs:
        for root, subdirs, files in os.walk(d, onerror=lambda e: None):
            if any(root == e or root.startswith(e + os.sep) for e in excl):
                subdirs[:] = []
                continue
            for name in files:
                p = os.path.join(root, name)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                snap[p] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return snap


def written(before: Snapshot, after: Snapshot, ignore: set[str]) -> tuple[int, list[tuple[str, int]]]:
    """Bytes of every file created (or replaced) or grown between two snapshots; rewritten
    same-size files count whole."""
    total, files = 0, []
    for p, (ino, size, mtime) in after.items():
        if p in ignore:
            continue
        old = before.get(p)
        if old is None or old[0] != ino:
            n = size
        elif size > old[1]:
            n = size - old[1]
        elif mtime != old[2]:
            n = size
        else:
            continue
        total += n
        files.append((p, n))
    return total, sorted(files, key=lambda f: -f[1])



def _read_status(pid: int) -> tuple[int, int] | None:
    """(VmHWM, VmRSS) in KiB."""
    try:
        hwm = rss = 0
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        return hwm, rss
    except (OSError, ValueError, IndexError):
        return None


def _ppids() -> dict[int, int]:
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                data = fh.read()
            out[int(name)] = int(data[data.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def _role(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "other"
    if b"pipe:1" in argv:
        return "decoder"
    if b"pipe:0" in argv:
        return "encoder"
    return "other"


class TreeMonitor(threading.Thread):
    """Samples the RSS of a process and its descendants: per-process peak (VmHWM) and the peak
    of their sum. Descendants are looked up every ``scan`` seconds, sizes every ``interval``."""

    def __init__(self, pid: int, interval: float = 0.1, scan: float = 0.5) -> None:
        super().__init__(name=f"monitor-{pid}", daemon=True)
        self.pid, self.interval, self.scan = pid, interval, scan
        self.stop = threading.Event()
        self.peaks: dict[int, int] = {}      # pid -> VmHWM KiB
        self.roles: dict[int, str] = {}
        self.tree_peak_kb = 0

    def run(self) -> None:
        known = [self.pid]
        next_scan = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= next_scan:
                ppids = _ppids()
                tree, frontier = [self.pid], [self.pid]
                while frontier:
                    kids = [p for p, pp in ppids.items() if pp in frontier]
                    tree += kids
                    frontier = kids
                known = tree
                for p in tree:
                    if p != self.pid and p not in self.roles:
                        self.roles[p] = _role(p)
                next_scan = now + self.scan
            total = 0
            for p in known:
                st = _read_status(p)
                if st is None:
                    continue
                hwm, rss = st
                self.peaks[p] = max(self.peaks.get(p, 0), hwm)
                total += rss
            self.tree_peak_kb = max(self.tree_peak_kb, total)
            self.stop.wait(self.interval)

    def child_peak_kb(self, role: str) -> int:
        return sum(v for p, v in self.peaks.items() if self.roles.get(p) == role)
