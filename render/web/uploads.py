"""Uploads: taken in while they stream, within the limits; stored by id; checked before queueing.

:func:`receive` reads the request body itself and feeds python-multipart's streaming parser, so
no framework spools a whole body to a temp file first: file parts go straight into
``state_dir/incoming/<random id>.part`` while their bytes are counted. A file over the size limit,
a body over the total limit, a full disk (checked before the first byte, and ``ENOSPC`` while
writing) or a broken form stops the upload at once and removes every part already written. The
uploaded file name is kept only as a label for people; it never becomes a path.

:func:`check_source` and :func:`check_target` probe what came in with the renderer's own probe
and face detector, so a bad file gets one clear message now instead of a failed job later.
"""
from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from ..config import load_config
from ..errors import MediaError, RenderError
from ..media.formats import (
    UPLOAD_IMAGE_NAMES,
    UPLOAD_IMAGES,
    UPLOAD_NAMED,
    UPLOAD_VIDEO_NAMES,
    UPLOAD_VIDEOS,
    VIDEO_FORMATS,
)
from ..media.probe import MediaInfo, probe
from .errors import Refused, disk_full, out_of_space

log = logging.getLogger(__name__)

FILE_FIELDS = ("source", "target", "source2", "voice")
TEXT_FIELDS = ("profile", "consent", "upscale", "background", "source2_is", "pick1", "pick2",
               "expression", "age", "voice_mix", "mouth")
TEXT_MAX = 4096                 # bytes of one text field
OVERHEAD = 64 * 1024            # multipart headers and text fields on top of the files
DRAIN_MAX = 64 * 1024 * 1024    # a refused body is read (and dropped) up to this much, so that the
                                # client sees the answer instead of a reset connection


@dataclass
class ReceivedFile:
    field: str
    name: str           # the uploaded name, cleaned: a label, never a path
    path: Path          # incoming/<id>.part
    bytes: int = 0


@dataclass
class Received:
    fields: dict[str, str] = field(default_factory=dict)
    files: dict[str, ReceivedFile] = field(default_factory=dict)

    def discard(self) -> None:
        for f in self.files.values():
            f.path.unlink(missing_ok=True)


def display_name(raw: bytes | str | None, fallback: str) -> str:
    """The last path component of an uploaded name, printable, at most 120 characters."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else (raw or "")
    text = re.split(r"[\\/]", text)[-1]
    text = "".join(c for c in text if c.isprintable()).strip()
    return text[:120] or fallback


def mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


async def receive(request: Any, incoming: Path, *, max_file: int, min_free: int) -> Received:
    """The multipart form of ``request`` (a Starlette request): text fields and files in
    ``incoming``. Raises :class:`Refused` (413 too large, 507 disk full, 400/415 bad form)
    with nothing left on disk."""
    kind, params = parse_options_header(request.headers.get("content-type"))
    boundary = params.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise Refused(415, "send the files as multipart/form-data (fields source, target, "
                           "profile, consent)")
    max_total = len(FILE_FIELDS) * max_file + OVERHEAD
    limit = f"the limit is {mib(max_file)} per file"
    try:
        declared = int(request.headers.get("content-length", ""))
    except ValueError:
        declared = None
    stream = request.stream()
    waiting = request.headers.get("expect", "").lower() == "100-continue"   # curl, for big bodies
    if declared is not None and declared > max_total:
        if not waiting:          # a client that waits for "100 Continue" has sent nothing yet
            await drain(stream)
        raise Refused(413, f"the upload is {mib(declared)}: too large, {limit}")
    incoming.mkdir(parents=True, exist_ok=True)
    # what must stay free: min_free beyond the announced body (browsers announce it); a body of
    # unknown length is caught by ENOSPC while it is written, if it comes to that
    needed = (declared or 0) + min_free
    if shutil.disk_usage(incoming).free < needed:
        log.warning("an upload was refused: less than %s would stay free on %s", mib(min_free),
                    incoming)
        await drain(stream)
        raise disk_full()

    received = Received()
    handles: dict[str, Any] = {}
    part: dict[str, Any] = {}

    def on_part_begin() -> None:
        part.clear()
        part.update(headers={}, name=b"", value=b"", field=None, text=None)

    def on_header_field(data: bytes, start: int, end: int) -> None:
        part["name"] += data[start:end]

    def on_header_value(data: bytes, start: int, end: int) -> None:
        part["value"] += data[start:end]

    def on_header_end() -> None:
        part["headers"][part["name"].strip().lower()] = part["value"].strip()
        part["name"], part["value"] = b"", b""

    def on_headers_finished() -> None:
        _, disp = parse_options_header(part["headers"].get(b"content-disposition"))
        name = disp.get(b"name", b"").decode("utf-8", "replace")
        if name in received.fields or name in received.files:
            raise Refused(400, f"the form has the field {name!r} twice")
        part["field"] = name
        if name in FILE_FIELDS:
            if b"filename" not in disp:
                raise Refused(400, f"{name}: expected a file")
            path = incoming / f"{secrets.token_hex(16)}.part"
            f = ReceivedFile(name, display_name(disp[b"filename"], name), path)
            received.files[name] = f
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o640)
            handles[name] = os.fdopen(fd, "wb")
        elif name in TEXT_FIELDS:
            part["text"] = bytearray()
        else:
            raise Refused(400, f"unexpected form field {name!r} (fields: "
                               f"{', '.join(FILE_FIELDS + TEXT_FIELDS)})")

    def on_part_data(data: bytes, start: int, end: int) -> None:
        name = part["field"]
        if part["text"] is not None:
            part["text"] += data[start:end]
            if len(part["text"]) > TEXT_MAX:
                raise Refused(400, f"{name}: too long")
            return
        f = received.files[name]
        f.bytes += end - start
        if f.bytes > max_file:
            raise Refused(413, f"{name} ({f.name}) is larger than {mib(max_file)}: too "
                               f"large, {limit}")
        handles[name].write(data[start:end])

    def on_part_end() -> None:
        name = part["field"]
        if part["text"] is not None:
            received.fields[name] = part["text"].decode("utf-8", "replace").strip()
        elif name in handles:
            handles.pop(name).close()

    parser = MultipartParser(boundary, {
        "on_part_begin": on_part_begin, "on_header_field": on_header_field,
        "on_header_value": on_header_value, "on_header_end": on_header_end,
        "on_headers_finished": on_headers_finished, "on_part_data": on_part_data,
        "on_part_end": on_part_end})
    total = 0
    try:
        try:
            async for chunk in stream:
                total += len(chunk)
                if total > max_total:
                    raise Refused(413, f"the upload is larger than {mib(max_total)}: too "
                                       f"large, {limit}")
                parser.write(chunk)
            parser.finalize()
            if handles or part.get("text") is not None and part.get("field") not in received.fields:
                raise Refused(400, "the form ended in the middle of a part: send it again")
            for f in received.files.values():
                _fsync(f.path)
        except OSError as exc:
            if out_of_space(exc, incoming):
                log.warning("an upload was refused: the disk filled up while it was written (%s)",
                            incoming)
                raise disk_full() from None
            raise
        except MultipartParseError as exc:
            raise Refused(400, f"the form cannot be read: {' '.join(str(exc).split())}") from None
    except BaseException as exc:
        for f in handles.values():
            try:
                f.close()
            except OSError:
                pass
        received.discard()
        if isinstance(exc, Refused):
            await drain(stream)
        raise
    return received


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def drain(stream: Any) -> None:
    """Read what is left of a refused body (dropping it), up to :data:`DRAIN_MAX`."""
    drained = 0
    try:
        async for chunk in stream:
            drained += len(chunk)
            if drained > DRAIN_MAX:
                break
    except Exception:  # noqa: BLE001 - the client went away: nothing to answer
        pass


# -- checks ------------------------------------------------------------------------------------------
def _probe(path: Path, what: str, expected: str) -> MediaInfo:
    try:
        return probe(path)
    except MediaError:
        raise Refused(422, f"{what} is not {expected} this renderer can read") from None


def stored_extension(info: MediaInfo) -> str | None:
    first = info.container.split(",")[0]
    if info.is_image:
        return UPLOAD_IMAGES.get(first)
    return UPLOAD_VIDEOS.get(first)


def result_extension(uploaded: str, stored: str) -> str:
    """The result keeps the uploaded name's container where the probed one agrees and it can be
    written (a .webm stays .webm, a .mov .mov: ffprobe calls them matroska and mov)."""
    suffix = Path(uploaded).suffix.lower()
    if suffix in VIDEO_FORMATS and UPLOAD_NAMED.get(suffix) == stored:
        return suffix
    return stored if stored in VIDEO_FORMATS else ".mp4"


def check_target(path: Path, label: str, max_seconds: float) -> tuple[MediaInfo, str]:
    """The target's probe and the extension to store it with; Refused with the reason."""
    what = f"the target {label!r}"
    info = _probe(path, what, "a video or image")
    ext = stored_extension(info)
    if ext is None:
        kinds = UPLOAD_IMAGE_NAMES if info.is_image else UPLOAD_VIDEO_NAMES
        raise Refused(422, f"{what} is a {info.container.split(',')[0]} file: upload "
                           f"{kinds}")
    if not info.is_image:
        if info.duration > max_seconds:
            raise Refused(422, f"{what} is {info.duration:.1f} s long: the class limit is "
                               f"{max_seconds:g} s (cut it shorter)")
        if info.frame_count < 1:
            raise Refused(422, f"{what} has no frames")
    return info, ext


def check_source(path: Path, label: str, faces: "FaceFinder", overrides: Mapping[str, str],
                 role: str = "the source") -> tuple[MediaInfo, str]:
    """The source's probe and extension; refused unless it is an image with a face in it
    (looked for with the detector of the job's settings ``overrides``). ``role`` names it in
    the messages (the second photo is checked the same way)."""
    what = f"{role} {label!r}"
    info = _probe(path, what, "an image")
    if not info.is_image:
        raise Refused(422, f"{what} is a video: upload a photo of the face to put in")
    ext = stored_extension(info)
    if ext is None:
        raise Refused(422, f"{what} is a {info.container.split(',')[0]} file: upload "
                           f"{UPLOAD_IMAGE_NAMES}")
    try:
        found = faces.count(path, overrides)
    except MediaError:
        raise Refused(422, f"{what} cannot be decoded as an image: upload png, jpg or "
                           f"webp") from None
    if found == 0:
        raise Refused(422, f"no face found in {what}: upload a clear photo of one face, "
                           f"looking at the camera")
    return info, ext


class FaceFinder:
    """The renderer's face detector and embedder (manifest, model store and session factory of
    the same Config a render gets), on the CPU, one session per model setting, loaded on first
    use."""

    def __init__(self, overrides: Mapping[str, str]) -> None:
        self.overrides = dict(overrides)
        self._detectors: dict[tuple, Any] = {}
        self._embedders: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    def config(self, job: Mapping[str, str]):
        return load_config({**self.overrides, **job, "execution.providers": "cpu",
                            "execution.threads": "1"})

    def count(self, image: Path, job: Mapping[str, str]) -> int:
        from ..source_face import read_image

        picture = read_image(image, "source")       # MediaError: OpenCV cannot decode it
        return len(self.detect(picture, job))

    def detect(self, picture: Any, job: Mapping[str, str]) -> list:
        """The faces (:class:`render.faces.types.Face`) the job's detector finds in a BGR
        picture; Refused 503 when the detector cannot run here."""
        return self._run(lambda cfg: self._detector(cfg).detect(picture), job)

    def embed(self, picture: Any, face: Any, job: Mapping[str, str]) -> Any:
        """The raw embedding of ``face`` in ``picture`` by the job's embedder."""
        return self._run(lambda cfg: self._embedder(cfg).embed(picture, face), job)

    def _run(self, call, job: Mapping[str, str]):
        cfg = self.config(job)
        try:
            return call(cfg)
        except RenderError as exc:
            log.error("the face check cannot run: %s", exc)
            raise Refused(503, f"the server cannot look for faces now: {exc}") from None

    def _detector(self, cfg):
        from ..models.load import load_detector, model_store
        from ..sessions import SessionFactory

        key = (str(cfg.models_dir), tuple(cfg.models.manifest), cfg.detect.model, cfg.detect.size,
               cfg.detect.score, cfg.detect.nms)
        with self._lock:
            if key not in self._detectors:
                factory = SessionFactory(cfg.execution, cfg.cache_path)
                self._detectors[key] = load_detector(cfg, model_store(cfg), factory)[1]
            return self._detectors[key]

    def _embedder(self, cfg):
        from ..errors import ModelError
        from ..faces.embed import CONTRACTS, Embedder
        from ..models.load import model_store
        from ..models.needs import fixed
        from ..sessions import SessionFactory

        need = (cfg.embed.model, fixed(cfg.embed.model, cfg.embed.precision))
        key = (str(cfg.models_dir), tuple(cfg.models.manifest), *need)
        with self._lock:
            if key not in self._embedders:
                store = model_store(cfg)
                entry = store.verify_required([need])[need]
                if entry.contract not in CONTRACTS:
                    raise ModelError(f"embed.model={entry.name}: its contract is "
                                     f"{entry.contract}, not an embedder's")
                factory = SessionFactory(cfg.execution, cfg.cache_path)
                self._embedders[key] = Embedder(factory.lazy(
                    store.path(entry), fp16=entry.precision == "fp16", sha256=entry.sha256))
            return self._embedders[key]
