"""The ``trim`` key: START-END in seconds (12.5-20) or frames (300f-500f)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

_TRIM_PART = r"(\d+(?:\.\d+)?)(f|s)?"
_TRIM = re.compile(rf"^\s*{_TRIM_PART}\s*-\s*(?:{_TRIM_PART})?\s*$")


@dataclass(frozen=True)
class Trim:
    start: float
    end: float | None   # None = to the end
    unit: str           # "s" seconds or "f" frames

    def seconds(self, fps: Any) -> tuple[float, float | None]:
        if self.unit == "s":
            return self.start, self.end
        return self.start / float(fps), (None if self.end is None else self.end / float(fps))


def parse_trim(text: str) -> Trim | None:
    if not text:
        return None
    m = _TRIM.match(text)
    if not m:
        raise ConfigError(f"trim: expected START-END in seconds (12.5-20) or frames (300f-500f), "
                          f"got {text!r}")
    start, u1, end, u2 = m.groups()
    unit = u1 or u2 or "s"
    if u1 and u2 and u1 != u2:
        raise ConfigError(f"trim: START and END must use the same unit, got {text!r}")
    s = float(start)
    e = float(end) if end is not None else None
    if e is not None and e <= s:
        raise ConfigError(f"trim: END must be after START, got {text!r}")
    return Trim(s, e, unit)

