"""The download plumbing of ``render models fetch``: one file from a list of URLs into a
``.partial`` beside its place, resumed and retried, checked and moved into place.


Why ``requests`` + ``tqdm`` and not pooch: pooch cannot resume a partial file (it downloads to a
fresh temporary name on every attempt), and resuming matters for files of several hundred MB.
``requests`` gives streaming, HTTP ``Range`` and connect/read timeouts; ``tqdm`` draws the bar.

How one fetch (``render.models.fetch``) goes:

* a file already in place that matches its pin is left alone (idempotent, no network);
* each URL is tried in order (primary, then mirrors); a 4xx answer (404, 403, ...) moves on to the
  next URL at once, while connection errors, timeouts, a transfer cut short and 5xx/408/429
  answers are retried with exponential backoff (``backoff * 2**n`` seconds, honouring a short
  ``Retry-After``); an attempt that made progress does not use up a retry;
* bytes go to ``<file>.partial`` beside the target; when it exists the next request asks for the
  rest (``Range: bytes=N-``); a ``206`` answer is appended, a ``200`` answer (server ignores
  ranges) restarts from zero, a ``416`` answer means the partial is already whole (or is bad and
  is dropped);
* size and SHA-256 are checked before an atomic ``os.replace`` into place; a mismatch deletes the
  download and raises :class:`ModelError` with both hashes;
* a verified-stamp is written (see :mod:`render.models.store`) so the renderer need not re-hash.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

from render.errors import ModelError
from render.files import locked_beside

from .manifest import Manifest, ModelEntry
from .store import CHUNK, ModelStore, hash_file, pinned_at_first_fetch

log = logging.getLogger(__name__)

USER_AGENT = "render-models/1"
MAX_BACKOFF = 60.0
NET_CHUNK = 64 * 1024  # small reads: a connection cut loses at most this much of the partial
_RANGE_RE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_TOTAL_RE = re.compile(r"bytes\s+\*/(\d+)")


class Retry(Exception):
    """This attempt failed in a way worth retrying on the same URL."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NextUrl(Exception):
    """Give up on this URL and try the next one."""


def host(url: str) -> str:
    return urlsplit(url).netloc or url


def partial_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".partial")


def _bar(entry: ModelEntry, progress: bool):
    from tqdm import tqdm

    enabled = progress and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    return tqdm(total=entry.size, unit="B", unit_scale=True, unit_divisor=1024,
                desc=entry.name, disable=not enabled, leave=False, dynamic_ncols=True)


def locked(dest: Path):
    """Serialise fetches of the same file between processes."""
    return locked_beside(dest)


def store_for(models_dir: Path, stamp_dir: Path | None) -> ModelStore | None:
    return ModelStore(models_dir, Manifest({}), stamp_dir) if stamp_dir is not None else None


def in_place(entry: ModelEntry, dest: Path, store: ModelStore | None) -> bool:
    """True when ``dest`` exists and matches the pin (via the stamp when there is a store)."""
    if not dest.is_file():
        return False
    if entry.size is not None and dest.stat().st_size != entry.size:
        return False
    if store is not None:
        try:
            store.verify(entry)
            return True
        except ModelError:
            return False
    return hash_file(dest) == entry.sha256


def _mismatch(entry: ModelEntry, where: str, sha: str, size: int) -> ModelError:
    pin = "" if entry.confirmed else " (this pin is marked unconfirmed: report the new hash)"
    fix = f"check the manifest entry in {entry.origin}"
    if pinned_at_first_fetch(entry):
        pin = " (this pin was taken at the first fetch)"
        fix = (f"if FaceFusion has replaced the file, remove {entry.name} from {entry.origin} "
               f"to pin it again")
    return ModelError(
        f"model {entry.name} from {where} does not match its pin (sha256 {sha}, expected "
        f"{entry.sha256}; {size} bytes, expected {entry.size if entry.size else 'any'}); the "
        f"download was deleted{pin}: {fix}")


def finish(entry: ModelEntry, partial: Path, dest: Path, sha: str, where: str,
            store: ModelStore | None) -> Path:
    size = partial.stat().st_size
    if sha != entry.sha256 or (entry.size is not None and size != entry.size):
        with contextlib.suppress(OSError):
            partial.unlink()
        raise _mismatch(entry, where, sha, size)
    into_place(partial, dest)
    if store is not None:
        store.write_stamp(dest, sha)
    log.info("model %s is in place at %s (sha256 verified)", entry.name, dest)
    return dest


def into_place(partial: Path, dest: Path) -> None:
    """Rename the checked ``partial`` over ``dest`` and make the rename durable."""
    os.replace(partial, dest)
    with contextlib.suppress(OSError):
        fd = os.open(dest.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _hash_prefix(path: Path) -> "hashlib._Hash":
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
    return h


def retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def delay(failures: int, backoff: float, exc: BaseException) -> float:
    """Seconds to wait before retry ``failures``: exponential, at least a short Retry-After."""
    delay = min(backoff * (2 ** (failures - 1)), MAX_BACKOFF)
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        delay = max(delay, min(retry_after, MAX_BACKOFF))
    return delay


def _attempt(session, url: str, entry: ModelEntry, partial: Path, timeout: float, bar) -> str:
    """One request: bring ``partial`` to the whole file and return its SHA-256."""
    import requests

    offset = partial.stat().st_size if partial.exists() else 0
    if entry.size is not None and offset > entry.size:
        log.info("partial download of %s is larger than the pin; starting over", entry.name)
        partial.unlink()
        offset = 0
    if offset and entry.size is not None and offset == entry.size:
        return _hash_prefix(partial).hexdigest()
    headers = {"Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        log.info("resuming %s at byte %d", entry.name, offset)
    try:
        response = session.get(url, headers=headers, stream=True, timeout=(timeout, timeout))
    except (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema,
            requests.exceptions.InvalidSchema) as exc:
        raise NextUrl(f"bad URL ({exc})") from None
    with response:
        code = response.status_code
        if code == 416:
            total = _TOTAL_RE.match(response.headers.get("Content-Range", ""))
            if offset and (total is None or int(total.group(1)) == offset) and \
                    entry.size in (None, offset):
                return _hash_prefix(partial).hexdigest()
            partial.unlink(missing_ok=True)
            raise Retry("server refused the resume range; starting over")
        if code in (408, 429) or code >= 500:
            raise Retry(f"HTTP {code}", retry_after(response.headers.get("Retry-After")))
        if code >= 400:
            raise NextUrl(f"HTTP {code}")
        length = response.headers.get("Content-Length")
        served: int | None = None  # the whole file's size as the server states it
        if code == 206:
            match = _RANGE_RE.match(response.headers.get("Content-Range", ""))
            if not offset or match is None or int(match.group(1)) != offset:
                partial.unlink(missing_ok=True)
                raise Retry("server answered a different byte range; starting over")
            if match.group(3) != "*":
                served = int(match.group(3))
            mode = "ab"
        elif code == 200:
            if offset:
                log.info("server ignored the resume range for %s; starting over", entry.name)
            offset = 0
            mode = "wb"
        else:
            raise NextUrl(f"unexpected HTTP {code}")
        if served is None and length is not None and length.isdigit():
            served = offset + int(length)
        if entry.size is not None and served is not None and served != entry.size:
            partial.unlink(missing_ok=True)
            raise ModelError(
                f"model {entry.name} at {host(url)} is {served} bytes but its pin says "
                f"{entry.size} (sha256 {entry.sha256}); nothing was kept: check the manifest "
                f"entry in {entry.origin}")
        expected = entry.size if entry.size is not None else served
        hasher = _hash_prefix(partial) if mode == "ab" else hashlib.sha256()
        if expected is not None:
            bar.total = expected
        bar.n = offset
        bar.refresh()
        written = offset
        try:
            fh = open(partial, mode)
        except OSError as exc:
            raise _write_error(partial, exc) from None
        with fh:
            for chunk in response.iter_content(NET_CHUNK):
                if not chunk:
                    continue
                if entry.size is not None and written + len(chunk) > entry.size:
                    fh.close()
                    partial.unlink(missing_ok=True)
                    raise ModelError(
                        f"model {entry.name} from {host(url)} is larger than its pin "
                        f"({entry.size} bytes); the download was deleted: check the manifest "
                        f"entry in {entry.origin}")
                try:
                    fh.write(chunk)
                except OSError as exc:
                    raise _write_error(partial, exc) from None
                hasher.update(chunk)
                written += len(chunk)
                bar.update(len(chunk))
            try:
                fh.flush()
                os.fsync(fh.fileno())
            except OSError as exc:
                raise _write_error(partial, exc) from None
        if expected is not None and written < expected:
            raise Retry(f"transfer ended at {written} of {expected} bytes")
        return hasher.hexdigest()


def _write_error(partial: Path, exc: OSError) -> ModelError:
    return ModelError(f"cannot write {partial}: {exc.strerror or exc}: check that the models "
                      f"folder is writable and has space")


def _download(session, url: str, entry: ModelEntry, partial: Path, *, timeout: float,
              retries: int, backoff: float, bar) -> str:
    import requests
    import urllib3

    failures = 0
    while True:
        before = partial.stat().st_size if partial.exists() else 0
        try:
            return _attempt(session, url, entry, partial, timeout, bar)
        except NextUrl:
            raise
        except (Retry, requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            reason = str(exc) if isinstance(exc, Retry) else type(exc).__name__
            after = partial.stat().st_size if partial.exists() else 0
            if after > before:
                log.warning("download of %s from %s broke off at byte %d (%s); resuming",
                            entry.name, host(url), after, reason)
                continue
            failures += 1
            if failures > retries:
                raise NextUrl(f"{reason} after {failures} attempts") from None
            wait = delay(failures, backoff, exc)
            log.warning("download of %s from %s failed (%s); retry %d/%d in %.1fs",
                        entry.name, host(url), reason, failures, retries, wait)
            time.sleep(wait)


def destination(entry: ModelEntry, models_dir: Path, stamp_dir: Path | None
                 ) -> tuple[Path, ModelStore | None, bool]:
    """(destination path, store, already in place and verified) for ``entry`` in ``models_dir``."""
    models_dir.mkdir(parents=True, exist_ok=True)
    dest = models_dir / entry.file
    store = store_for(models_dir, stamp_dir)
    done = in_place(entry, dest, store)
    if done:
        log.info("model %s is already in place and verified", entry.name)
    return dest, store, done


@contextlib.contextmanager
def session_for(session) -> Iterator:
    """``session``, or a new one closed afterwards."""
    import requests

    own = session is None
    session = session or requests.Session()
    session.headers.setdefault("User-Agent", USER_AGENT)
    try:
        yield session
    finally:
        if own:
            session.close()


def download_any(entry: ModelEntry, partial: Path, session, models_dir: Path, *,
                  timeout: float, retries: int, backoff: float, progress: bool) -> tuple[str, str]:
    """Bring ``partial`` to the whole file from the first of ``entry.urls`` that serves it:
    (its SHA-256, the host it came from); ModelError when none does."""
    failures: list[str] = []
    with _bar(entry, progress) as bar:
        for url in entry.urls:
            log.info("downloading %s from %s", entry.name, host(url))
            try:
                sha = _download(session, url, entry, partial, timeout=timeout, retries=retries,
                                backoff=backoff, bar=bar)
            except NextUrl as exc:
                failures.append(f"{host(url)}: {exc}")
                log.warning("cannot download %s from %s (%s)%s", entry.name, host(url), exc,
                            "; trying the mirror" if url != entry.urls[-1] else "")
                continue
            return sha, host(url)
    kept = f"; {partial.name} is kept to resume" if partial.exists() else ""
    raise ModelError(
        f"could not download model {entry.name} ({'; '.join(failures)}){kept}: check the "
        f"network and run `render models fetch {entry.name}` again, or put {entry.file} in "
        f"{models_dir}")


def copy_file(src: Path, partial: Path, models_dir: Path) -> str:
    """Copy ``src`` to ``partial`` (fsynced); return its SHA-256."""
    hasher = hashlib.sha256()
    try:
        with open(src, "rb") as fin, open(partial, "wb") as fout:
            for chunk in iter(lambda: fin.read(CHUNK), b""):
                hasher.update(chunk)
                fout.write(chunk)
            fout.flush()
            os.fsync(fout.fileno())
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ModelError(f"cannot copy {src} to {models_dir}: {exc.strerror or exc}") from None
    return hasher.hexdigest()


def not_in(entry: ModelEntry, folder: Path) -> ModelError:
    return ModelError(f"model {entry.name}: {entry.file} is not in {folder}: put it there or "
                      f"run `render models fetch {entry.name}`")
