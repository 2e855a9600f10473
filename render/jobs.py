"""What to render: source, targets and outputs resolved from the Config into jobs, each checked
before any work is done (inputs are regular files, outputs writable, names not too long)."""
from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from .config import Config
from .errors import MediaError, RenderError, UsageError
from .files import not_regular
from .media.formats import IMAGE_EXTS, OUTPUT_EXTS, VIDEO_EXTS
from .media.tools import ffmpeg_output_pixel_formats
from .sources import read_face_map, source_paths

log = logging.getLogger(__name__)


# what can be rendered from, and what can be written
SOURCE_NAMES = ("source.jpg", "source.jpeg", "source.png", "source.webp")


@dataclass(frozen=True)
class Job:
    source: Path             # the first source image: the one messages and the report name
    target: Path
    output: Path
    #: every source image (several: their mean identity; select.mode=map: the map's, in order)
    sources: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        if not self.sources:
            object.__setattr__(self, "sources", (self.source,))


def _is_media(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in VIDEO_EXTS | IMAGE_EXTS \
        and not path.name.startswith(".")


def plan_jobs(cfg: Config, refused: list[tuple[Job, RenderError]] | None = None) -> list[Job]:
    """Resolve source, targets and outputs from the config; fail before any work is done. For a
    folder of targets, ``refused`` (when given) collects the targets that cannot be rendered (an
    output name too long, an output that would overwrite an input) instead of failing the whole
    batch for one of them."""
    check_paths(cfg)
    input_dir = Path(cfg.input_dir) if cfg.input_dir else None
    sources, references = _sources(cfg, input_dir)
    source = sources[0]

    if cfg.target:
        target = Path(cfg.target)
        if not target.exists():
            raise MediaError(f"target not found: {target}")
        if not target.is_dir():
            _check_regular(target, "target")
        targets = sorted(p for p in target.iterdir() if _is_media(p)) if target.is_dir() \
            else [target]
        folder = target if target.is_dir() else None
    elif input_dir is not None:
        if not input_dir.is_dir():
            raise MediaError(f"input folder not found: {input_dir}")
        targets = sorted(p for p in input_dir.iterdir() if _is_media(p))
        folder = input_dir
    else:
        raise UsageError("no target given: target=PATH (the video or image to render)")
    not_targets = {p.resolve() for p in sources + references}
    targets = [t for t in targets if t.resolve() not in not_targets]
    if not targets:
        if folder is None:
            raise UsageError(f"target {cfg.target} is the source image itself")
        raise MediaError(f"nothing to render in {folder}: no video or image besides the source")

    if cfg.output and (folder is None):
        outputs = [Path(cfg.output)]
    else:
        out_dir = Path(cfg.output) if cfg.output else Path(cfg.output_dir) if cfg.output_dir else None
        if out_dir is None:
            raise UsageError("no output given: output=PATH (or output_dir=DIR)")
        if out_dir.suffix.lower() in OUTPUT_EXTS | VIDEO_EXTS and not out_dir.is_dir():
            # a folder of targets writes a folder of outputs: never make a folder named clip.mp4
            raise UsageError(f"target {folder} is a folder, so the output is a folder too: "
                             f"{out_dir} names a file (give output_dir=DIR)")
        outputs = [out_dir / _output_name(t) for t in targets]
    inputs = {f"the source image {p.name}" if len(sources) > 1 else "the source image": p
              for p in sources}
    inputs.update({f"the face map's reference {p.name}": p for p in references})
    if cfg.select.reference:
        inputs["the reference image"] = Path(cfg.select.reference)
        _check_regular(inputs["the reference image"], "reference image")
    if folder is not None and outputs:
        _check_writable(outputs[0].parent)        # the same folder for every target: said once
    jobs = []
    for t, o in zip(targets, outputs):
        try:
            _check_job(t, o, inputs, writable_checked=folder is not None)
        except (UsageError, MediaError) as exc:
            if refused is None or folder is None:
                raise
            refused.append((Job(source, t, o, sources), exc))
            continue
        jobs.append(Job(source, t, o, sources))
    return jobs


def _sources(cfg: Config, input_dir: Path | None) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(the source images, the face map's reference images) the config names."""
    if cfg.select.mode == "map" or cfg.select.map:
        if cfg.select.mode != "map":
            raise UsageError(f"select.map is given but select.mode={cfg.select.mode}: the map is "
                             f"used with select.mode=map")
        if not cfg.select.map:
            raise UsageError("select.mode=map needs select.map=FILE.yaml (or REF=SRC,...)")
        if cfg.source:
            raise UsageError("select.mode=map takes each person's source from select.map: "
                             "source= is not used (leave it out)")
        face_map = read_face_map(cfg.select.map)
        return face_map.sources, tuple(e.reference for e in face_map.entries)
    if cfg.source:
        return source_paths(cfg.source), ()
    if input_dir is not None:
        found = [input_dir / n for n in SOURCE_NAMES if (input_dir / n).is_file()]
        if not found:
            raise MediaError(f"no source face: put source.jpg or source.png in {input_dir} "
                             f"(or give source=PATH)")
        return (found[0],), ()
    raise UsageError("no source given: source=PATH (the image with the face to put in)")


def _check_job(t: Path, o: Path, inputs: dict[str, Path], *, writable_checked: bool) -> None:
    """One target's output can be written: its type, no input overwritten, not a folder, its
    folder writable (unless ``writable_checked`` for all of them), its name short enough for the
    names made from it."""
    if o.suffix.lower() not in OUTPUT_EXTS:
        raise UsageError(f"output {o}: cannot write '{o.suffix}' files (use one of "
                         f"{', '.join(sorted(OUTPUT_EXTS))})")
    written = o.resolve()
    for what, path in {"its target": t, **inputs}.items():
        if written == path.resolve():
            raise UsageError(f"output {o} would overwrite {what}")
    if o.is_dir():
        raise UsageError(f"output {o} is a folder: give the file to write (or output_dir=)")
    if not writable_checked:
        _check_writable(o.parent)
    _check_name_length(o)


def check_paths(cfg: Config) -> None:
    """The path-valued keys a render writes to or reads from besides its media, checked before
    anything is loaded or made: a file to append to (``debug.faces``), the folders it makes
    (``cache_dir``, ``lock_dir``), the signing certificate and key it reads."""
    if cfg.debug.faces:
        _check_append_file(Path(cfg.debug.faces).expanduser(), "debug.faces")
    for key, value in (("cache_dir", cfg.cache_dir), ("lock_dir", cfg.lock_dir)):
        if value:
            _check_folder(Path(value).expanduser(), key)
    for key, value in (("mark.cert", cfg.mark.cert), ("mark.key", cfg.mark.key)):
        if value and cfg.mark.enabled:
            path = Path(value).expanduser()
            if not path.is_file() or not os.access(path, os.R_OK):
                raise UsageError(f"{key}={value}: no readable file there")


def _check_append_file(path: Path, key: str) -> None:
    """``path`` can be appended to: a writable regular file, or a new one in a writable folder."""
    if path.is_dir():
        raise UsageError(f"{key}={path} is a folder: give a file to append the lines to")
    kind = not_regular(path)
    if kind is not None:
        raise UsageError(f"{key}={path} is {kind}, not a regular file")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise UsageError(f"{key}={path} is not writable by this user (uid {os.getuid()})")
        return
    if not path.parent.is_dir():
        raise UsageError(f"{key}={path}: folder {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise UsageError(f"{key}={path}: folder {path.parent} is not writable by this user "
                         f"(uid {os.getuid()})")


def _check_folder(path: Path, key: str) -> None:
    """``path`` is a writable folder, or can be made: its nearest existing parent is one."""
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"{key}={path}: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"{key}={path}: {probe} is not writable by this user (uid {os.getuid()})")


def _check_regular(path: Path, what: str) -> None:
    """An input that exists but is no regular file (a FIFO, /dev/zero behind a link) would block
    or never end when it is hashed or decoded: refused before anything reads it."""
    kind = not_regular(path)
    if kind is not None:
        raise MediaError(f"{what} {path} is {kind}, not a regular file")


def _output_name(target: Path) -> str:
    """The target's name, with .mp4 / .png where its own type cannot be written (avi, bmp, tiff)."""
    if target.suffix.lower() in OUTPUT_EXTS:
        return target.name
    return target.stem + (".png" if target.suffix.lower() in IMAGE_EXTS else ".mp4")


#: pixel formats taken without asking ffmpeg (asking costs a process start)
COMMON_PIX_FMTS = frozenset({"yuv420p", "yuvj420p", "yuv422p", "yuv444p", "yuv420p10le",
                             "yuv422p10le", "yuv444p10le", "nv12", "p010le", "rgb24", "bgr24", "gbrp"})


def check_pix_fmt(pix_fmt: str) -> None:
    """encode.pix_fmt is a format ffmpeg can write: a typo is a usage error before any work, not
    an encoder failure at the first frame."""
    if pix_fmt in COMMON_PIX_FMTS:
        return
    known = ffmpeg_output_pixel_formats()
    if known is not None and pix_fmt not in known:
        raise UsageError(f"encode.pix_fmt={pix_fmt} is not a pixel format ffmpeg can write "
                         f"(e.g. yuv420p, yuv444p, yuv420p10le; `ffmpeg -pix_fmts` lists them)")


def _check_name_length(output: Path) -> None:
    """The output's name leaves room for the longest name made from it: the work folder
    ``.NAME.render-KEY16``, the report's temp ``.NAME.report.json.tmp-HOST-PID``, the assembly's
    ``STEM.tmp-HOST-PID.EXT`` and its marking temp ``.STEM.tmp-HOST-PID.EXT.PID.c2pa.tmp``:
    checked before any work, not found out midway at one of them."""
    try:
        limit = os.pathconf(output.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    me = f"{socket.gethostname()}-{'9' * 7}"          # a pid has at most 7 digits (pid_max 2^22)
    made = (f"..render-{'0' * 16}", f"..report.json.tmp-{me}", f"..tmp-{me}.{'9' * 7}.c2pa.tmp")
    extra = max(len(os.fsencode(m)) for m in made)
    size = len(os.fsencode(output.name))
    if size + extra > limit:
        raise UsageError(f"output name {output.name[:40]}... is too long: {size} bytes, at most "
                         f"{limit - extra} here (the work folder and temp names add {extra})")


def _check_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create output folder {folder}: {exc.strerror or exc}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"output folder {folder} is not writable by this user (uid {os.getuid()})")


def single_job(cfg: Config, what: str) -> Job:
    jobs = plan_jobs(cfg)
    if len(jobs) != 1:
        raise UsageError(f"{what} works on one target, not a folder ({len(jobs)} targets): give "
                         f"target=FILE and output=FILE")
    return jobs[0]
