"""The report beside every output: what made it, checkable by ``render verify``.

``<output>.report.json`` (schema :data:`SCHEMA`) is written atomically after the output is in place.
A failed or interrupted render writes its report into the work folder instead (status and the
one-line error), never beside the output where it could pass for a finished one.
"""
from __future__ import annotations

import json
import os
import resource
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from .cpu import summary as cpu_summary
from .files import sha256_file, write_atomic
from .gpus import nvml_handles
from .media.probe import MediaInfo, probe
from .plan import RenderPlan, config_hash
from .versions import installation

if TYPE_CHECKING:
    from .execute import ExecResult
    from .models.load import LoadedModels

SCHEMA = 1
SUFFIX = ".report.json"
FAILED_NAME = "report.json"


def report_path(output: Path) -> Path:
    return output.with_name(output.name + SUFFIX)


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds")


def media_summary(info: MediaInfo, path: Path, sha256: str | None = None, frames: int | None = None
                  ) -> dict[str, Any]:
    return {
        "path": str(path),
        "sha256": sha256 or sha256_file(path),
        "bytes": path.stat().st_size,
        "kind": info.kind,
        "width": info.width,
        "height": info.height,
        "fps": str(info.fps),
        "frames": frames if frames is not None else info.frame_count,
        "duration": info.duration,
        "audio": [{"codec": a.codec, "channels": a.channels, "sample_rate": a.sample_rate,
                   "duration": a.duration} for a in info.audio],
    }


def verified_summary(plan: RenderPlan, result: ExecResult) -> dict[str, Any]:
    """The output's summary from the plan and the streams its verification counted."""
    output = Path(plan.output)
    video = next(s for s in result.output_streams if s.kind == "video")
    return {
        "path": str(output),
        "sha256": result.output_sha256 or sha256_file(output),
        "bytes": output.stat().st_size,
        "kind": "video",
        "width": plan.output_size[0],
        "height": plan.output_size[1],
        "fps": plan.fps,
        "frames": video.packets,
        "duration": video.duration,
        "video_codec": video.codec,
        "audio": [{"codec": s.codec, "duration": s.duration}
                  for s in result.output_streams if s.kind == "audio"],
    }


# -- what a render used -----------------------------------------------------------------------------
class PeakMemory:
    """Peak RSS of the renderer and of its largest child, and peak GPU memory where NVML answers
    (sampled every ``interval`` s on a daemon thread; None when there is no NVML — never a
    made-up number).

    RSS peaks are each process's VmHWM (``/proc``): ``ru_maxrss`` would be wrong for both, since
    Linux carries the high-water mark of the forking process across exec — an ffmpeg child
    started while the models are loaded would report the renderer's gigabytes, and a renderer
    started by a large parent that parent's peak. The children are sampled while they run (the
    growth of a child's last ``interval`` s can be missed); ``RUSAGE_CHILDREN`` is the fallback
    where ``/proc`` does not list children.
    """

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.gpu_bytes: int | None = None
        self.child_bytes: int | None = None
        self._stop = threading.Event()
        self._nvml = nvml_handles()
        self._thread = threading.Thread(target=self._run, name="render-memory", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample_children()
            if self._nvml:
                self._sample_gpu()

    def _sample_children(self) -> None:
        try:
            tasks = os.listdir("/proc/self/task")
        except OSError:
            return
        for tid in tasks:
            try:
                with open(f"/proc/self/task/{tid}/children") as fh:
                    pids = fh.read().split()
            except OSError:
                continue
            for pid in pids:
                peak = vm_hwm_bytes(pid)
                if peak is not None and (self.child_bytes is None or peak > self.child_bytes):
                    self.child_bytes = peak

    def _sample_gpu(self) -> None:
        nvml, handles = self._nvml
        pid = os.getpid()
        used = 0
        for h in handles:
            try:
                for p in nvml.nvmlDeviceGetComputeRunningProcesses(h):
                    if p.pid == pid and p.usedGpuMemory:
                        used += int(p.usedGpuMemory)
            except Exception:  # noqa: BLE001 - NVML errors only cost the figure
                continue
        if used and (self.gpu_bytes is None or used > self.gpu_bytes):
            self.gpu_bytes = used

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(2)
        own = vm_hwm_bytes("self") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        child = self.child_bytes if self.child_bytes is not None else \
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        return {"rss_bytes": {"renderer": own, "largest_child": child},
                "gpu_bytes": self.gpu_bytes,
                "gpu_source": "nvml" if self._nvml else None}


def vm_hwm_bytes(pid: int | str) -> int | None:
    """Peak RSS of a live process since its exec (VmHWM), None when /proc does not say."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


# -- the report ---------------------------------------------------------------------------------------
def build(*, plan: RenderPlan, result: ExecResult | None, models: LoadedModels, target_info: MediaInfo,
          started: float, ended: float, memory: Mapping[str, Any], marks: Mapping[str, Any],
          status: str = "done", error: str | None = None, job: Mapping[str, Any] | None = None,
          lock: Mapping[str, Any] | None = None,
          sources: Mapping[str, Any] | None = None) -> dict[str, Any]:
    ident = plan.identity
    output = Path(plan.output)
    out: dict[str, Any] | None = None
    if status == "done" and output.exists():
        if result is not None and result.output_streams and plan.expect is not None:
            out = verified_summary(plan, result)   # what the verification read: no second probe
        else:
            info = probe(output)
            out = media_summary(info, output, result.output_sha256 if result else None,
                                frames=plan.frames)
    times = result.times if result is not None else None
    frames = plan.frames
    seconds = ended - started
    segments = [{"index": r.index, "frames": [r.start, r.end], "sha256": r.sha256,
                 "bytes": r.bytes, "seconds": r.seconds,
                 "state": "resumed" if r.resumed else "rendered", "host": r.host}
                for r in (result.segments if result else [])]
    faces = sum(r.faces for r in result.segments) if result else 0
    touched = sum(r.frames_touched for r in result.segments) if result else 0
    report = {
        "schema": SCHEMA,
        "status": status,
        "error": error,
        "installation": installation(),
        "cpu": cpu_summary(),
        "job_key": plan.key,
        "config": dict(plan.config),
        "config_hash": config_hash(plan.config),
        "config_explicit": list(plan.explicit),
        "versions": dict(ident.get("versions", {})),
        "models": models.records(),
        "target": media_summary(target_info, Path(plan.target), ident.get("target_sha256"),
                                frames=plan.total),
        "source": {"path": plan.source, "sha256": ident.get("source_sha256")},
        **dict(sources or {}),
        "reference": ({"path": plan.config.get("select.reference") or plan.source,
                       "sha256": ident.get("reference_sha256")}
                      if ident.get("reference_sha256") else None),
        "output": out,
        "plan": {"frames": [plan.start, plan.end], "total": plan.total, "partial": plan.partial,
                 "cfr": plan.cfr, "size": list(plan.output_size), "encode": dict(plan.encode),
                 "segments": len(plan.segments), **({"alpha": True} if plan.alpha else {})},
        "segments": segments,
        "timing": {
            "started": iso(started), "ended": iso(ended), "seconds": round(seconds, 3),
            "fps": round(frames / seconds, 3) if seconds > 0 and status == "done" else None,
            "frames_decoded": result.frames_decoded if result else 0,
            "threads": result.threads if result else None,
            "parallel_segments": result.parallel_segments if result else None,
            "overhead_s": ({k: round(v, 3) for k, v in result.overhead.items()} if result else None),
            "stage_ms_per_frame": ({k: round(v, 3) for k, v in times.ms_per_frame().items()}
                                   if times is not None and times.frames else None),
        },
        "memory": dict(memory),
        "synthetic": not plan.config.get("debug.overlay"),   # the overlay swaps nothing
        "swapped": {"faces": faces, "frames_touched": touched, "frames": frames},
        "quality": result.quality if result is not None else None,   # render.review
        "marks": dict(marks),
        "job": dict(job) if job else None,
        "lock": dict(lock) if lock else None,
    }
    return report


def write(report: Mapping[str, Any], path: Path) -> Path:
    write_atomic(path, (json.dumps(report, indent=1, sort_keys=True) + "\n").encode())
    return path


def load(path: Path) -> dict[str, Any]:
    from .errors import UsageError

    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"report not found: {path}") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read report {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UsageError(f"{path} is not a render report (schema {SCHEMA})")
    return data


def now() -> float:
    return time.time()


