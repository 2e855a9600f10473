"""Checking what a user wrote against the schema: a key's name (an unknown one is answered with
the nearest valid keys) and a value, turned into the key's type and held to its constraints.
Every error names where the value came from (a profile file, the command line, a report)."""
from __future__ import annotations

import difflib
import math
from typing import Any, get_origin

from ..errors import ConfigError
from .schema import SCHEMA, Key


def nearest_keys(name: str, n: int = 3) -> list[str]:
    names = list(SCHEMA)
    close = difflib.get_close_matches(name, names, n=n, cutoff=0.5)
    if not close:  # try the last component: "size" → detect.size
        tail = name.split(".")[-1]
        close = [k for k in names if k.split(".")[-1] == tail][:n]
    if not close:
        close = difflib.get_close_matches(name, names, n=n, cutoff=0.3)
    return close


def unknown_key_message(name: str, where: str) -> str:
    close = nearest_keys(name)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see render --help"
    return f"{where}: unknown key '{name}'{hint}"


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _describe(key: Key) -> str:
    t = key.type
    m = key.meta
    if get_origin(t) is tuple:
        base = "a list of " + ("|".join(m["choices"]) if m["choices"] else "strings")
        return base
    if m["choices"]:
        return "one of " + ", ".join(map(str, m["choices"]))
    name = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}[t]
    parts = [name]
    if m["min"] is not None and m["max"] is not None:
        parts.append(f"between {m['min']:g} and {m['max']:g}")
    if m["multiple"]:
        parts.append(f"(a multiple of {m['multiple']})")
    if m.get("auto") is not None:
        parts.append("or auto")
    return " ".join(parts)


def coerce(key: Key, value: Any, where: str) -> Any:
    """Turn a YAML or command-line value into the key's type, or raise ConfigError."""
    t, m = key.type, key.meta

    def bad() -> ConfigError:
        return ConfigError(f"{where}: {key.name}: expected {_describe(key)}, got {value!r}")

    if get_origin(t) is tuple:
        if isinstance(value, str):
            items = [v.strip() for v in value.split(",") if v.strip()]
        elif isinstance(value, (list, tuple)):
            items = value
        else:
            raise bad()
        if not all(isinstance(i, str) for i in items):
            raise bad()
        if m["choices"] and any(i not in m["choices"] for i in items):
            raise bad()
        return tuple(items)
    if t is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise bad()
    if m.get("auto") is not None and isinstance(value, str) and value.strip().lower() == "auto":
        return m["auto"]
    if t is int:
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, str):
            try:
                value = int(value, 10)
            except ValueError:
                raise bad() from None
        if not isinstance(value, int):
            raise bad()
    elif t is float:
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise bad() from None
        if not isinstance(value, (int, float)):
            raise bad()
        value = float(value)
        if not math.isfinite(value):   # nan passes every comparison with min and max
            raise bad()
    elif t is str:
        if value is None:
            value = ""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise bad()
        if m["choices"] and value not in m["choices"]:
            raise bad()
        return value
    if m["choices"] and value not in m["choices"]:
        raise bad()
    if m["min"] is not None and value < m["min"]:
        raise bad()
    if m["max"] is not None and value > m["max"]:
        raise bad()
    if m["multiple"] and value % m["multiple"]:
        raise bad()
    return value
