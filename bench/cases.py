"""The benchmark's cases and the figures of one case over its runs."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from bench import realistic
from bench.figures import median

STAGES = ("decode", "detect", "embed", "swap", "enhance", "composite", "encode")
MODEL_STAGES = ("detect", "embed", "swap", "enhance")
REAL_CASES = ("real-720p-swap", "real-720p-enhance", "real-1080p-swap", "real-1080p-enhance",
              "real-720p-low", "real-720p-moderate", "real-720p-high", "real-720p-frame-x2",
              "real-720p-background", *realistic.face_models.CASES)
ALL_CASES = ("null-720p", "null-1080p", "models-720p", "overlap-720p", "memory-60s") + REAL_CASES \
    + ("model-costs", "stability")


@dataclass
class Case:
    name: str
    clip: str                   # ClipSpec name
    models: str                 # model set name
    floor: bool                 # measure the ffmpeg floor alongside
    note: str = ""
    frame_bytes: int = 0        # one raw bgr24 frame of its clip
    clip_name: str = ""         # e.g. "720p 10s"
    runs: list[dict] = field(default_factory=list)
    floors: list[dict] = field(default_factory=list)
    relays: list[dict] = field(default_factory=list)
    error: str | None = None
    overrides: dict[str, str] | None = None        # realistic cases: their own settings
    floor_overrides: dict[str, str] | None = None  # the floor's settings when not the case's
    alone: dict[str, dict[str, float]] = field(default_factory=dict)   # threads -> model -> ms/call
    bound: dict[str, Any] | None = None             # realistic.bound() of the medians
    #: realistic cases: the models timed alone (all cores) right after each render run, so that
    #: each run is judged against the bound of its own moment on a machine whose speed drifts
    alone_runs: list[dict[str, float]] = field(default_factory=list)
    after_run: Callable[["Case"], None] | None = None

    def run_bounds(self) -> list[dict[str, Any]]:
        """realistic.bound() per run: its own alone timing and its own (interleaved) floor."""
        cpf = self.calls_per_frame()
        return [realistic.bound(a, cpf, 1000.0 / f["fps"])
                for a, f in zip(self.alone_runs, self.floors)]

    def calls_per_frame(self) -> dict[str, float]:
        names = {k for r in self.runs for k in r.get("model_calls", {})}
        return {k: self.med(lambda r, k=k: r.get("model_calls", {}).get(k, {}).get("calls", 0)
                            / max(r["frames"], 1)) or 0.0 for k in names}

    def other_models(self) -> list[str]:
        """The models called in the render besides MODEL_STAGES' (masks, landmarkers, ...)."""
        return sorted(set(self.calls_per_frame()) - set(MODEL_STAGES))

    def in_render_ms(self, model: str) -> float | None:
        return self.med(lambda r: r.get("model_calls", {}).get(model, {}).get("ms_per_call"))

    @property
    def bound_ratio(self) -> float | None:
        """median over the runs of (fps / the compute bound's fps), each run against the bound
        measured next to it when there is one."""
        if not self.bound or not self.runs:
            return None
        per_run = self.run_bounds()
        if len(per_run) == len(self.runs):
            return median([r["fps"] / b["fps"] for r, b in zip(self.runs, per_run)])
        return self.med(lambda r: r["fps"] / self.bound["fps"])

    def med(self, fn: Callable[[dict], float | None], runs: list[dict] | None = None) -> float | None:
        return median([fn(r) for r in (self.runs if runs is None else runs)])

    @property
    def fps(self) -> float | None:
        return self.med(lambda r: r["fps"])

    @property
    def floor_fps(self) -> float | None:
        return self.med(lambda r: r["fps"], self.floors) if self.floors else None

    @property
    def ratio(self) -> float | None:
        """median over the interleaved (floor, render) pairs of render fps / floor fps."""
        if not self.floors or not self.runs:
            return None
        return median([r["fps"] / f["fps"] for r, f in zip(self.runs, self.floors)])

    def stage(self, name: str) -> float | None:
        return self.med(lambda r: r["ms_per_frame"].get(name))

    @property
    def segment_share(self) -> float | None:
        """Median share of render() spent on what segments add: committing them, joining and
        muxing, verifying the result (marking is counted apart: it is not segmenting)."""
        vals = [sum(r["overhead_s"][k] for k in ("commit", "assemble", "verify")) / r["seconds"]
                for r in self.runs if r.get("overhead_s")]
        return median(vals) if vals else None

    @property
    def rss_mib(self) -> float | None:
        return self.med(lambda r: r["tree_peak_kb"] / 1024)

    @property
    def ttff(self) -> float | None:
        return self.med(lambda r: r["first_frame_s"])

    @property
    def written(self) -> int | None:
        vals = [r["written_bytes"] for r in self.runs]
        return max(vals) if vals else None
