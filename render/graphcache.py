"""ONNX Runtime's optimised graphs of the large models, kept in ``cache_dir/onnxruntime``.

Creating a session on the CPU provider optimises the model's graph every time: constant folding
(an fp16 model's weights become fp32 at every load), fusions, the NCHWc layout of convolutions.
For a large model that is a noticeable part of a render's wait for its first frame. ONNX Runtime
can save the graph it optimised (``optimized_model_filepath``, the weights as external data);
loading that leaves nothing to optimise, and the session computes the same outputs bit for bit (tests/test_sessions.py compares them, and a render's SHA-256 with and
without the cache).

The saved graph is specific to the hardware (NCHWc blocks follow the CPU's vector width), so an
entry's key covers the model's SHA-256, the ONNX Runtime version, the optimisation level and the CPU
(model name and feature flags): a node of another CPU kind sharing the cache folder makes its own.

Safety: an entry is written into a temp folder, its files fsynced and stamped (size, times, inode
and SHA-256 of each), then the folder is renamed into place, so a crash leaves no entry or a whole
one (and a temp folder, which the next save removes once the flock its render held is free).
An entry whose files no longer match their stamp is hashed again and removed when the bytes
differ. Saving is skipped when the disk has less free space than twice the model plus a margin; a
cache that cannot be written, or an entry that will not load, only costs time.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import platform
import shutil
import time
import uuid
from pathlib import Path
from typing import Iterator

from .files import file_identity, fsync_dir, sha256_file, write_atomic

log = logging.getLogger(__name__)

GRAPH = "graph.onnx"
DATA = "graph.data"
STAMP = "stamp.json"
LOCK = ".saving"
#: a temp folder without its lock file is left alone this long (it may be a save just starting)
STALE_UNLOCKED_S = 3600
#: free space left on the cache's disk after an entry is written
FREE_MARGIN = 512 << 20


@functools.lru_cache(maxsize=1)
def cpu_identity() -> str:
    """The CPU kind: machine, model name and feature flags (a saved graph's kernels follow them)."""
    model = flags = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                name, _, value = line.partition(":")
                name = name.strip()
                if name in ("model name", "Processor", "cpu model") and not model:
                    model = value.strip()
                elif name in ("flags", "Features") and not flags:
                    flags = " ".join(sorted(value.split()))
                if model and flags:
                    break
    except OSError:
        pass
    return f"{platform.machine()}|{model}|{flags}"


class GraphCache:
    """Saved optimised graphs under ``root``, for models of at least ``min_bytes``."""

    def __init__(self, root: Path, min_bytes: int) -> None:
        self.root = Path(root)
        self.min_bytes = min_bytes

    def wanted(self, model: Path) -> bool:
        try:
            return model.stat().st_size >= self.min_bytes
        except OSError:
            return False

    @staticmethod
    def key(model_sha256: str, ort_version: str, level: str) -> str:
        """Entry name: the model's SHA-256 prefix (to tell entries apart by eye) and a hash of
        everything the saved graph depends on."""
        what = json.dumps({"model": model_sha256, "onnxruntime": ort_version, "level": level,
                           "cpu": cpu_identity()}, sort_keys=True)
        return f"{model_sha256[:16]}-{hashlib.sha256(what.encode()).hexdigest()[:24]}"

    def lookup(self, key: str) -> Path | None:
        """The saved graph of ``key`` when its files are those stamped; None when there is none
        (a damaged entry is removed)."""
        entry = self.root / key
        try:
            stamp = json.loads((entry / STAMP).read_text(encoding="utf-8"))
            files = stamp["files"]
        except FileNotFoundError:
            if entry.exists():                     # entries are renamed in whole, stamp included
                self.discard(key, "no stamp")
            return None
        except (OSError, ValueError, KeyError, TypeError):
            self.discard(key, "unreadable stamp")
            return None
        try:
            if not isinstance(files, dict) or set(files) - {DATA} != {GRAPH}:
                raise ValueError("stamp names other files")
            stale = {name for name, rec in files.items()
                     if any(rec.get(k) != v for k, v in file_identity((entry / name).stat()).items())}
            for name in stale:                     # copied or restored: hash again
                if sha256_file(entry / name) != files[name]["sha256"]:
                    raise ValueError(f"{name} changed")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self.discard(key, str(exc))
            return None
        if stale:                                  # the same bytes: stamp them as they are now
            try:
                self._write_stamp(entry, {n: files[n]["sha256"] for n in files})
            except OSError:
                pass                               # read-only cache: hashed again next time
        return entry / GRAPH

    def discard(self, key: str, why: str) -> None:
        """Remove a damaged entry: first renamed out of the way (a render loading it meanwhile
        reads it whole or not at all), then deleted."""
        entry = self.root / key
        if not entry.exists():
            return
        log.warning("removing damaged graph cache entry %s (%s); it is made again", entry, why)
        trash = self.root / f".{key}.trash-{uuid.uuid4().hex}"
        try:
            os.rename(entry, trash)
        except OSError:
            return                                 # gone already, or not ours to remove
        shutil.rmtree(trash, ignore_errors=True)

    @contextlib.contextmanager
    def saving(self, key: str, model: Path) -> Iterator[Path | None]:
        """Where ONNX Runtime should save the optimised graph of ``model`` (None: not now). After
        the block, the saved files are fsynced, stamped and renamed into place; if the block
        raises, they are removed."""
        tmp: Path | None = None
        held = -1
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            need = 2 * model.stat().st_size + FREE_MARGIN
            free = shutil.disk_usage(self.root).free
            if free < need:
                log.info("not saving the optimised graph of %s: %d MiB free in %s, %d MiB needed",
                         model.name, free >> 20, self.root, need >> 20)
            else:
                self._remove_stale_temps()
                tmp = self.root / f".{key}.tmp-{uuid.uuid4().hex}"
                tmp.mkdir()
                # held while saving: a temp folder whose lock can be taken is a dead render's
                held = os.open(tmp / LOCK, os.O_CREAT | os.O_RDWR, 0o644)
                fcntl.flock(held, fcntl.LOCK_EX)
        except OSError as exc:
            log.warning("cannot save the optimised graph of %s in %s: %s", model.name, self.root,
                        exc.strerror or exc)
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            tmp = None
        try:
            try:
                yield None if tmp is None else tmp / GRAPH
            except BaseException:
                if tmp is not None:
                    shutil.rmtree(tmp, ignore_errors=True)
                raise
            if tmp is not None:
                self._commit(key, tmp, model)
        finally:
            if held >= 0:
                os.close(held)

    def _commit(self, key: str, tmp: Path, model: Path) -> None:
        entry = self.root / key
        try:
            if not (tmp / GRAPH).is_file():
                raise OSError(f"ONNX Runtime did not write {GRAPH}")
            (tmp / LOCK).unlink()                  # still held through its descriptor
            shas = {}
            # the weights file exists when some initializer is large enough to go there
            for name in (GRAPH, DATA) if (tmp / DATA).is_file() else (GRAPH,):
                with open(tmp / name, "rb") as fh:
                    os.fsync(fh.fileno())
                shas[name] = sha256_file(tmp / name)
            self._write_stamp(tmp, shas)
            fsync_dir(tmp)
            try:
                os.rename(tmp, entry)
            except OSError:
                if not entry.is_dir():             # else: another render saved it first
                    raise
            fsync_dir(self.root)
            log.debug("saved the optimised graph of %s in %s", model.name, entry)
        except OSError as exc:
            log.warning("cannot save the optimised graph of %s in %s: %s", model.name, self.root,
                        getattr(exc, "strerror", None) or exc)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _remove_stale_temps(self) -> None:
        """Temp folders of renders killed while saving (each about the size of a model): those
        whose lock can be taken (flock dies with its holder, on any host sharing the folder)."""
        def remove_if_old(folder: Path) -> None:
            try:
                if time.time() - folder.stat().st_mtime > STALE_UNLOCKED_S:
                    shutil.rmtree(folder, ignore_errors=True)
            except OSError:
                pass

        for trash in self.root.glob(".*.trash-*"):   # a discard interrupted by a crash
            remove_if_old(trash)
        for tmp in self.root.glob(".*.tmp-*"):
            try:
                fd = os.open(tmp / LOCK, os.O_RDWR)
            except FileNotFoundError:
                # not locked yet (just made) or being renamed into place: only an old one is stale
                remove_if_old(tmp)
                continue
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue                           # its render is saving it now
            else:
                log.debug("removing %s, left by a killed render", tmp)
                shutil.rmtree(tmp, ignore_errors=True)
            finally:
                os.close(fd)

    @staticmethod
    def _write_stamp(entry: Path, shas: dict[str, str]) -> None:
        files = {name: dict(file_identity((entry / name).stat()), sha256=sha)
                 for name, sha in shas.items()}
        write_atomic(entry / STAMP, json.dumps({"files": files}, indent=1).encode())
