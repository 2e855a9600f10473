"""Download (or copy) a model file once, and keep it only if it matches its SHA-256 pin
(``render.models.download`` says how a download goes). An entry with no pin yet
(``sha256: null``) goes through :func:`render.models.first_fetch.first_fetch`.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from render.errors import ModelError

from .download import (copy_file, destination, download_any, finish, in_place, locked, not_in,
                       partial_path, session_for)
from .first_fetch import first_fetch
from .manifest import ModelEntry

log = logging.getLogger(__name__)


def fetch(entry: ModelEntry, models_dir: Path, *, timeout: float = 30, retries: int = 4,
          backoff: float = 1.0, progress: bool = True, stamp_dir: Path | None = None,
          session=None) -> Path:
    """Bring ``entry``'s file into ``models_dir`` (see the module docstring); return its path.
    An entry with no pin yet goes through :func:`first_fetch`."""
    models_dir = Path(models_dir).expanduser()
    if not entry.sha256:
        pinned = first_fetch(entry, models_dir, timeout=timeout, retries=retries,
                             backoff=backoff, progress=progress, stamp_dir=stamp_dir,
                             session=session)
        return models_dir / pinned.file
    dest, store, done = destination(entry, models_dir, stamp_dir)
    if done:
        return dest
    if not entry.urls:
        raise ModelError(f"model {entry.name} has no download URL: put {entry.file} in "
                         f"{models_dir} or run `render models fetch {entry.name} from=FOLDER`")
    with locked(dest):
        if in_place(entry, dest, store):  # another process finished it meanwhile
            return dest
        if dest.exists():
            log.warning("model %s at %s does not match its pin; downloading it again",
                        entry.name, dest)
        partial = partial_path(dest)
        with session_for(session) as session:
            sha, where = download_any(entry, partial, session, models_dir, timeout=timeout,
                                       retries=retries, backoff=backoff, progress=progress)
        return finish(entry, partial, dest, sha, where, store)


def copy_from(entry: ModelEntry, folder: Path, models_dir: Path, *,
              stamp_dir: Path | None = None) -> Path:
    """The offline path: copy ``folder/<file>`` into ``models_dir`` and verify it the same way
    (an entry with no pin yet: against the ``.hash`` beside it, see :func:`first_fetch`)."""
    folder = Path(folder).expanduser()
    models_dir = Path(models_dir).expanduser()
    if not entry.sha256:
        pinned = first_fetch(entry, models_dir, folder=folder, stamp_dir=stamp_dir)
        return models_dir / pinned.file
    src = folder / entry.file
    if not src.is_file():
        raise not_in(entry, folder)
    dest, store, done = destination(entry, models_dir, stamp_dir)
    if done:
        return dest
    if dest.exists() and os.path.samefile(src, dest):
        raise ModelError(f"model {entry.name} at {dest} is corrupt: replace the file or run "
                         f"`render models fetch {entry.name}`")
    with locked(dest):
        partial = partial_path(dest)
        log.info("copying %s from %s", entry.name, folder)
        sha = copy_file(src, partial, models_dir)
        return finish(entry, partial, dest, sha, str(src), store)
