"""The keys as ``render --help`` lists them: each with its value and meaning."""
from __future__ import annotations

from .schema import SCHEMA, Config


def help_text(cfg: Config | None = None) -> str:
    """Every key with its default (the profile's value when a profile is given) and meaning."""
    rows = []
    for key in SCHEMA.values():
        value = cfg.get(key.name) if cfg is not None else key.default
        if isinstance(value, (list, tuple)):
            value = ",".join(value)
        elif isinstance(value, bool):
            value = str(value).lower()
        elif key.meta.get("auto") is not None and value == key.meta["auto"]:
            value = "auto"
        rows.append((key.name, str(value), key.meta["help"]))
    width = max(len(r[0]) + len(r[1]) for r in rows) + 3
    return "\n".join(f"  {n}={v}".ljust(width + 2) + f"  {h}" for n, v, h in rows)
