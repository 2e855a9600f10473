"""The first fetch of a model with no SHA-256 pin yet.

FaceFusion publishes no SHA-256 for its
whole-frame models, only a CRC32 in a ``<id>.hash`` file beside each ``<id>.onnx`` on the same
release, so the shipped manifest has ``sha256: null`` (``confirmed: false``) for them. Their first
fetch downloads the ``.hash`` first (the same URL with ``.onnx`` → ``.hash``, through the URLs in
order), then the file as above, and keeps it only if ``'%08x' % zlib.crc32(file)`` equals the
``.hash`` text exactly, as FaceFusion checks it. The SHA-256 and size of the file kept are then
written as the entry's pin to ``<models dir>/manifest.yaml`` (the local layer), still
``confirmed: false`` and with a note saying how it was taken; from then on fetches and renders
verify the file against that pin like any other. A file already in place that matches the CRC32
is pinned without downloading it again. ``from=FOLDER`` takes the ``.hash`` from the folder.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import re
import time
import zlib
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from render.errors import ModelError

from .download import (NextUrl, Retry, copy_file, delay, download_any, host, into_place, locked,
                       not_in, partial_path, retry_after, session_for, store_for)
from .manifest import LOCAL_MANIFEST_NAME, ModelEntry, read_manifest_file, \
    write_local_entries
from .store import CHUNK, FIRST_FETCH_NOTE, ModelStore

log = logging.getLogger(__name__)

HASH_MAX = 64  # a .hash holds 8 hex digits: a longer answer is some other page
_CRC_RE = re.compile(r"[0-9a-f]{8}")

def hash_name(file: str) -> str:
    """FaceFusion's CRC32 file beside a model file: ``<id>.onnx`` → ``<id>.hash`` (the last part
    of a path or URL path)."""
    head, slash, last = file.rpartition("/")
    stem = last.rsplit(".", 1)[0] if "." in last else last
    return f"{head}{slash}{stem}.hash"


def hash_url(url: str) -> str:
    """The URL of the ``.hash`` beside the model at ``url``."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=hash_name(parts.path)))


def _crc_text(body: bytes) -> str | None:
    """The CRC32 a ``.hash`` holds (8 lowercase hex digits, nothing else), or None."""
    text = body.decode("ascii", "replace")
    return text if _CRC_RE.fullmatch(text) else None


def crc32_file(path: Path) -> tuple[str, str, int]:
    """(CRC32 as FaceFusion writes it, ``'%08x' % zlib.crc32``; SHA-256; size) of ``path``, in
    one read."""
    crc, hasher, size = 0, hashlib.sha256(), 0
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                crc = zlib.crc32(chunk, crc)
                hasher.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc.strerror or exc}: check the models "
                         f"folder's permissions") from None
    return "%08x" % crc, hasher.hexdigest(), size


def _crc_attempt(session, url: str, timeout: float) -> str:
    """One request for a ``.hash``: the CRC32 it holds."""
    import requests

    try:
        response = session.get(url, headers={"Accept-Encoding": "identity"}, stream=True,
                               timeout=(timeout, timeout))
    except (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema,
            requests.exceptions.InvalidSchema) as exc:
        raise NextUrl(f"bad URL ({exc})") from None
    with response:
        code = response.status_code
        if code in (408, 429) or code >= 500:
            raise Retry(f"HTTP {code}", retry_after(response.headers.get("Retry-After")))
        if code != 200:
            raise NextUrl(f"HTTP {code}")
        body = b""
        for chunk in response.iter_content(HASH_MAX + 1):
            body += chunk
            if len(body) > HASH_MAX:
                break
    crc = _crc_text(body)
    if crc is None:
        raise NextUrl(f"{hash_name(urlsplit(url).path).rsplit('/', 1)[-1]} is not a CRC32 "
                       f"(8 lowercase hex digits)")
    return crc


def _get_crc(session, url: str, *, timeout: float, retries: int, backoff: float) -> str:
    """The CRC32 at ``url``, retried like a download (:func:`_download`)."""
    import requests
    import urllib3

    failures = 0
    while True:
        try:
            return _crc_attempt(session, url, timeout)
        except NextUrl:
            raise
        except (Retry, requests.RequestException, urllib3.exceptions.HTTPError) as exc:
            reason = str(exc) if isinstance(exc, Retry) else type(exc).__name__
            failures += 1
            if failures > retries:
                raise NextUrl(f"{reason} after {failures} attempts") from None
            wait = delay(failures, backoff, exc)
            log.warning("getting a CRC32 from %s failed (%s); retry %d/%d in %.1fs",
                        host(url), reason, failures, retries, wait)
            time.sleep(wait)


def _published_crc(entry: ModelEntry, session, *, timeout: float, retries: int,
                   backoff: float) -> tuple[str, str]:
    """(FaceFusion's CRC32 of ``entry``'s file, the host it came from): the ``.hash`` beside the
    first of its URLs that serves one; ModelError, with nothing downloaded, when none does."""
    failures: list[str] = []
    for url in entry.urls:
        try:
            return _get_crc(session, hash_url(url), timeout=timeout, retries=retries,
                            backoff=backoff), host(url)
        except NextUrl as exc:
            failures.append(f"{host(url)}: {exc}")
            log.warning("cannot get the CRC32 of %s from %s (%s)%s", entry.name, host(url), exc,
                        "; trying the mirror" if url != entry.urls[-1] else "")
    raise ModelError(
        f"model {entry.name} is not pinned yet and FaceFusion's CRC32 of it "
        f"({hash_name(entry.file)}) could not be had ({'; '.join(failures)}); nothing was "
        f"downloaded: check the network and run `render models fetch {entry.name}` again")


def _folder_crc(entry: ModelEntry, folder: Path) -> str:
    """The CRC32 in the ``.hash`` beside ``entry``'s file in ``folder`` (the offline path)."""
    path = folder / hash_name(entry.file)
    try:
        with open(path, "rb") as fh:
            body = fh.read(HASH_MAX + 1)
    except FileNotFoundError:
        raise ModelError(
            f"model {entry.name} is not pinned yet and {folder} has no {path.name} beside "
            f"{entry.file}: put FaceFusion's {path.name} (the CRC32 the file is checked "
            f"against) there too, or run `render models fetch {entry.name}` without from=") \
            from None
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc.strerror or exc}") from None
    crc = _crc_text(body)
    if crc is None:
        raise ModelError(f"{path} is not a CRC32 (8 lowercase hex digits, as FaceFusion "
                         f"publishes it): put FaceFusion's {path.name} there")
    return crc


def _pin(entry: ModelEntry, dest: Path, sha: str, size: int, crc: str, crc_from: str,
         store: ModelStore | None) -> ModelEntry:
    """Write the pin of ``dest`` (its CRC32 matched) to the local manifest layer."""
    note = f"{FIRST_FETCH_NOTE} after FaceFusion's CRC32 {crc} (from {crc_from}) matched"
    if entry.note:
        note += f"; {entry.note}"
    pinned = dataclasses.replace(entry, sha256=sha, size=size, confirmed=False, note=note)
    models_dir = dest.parent
    try:
        path = write_local_entries(models_dir, pins={entry.name: {
            "file": entry.file, "sha256": sha, "size": size, "note": note}})
    except ModelError as exc:
        raise ModelError(
            f"model {entry.name} is in place at {dest} but not pinned ({exc}): run `render "
            f"models fetch {entry.name}` again once the manifest can be written (the file is "
            f"pinned then without downloading it again)") from None
    if store is not None:
        store.write_stamp(dest, sha)
    log.info("model %s is in place at %s, pinned at first fetch in %s (crc32 %s matched; "
             "sha256 %s, %d bytes)", entry.name, dest, path, crc, sha, size)
    return dataclasses.replace(pinned, origin=path)


def first_fetch(entry: ModelEntry, models_dir: Path, *, folder: Path | None = None,
                timeout: float = 30, retries: int = 4, backoff: float = 1.0,
                progress: bool = True, stamp_dir: Path | None = None,
                session=None) -> ModelEntry:
    """Bring ``entry``, which has no pin yet, into ``models_dir``, kept only if it matches
    FaceFusion's CRC32 (``.hash`` and file from ``folder`` when given, else downloaded), and
    write its pin to the local manifest layer (see the module docstring); return the pinned
    entry."""
    models_dir = Path(models_dir).expanduser()
    src = Path(folder).expanduser() / entry.file if folder is not None else None
    if src is not None and not src.is_file():
        raise not_in(entry, src.parent)
    if src is None and not entry.urls:
        raise ModelError(
            f"model {entry.name} is not pinned yet and has no download URL: put {entry.file} "
            f"and FaceFusion's {hash_name(entry.file)} in a folder and run `render models "
            f"fetch {entry.name} from=FOLDER`")
    layer = models_dir / LOCAL_MANIFEST_NAME
    if layer.is_file():
        read_manifest_file(layer)  # a broken layer stops the fetch before anything is downloaded
    models_dir.mkdir(parents=True, exist_ok=True)
    dest = models_dir / entry.file
    store = store_for(models_dir, stamp_dir)
    with locked(dest), (session_for(session) if src is None else
                         contextlib.nullcontext()) as session:
        if src is None:
            crc, crc_from = _published_crc(entry, session, timeout=timeout, retries=retries,
                                           backoff=backoff)
        else:
            crc, crc_from = _folder_crc(entry, src.parent), str(src.parent)
        if dest.is_file():
            got, sha, size = crc32_file(dest)
            if got == crc:
                log.info("model %s at %s matches FaceFusion's CRC32: pinning it as it is",
                         entry.name, dest)
                return _pin(entry, dest, sha, size, crc, crc_from, store)
            log.warning("model %s at %s does not match FaceFusion's CRC32; replacing it",
                        entry.name, dest)
        partial = partial_path(dest)
        if src is None:
            _, where = download_any(entry, partial, session, models_dir, timeout=timeout,
                                     retries=retries, backoff=backoff, progress=progress)
        else:
            log.info("copying %s from %s", entry.name, src.parent)
            copy_file(src, partial, models_dir)
            where = str(src)
        got, sha, size = crc32_file(partial)
        if got != crc:
            partial.unlink(missing_ok=True)
            raise ModelError(
                f"model {entry.name} from {where} does not match FaceFusion's CRC32 (crc32 "
                f"{got}, expected {crc} from {crc_from}); the "
                f"{'download' if src is None else 'copy'} was deleted and nothing was pinned: "
                f"run `render models fetch {entry.name}` again, and report it if it fails the "
                f"same way")
        into_place(partial, dest)
        return _pin(entry, dest, sha, size, crc, crc_from, store)
