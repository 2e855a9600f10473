"""What a spool job asks for, read and checked before it is queued: a job file or ``key=value``
settings, their paths made absolute, and the renderer's own messages for what would fail the job.

A job file (YAML)::

    source: face.jpg
    target: clips/            # a file, a folder, or `targets: [a.mp4, b.mov]`
    output_dir: out/          # or `output: out/clip.mp4` for a single target
    profile: low
    overrides: {detect.size: 640}
    priority: 0

Relative paths are taken from the job file's folder (from the current folder for key=value).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from .config import SCHEMA, load_config, parse_overrides, unknown_key_message
from .errors import MediaError, UsageError
from .sources import absolute_map, absolute_source, source_paths

PATH_KEYS = ("target", "output", "output_dir", "input_dir", "select.reference",
             "models.dir", "cache_dir", "lock_dir", "mark.cert", "mark.key", "background.image")


def absolute(settings: dict[str, str], base: Path) -> dict[str, str]:
    """``settings`` with the paths of :data:`PATH_KEYS` taken from ``base``."""
    out = dict(settings)
    for key in PATH_KEYS:
        if out.get(key):
            out[key] = str((base / Path(out[key]).expanduser()).resolve())
    if out.get("source"):                 # one image, several, or a folder
        out["source"] = absolute_source(out["source"], base)
    if out.get("select.map"):
        out["select.map"] = absolute_map(out["select.map"], base)
    return out


def read_job_file(path: Path) -> tuple[dict[str, str], list[str], int]:
    """(settings, targets, priority) of a job file; UsageError naming the file when it is bad."""
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"job file not found: {path}") from None
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"job file {path} is not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise UsageError(f"job file {path}: expected a mapping (source, target, output, profile, "
                         f"overrides)")
    data = dict(data)
    overrides = data.pop("overrides", None) or {}
    targets = data.pop("targets", None)
    priority = data.pop("priority", 0)
    if not isinstance(overrides, dict):
        raise UsageError(f"job file {path}: overrides must be a mapping of key: value")
    settings = {str(k): _text(v) for k, v in data.items()}
    settings.update({str(k): _text(v) for k, v in overrides.items()})
    for key in settings:
        if key not in SCHEMA:
            raise UsageError(unknown_key_message(key, f"job file {path}"))
    base = path.parent
    if targets is not None:
        if not isinstance(targets, list) or not targets:
            raise UsageError(f"job file {path}: targets must be a list of files")
        targets = [str((base / Path(str(t)).expanduser()).resolve()) for t in targets]
    try:
        priority = int(priority)
    except (TypeError, ValueError):
        raise UsageError(f"job file {path}: priority must be a whole number") from None
    return absolute(settings, base), targets or [], priority


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)


def validate(settings: Mapping[str, str], targets: Sequence[str]) -> None:
    """Fail at submit time, with the renderer's own messages, for what would fail the job."""
    unknown = [k for k in settings if k not in SCHEMA]
    if unknown:
        parse_overrides([f"{k}=" for k in unknown])      # raises the nearest-key message
    cfg = load_config(dict(settings))
    if targets and cfg.output:
        if len(targets) > 1:
            raise UsageError("a job with several targets needs output_dir=, not output=")
    if not targets and not cfg.target and not cfg.input_dir:
        raise UsageError("a job needs a target (target=, targets: or input_dir=)")
    if not cfg.output and not cfg.output_dir:
        raise UsageError("a job needs output= or output_dir=")
    for t in list(targets) + ([cfg.target] if cfg.target else []):
        if not Path(t).exists():
            raise UsageError(f"target not found: {t}")
    if cfg.source:
        try:
            source_paths(cfg.source)
        except MediaError as exc:
            raise UsageError(str(exc)) from None
