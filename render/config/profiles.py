"""Profile files: named YAML files in profiles/ (or a path to one), nested mappings of the
schema's sections, read into flat, validated ``{dotted key: value}``."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import yaml

from ..errors import ConfigError
from .schema import SCHEMA
from .validate import coerce, unknown_key_message

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PROFILES_DIR = PROJECT_ROOT / "profiles"

JOB_KEYS = ("profile",)  # keys a profile file may not set


def _flatten(data: Mapping[str, Any], where: str, prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for k, v in data.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping):
            if not any(s.startswith(name + ".") for s in SCHEMA):
                raise ConfigError(unknown_key_message(name, where))
            flat.update(_flatten(v, where, name + "."))
        else:
            flat[name] = v
    return flat


def profile_path(profile: str) -> Path:
    """A profile is a name in profiles/ or a path to a YAML file."""
    if profile.endswith((".yaml", ".yml")) or os.sep in profile:
        return Path(profile)
    return PROFILES_DIR / f"{profile}.yaml"


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))


def read_profile(profile: str) -> tuple[Path, dict[str, Any]]:
    """Read a profile file into flat, validated ``{dotted key: value}``."""
    path = profile_path(profile)
    if not path.is_file():
        names = ", ".join(profile_names())
        raise ConfigError(f"unknown profile '{profile}': no file {path} (profiles: {names})")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}:{line} is not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping of sections, got {type(data).__name__}")
    flat = _flatten(data, str(path))
    out = {}
    for name, value in flat.items():
        if name not in SCHEMA:
            raise ConfigError(unknown_key_message(name, str(path)))
        if name in JOB_KEYS:
            raise ConfigError(f"{path}: key '{name}' cannot be set in a profile")
        out[name] = coerce(SCHEMA[name], value, str(path))
    return path, out
