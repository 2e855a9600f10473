"""Building a :class:`Config`: schema defaults ← environment ← profile file ← command-line
overrides (:func:`load_config`), or every key's value at once, as a report records them
(:func:`config_from_values`). Each call returns a fresh object that the caller passes down."""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Callable, Mapping, Sequence, get_type_hints

from ..errors import ConfigError, UsageError
from .profiles import read_profile
from .schema import SCHEMA, Config, processor_sections
from .trim import parse_trim
from .validate import coerce, unknown_key_message


def parse_overrides(args: Sequence[str]) -> dict[str, str]:
    """``["a.b=1", "c=x"]`` → ``{"a.b": "1", "c": "x"}``; unknown keys are usage errors."""
    out: dict[str, str] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"argument '{arg}' is not key=value; see render --help")
        if key not in SCHEMA:
            raise UsageError(unknown_key_message(key, "command line"))
        out[key] = value
    return out


def _build(cls: type, flat: Mapping[str, Any], prefix: str = "") -> Any:
    hints = get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        if f.metadata.get("processors"):
            kwargs[f.name] = processor_sections(flat, _build)
            continue
        if f.metadata.get("internal"):
            if prefix + f.name in flat:
                kwargs[f.name] = flat[prefix + f.name]
            continue
        if dataclasses.is_dataclass(t):
            kwargs[f.name] = _build(t, flat, prefix + f.name + ".")
        elif prefix + f.name in flat:
            kwargs[f.name] = flat[prefix + f.name]
    return cls(**kwargs)


def load_config(overrides: Mapping[str, str] | None = None,
                env: Mapping[str, str] | None = None, *,
                auto: Callable[[], tuple[str, bool, str]] | None = None) -> Config:
    """Schema defaults ← environment defaults ← profile file ← command-line overrides.

    ``profile=auto`` picks low/moderate/high from GPU 0's memory (``auto``: the chooser, default
    :func:`render.gpus.auto_profile`; a machine without a GPU gets low with the CPU provider)."""
    overrides = dict(overrides or {})
    env = os.environ if env is None else env
    flat: dict[str, Any] = {}
    for key in SCHEMA.values():
        var = key.meta.get("env")
        if var and env.get(var):
            flat[key.name] = coerce(key, env[var], f"environment {var}")
    profile = overrides.get("profile", SCHEMA["profile"].default)
    if profile == "auto":
        from ..gpus import auto_profile

        profile, cpu_only, why = auto() if auto is not None else auto_profile()
        logging.getLogger(__name__).info("%s", why)
        if cpu_only and "execution.providers" not in overrides:
            overrides["execution.providers"] = "cpu"
        if cpu_only:                 # int8 where a gated file exists and the CPU has VNNI
            for key in (k for k in SCHEMA if k.endswith(".precision")):
                overrides.setdefault(key, "auto")
    _, from_profile = read_profile(profile)
    flat.update(from_profile)
    for name, value in overrides.items():
        if name not in SCHEMA:
            raise UsageError(unknown_key_message(name, "command line"))
        flat[name] = coerce(SCHEMA[name], value, "command line")
    flat["profile"] = profile
    flat["explicit"] = frozenset(overrides)
    cfg = _build(Config, flat)
    parse_trim(cfg.trim)  # validate early
    return cfg


def config_from_values(values: Mapping[str, Any], explicit: Sequence[str] = ()) -> Config:
    """The Config whose every key has the value in ``values`` (e.g. a report's ``config``), each
    validated as if it came from a profile; ``explicit``: the keys given on the command line then."""
    flat: dict[str, Any] = {}
    for name, value in values.items():
        if name not in SCHEMA:
            raise ConfigError(unknown_key_message(name, "report config"))
        if name == "profile":
            flat[name] = str(value)
            continue
        flat[name] = coerce(SCHEMA[name], value, "report config")
    flat["explicit"] = frozenset(explicit)
    cfg = _build(Config, flat)
    parse_trim(cfg.trim)
    return cfg

