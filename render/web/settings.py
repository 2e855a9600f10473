"""The class settings the teacher sets on the teacher page (kept in the classroom database)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Mapping

from ..config import profile_names
from .db import Database

#: key → (lowest, highest) allowed value
LIMITS: dict[str, tuple[float, float]] = {
    "max_upload_mb": (1, 100_000),
    "max_clip_seconds": (1, 36_000),
    "max_queued_jobs": (1, 1000),
    "retention_days": (1, 3650),
}


class SettingsRejected(ValueError):
    """A value outside what the class settings allow (the message names the key)."""


@dataclass(frozen=True)
class ClassSettings:
    allowed_profiles: tuple[str, ...] = ("low",)   # the profiles students may choose
    max_upload_mb: int = 200          # largest source or target file (MiB)
    max_clip_seconds: int = 60        # longest target clip
    max_queued_jobs: int = 2          # jobs of one student queued or running at once
    retention_days: int = 7           # finished jobs and all their files are removed after this

    @property
    def max_upload_bytes(self) -> int:
        return self.max_upload_mb * 1024 * 1024

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["allowed_profiles"] = list(self.allowed_profiles)
        return data


def parse(values: Mapping[str, Any], base: ClassSettings | None = None) -> ClassSettings:
    """``values`` (any subset of the keys) over ``base``, validated."""
    base = base or ClassSettings()
    out = base.to_dict()
    for key, value in values.items():
        if key not in out:
            raise SettingsRejected(f"unknown class setting {key!r} (settings: {', '.join(out)})")
        if key == "allowed_profiles":
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            if not isinstance(value, (list, tuple)) or not value \
                    or not all(isinstance(v, str) for v in value):
                raise SettingsRejected("allowed_profiles: expected at least one profile name")
            known = profile_names()
            unknown = [v for v in value if v not in known]
            if unknown:
                raise SettingsRejected(f"allowed_profiles: no profile {', '.join(unknown)} "
                                       f"(profiles: {', '.join(known)})")
            out[key] = tuple(dict.fromkeys(value))
            continue
        low, high = LIMITS[key]
        try:
            number = int(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            number = None
        if number is None or isinstance(value, float) and value != int(value):
            raise SettingsRejected(f"{key}: expected a whole number, got {value!r}")
        if not low <= number <= high:
            raise SettingsRejected(f"{key}: expected a number from {low:g} to {high:g}, got {number}")
        out[key] = number
    out["allowed_profiles"] = tuple(out["allowed_profiles"])
    return ClassSettings(**out)


def load(db: Database) -> ClassSettings:
    with db.connect() as con:
        row = con.execute("SELECT value FROM settings WHERE name = 'class'").fetchone()
    if row is None:
        return ClassSettings()
    try:
        stored = json.loads(row["value"])
        # a profile removed since the teacher allowed it is dropped, not an error
        if isinstance(stored.get("allowed_profiles"), list):
            stored["allowed_profiles"] = [p for p in stored["allowed_profiles"]
                                          if p in profile_names()] or list(ClassSettings.allowed_profiles)
        return parse({k: v for k, v in stored.items() if k in ClassSettings.__dataclass_fields__})
    except (ValueError, AttributeError, SettingsRejected):
        return ClassSettings()


def save(db: Database, values: Mapping[str, Any]) -> ClassSettings:
    settings = parse(values, load(db))
    with db.connect() as con:
        con.execute("INSERT INTO settings (name, value) VALUES ('class', ?) "
                    "ON CONFLICT(name) DO UPDATE SET value = excluded.value",
                    (json.dumps(settings.to_dict(), sort_keys=True),))
    return settings
