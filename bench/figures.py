"""Small helpers of the benchmark's figures: the log line, the median, a figure as text."""
from __future__ import annotations

import statistics


def log(msg: str = "") -> None:
    print(msg, flush=True)


def median(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def fmt(value: float | None, spec: str = ".1f", none: str = "n/a") -> str:
    return none if value is None else format(value, spec)
