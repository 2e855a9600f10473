"""The models folder: where each model file lives and whether it matches its pin.

Hashing hundreds of MB on every render would be slow, so a successful verification leaves a
*verified-stamp*: a small JSON file in ``stamp_dir`` (one per model file, keyed by a hash of the
file's absolute path) recording the file's size, mtime_ns, ctime_ns, inode and SHA-256. While
those still match the file on disk, :meth:`ModelStore.verify` trusts the stamp; when any of them
changes (the file was replaced, edited, copied or touched) the file is hashed again. ``force=True``
(used by ``render models verify``) always re-hashes.

The renderer never downloads: :meth:`ModelStore.verify` raises :class:`ModelError` naming the
model and the command that fetches it. An entry with no pin yet (FaceFusion publishes a CRC32
only, so ``render models fetch`` takes the SHA-256 at the first download, see
:mod:`render.models.fetch`) cannot be verified at all: it gets the same kind of line.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Iterable

from render.errors import ModelError

from ..files import file_identity, sha256_file
from .manifest import Manifest, ModelEntry

log = logging.getLogger(__name__)

STAMP_DIR_NAME = "model-stamps"
CHUNK = 1 << 20  # 1 MiB reads


def _hash_file(path: Path) -> str:
    """SHA-256 of a model file (tests count the calls to this function)."""
    return sha256_file(path)


def hash_file(path: Path) -> str:
    """Public entry point; looks ``_hash_file`` up at call time so it can be monkeypatched."""
    return _hash_file(path)


def default_stamp_dir(cache_dir: Path) -> Path:
    return Path(cache_dir) / STAMP_DIR_NAME


#: how the note of an entry pinned by ``render models fetch`` begins (``render models list``)
FIRST_FETCH_NOTE = "pinned at first fetch"


def pinned_at_first_fetch(entry: ModelEntry) -> bool:
    """True for a pin taken by the first fetch of a model FaceFusion gives a CRC32 only."""
    return bool(entry.sha256) and not entry.confirmed and \
        (entry.note or "").startswith(FIRST_FETCH_NOTE)


def not_pinned(entry: ModelEntry) -> ModelError:
    """The one line for an entry whose pin the first fetch has not taken yet."""
    return ModelError(f"model {entry.name} is not pinned yet: FaceFusion publishes a CRC32 only, "
                      f"so its SHA-256 is taken at the first fetch: run `render models fetch "
                      f"{entry.name}`")


def fetch_hint(entry: ModelEntry) -> str:
    """The command that brings this model into place."""
    if entry.urls:
        return f"run `render models fetch {entry.name}`"
    if entry.source:
        return f"run `render models convert {entry.source} {entry.precision}`"
    return f"copy {entry.file} into the models folder (or `render models fetch {entry.name} from=FOLDER`)"


class ModelStore:
    """Model files in ``models_dir``, verified against ``manifest``, stamps in ``stamp_dir``."""

    def __init__(self, models_dir: Path, manifest: Manifest, stamp_dir: Path) -> None:
        self.models_dir = Path(models_dir).expanduser()
        self.manifest = manifest
        self.stamp_dir = Path(stamp_dir).expanduser()

    # -- paths and stamps -----------------------------------------------------------------
    def path(self, entry: ModelEntry) -> Path:
        return self.models_dir / entry.file

    def _stamp_path(self, path: Path) -> Path:
        key = hashlib.sha256(str(Path(os.path.abspath(path))).encode("utf-8")).hexdigest()[:32]
        return self.stamp_dir / f"{key}.json"

    def _read_stamp(self, path: Path) -> dict | None:
        try:
            data = json.loads(self._stamp_path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _stamp_matches(self, path: Path, st: os.stat_result) -> str | None:
        """The stamped SHA-256 if the stamp still describes the file on disk, else None."""
        stamp = self._read_stamp(path)
        if not stamp or stamp.get("path") != str(os.path.abspath(path)):
            return None
        if any(stamp.get(k) != v for k, v in file_identity(st).items()):
            return None
        sha = stamp.get("sha256")
        return sha if isinstance(sha, str) else None

    def write_stamp(self, path: Path, sha256: str, st: os.stat_result | None = None) -> None:
        """Record that ``path`` (as it is now) hashes to ``sha256``. Best effort."""
        try:
            st = st or os.stat(path)
            data = {"path": str(os.path.abspath(path)), "sha256": sha256, **file_identity(st)}
            self.stamp_dir.mkdir(parents=True, exist_ok=True)
            target = self._stamp_path(path)
            tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
            os.replace(tmp, target)
        except OSError as exc:
            log.warning("cannot write verified-stamp for %s in %s (%s); the file will be "
                        "hashed again next time", path, self.stamp_dir, exc.strerror or exc)

    def forget(self, path: Path) -> None:
        try:
            self._stamp_path(path).unlink()
        except OSError:
            pass

    # -- status and verification ----------------------------------------------------------
    def status(self, entry: ModelEntry, *, deep: bool = False) -> str:
        """``verified`` | ``present`` | ``missing`` | ``corrupt``.

        Without ``deep`` this never hashes: ``verified`` comes from a matching stamp, a size
        that differs from the pin is ``corrupt``, anything else that exists is ``present`` (a
        file with no pin yet is always ``present``: there is nothing to check it against).
        """
        path = self.path(entry)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return "missing"
        if not entry.sha256:
            return "present"
        if entry.size is not None and st.st_size != entry.size:
            return "corrupt"
        stamped = self._stamp_matches(path, st)
        if stamped is not None:
            return "verified" if stamped == entry.sha256 else "corrupt"
        if not deep:
            return "present"
        try:
            self.verify(entry, force=True)
        except ModelError:
            return "missing" if not path.exists() else "corrupt"
        return "verified"

    def verify(self, entry: ModelEntry, *, force: bool = False) -> Path:
        """The path of ``entry``'s file once it is known to match its pin; ModelError otherwise."""
        if not entry.sha256:
            raise not_pinned(entry)
        path = self.path(entry)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise ModelError(f"model {entry.name} is missing from {self.models_dir}: "
                             f"{fetch_hint(entry)}") from None
        if not path.is_file():
            raise ModelError(f"model {entry.name} at {path} is not a file: remove it and "
                             f"{fetch_hint(entry)}")
        if entry.size is not None and st.st_size != entry.size:
            self.forget(path)
            raise ModelError(
                f"model {entry.name} at {path} is corrupt ({st.st_size} bytes, expected "
                f"{entry.size}): {fetch_hint(entry)}")
        if not force:
            stamped = self._stamp_matches(path, st)
            if stamped == entry.sha256:
                log.debug("model %s verified by stamp", entry.name)
                return path
        log.info("verifying %s (%s)", entry.name, path)
        sha = hash_file(path)
        if sha != entry.sha256:
            self.forget(path)
            raise ModelError(
                f"model {entry.name} at {path} is corrupt (sha256 {sha}, expected "
                f"{entry.sha256}): {fetch_hint(entry)}")
        st_after = os.stat(path)
        if file_identity(st_after) == file_identity(st):
            self.write_stamp(path, sha, st_after)
        return path

    def sha256(self, entry: ModelEntry) -> str:
        """The verified SHA-256 of ``entry``'s file (equal to the pin)."""
        self.verify(entry)
        return entry.sha256

    def verify_required(self, required: Iterable[tuple[str, str]]) -> dict[tuple[str, str], ModelEntry]:
        """Resolve and verify each (name, precision) and the models each one needs (``needs``,
        as (name, "fp32")); the renderer calls this before decoding."""
        out: dict[tuple[str, str], ModelEntry] = {}
        todo = list(required)
        while todo:
            name, precision = todo.pop(0)
            if (name, precision) in out:
                continue
            entry = self.manifest.resolve(name, precision)
            self.verify(entry)
            out[(name, precision)] = entry
            todo += [(need, "fp32") for need in entry.needs]
        return out
