"""The generated clips of the benchmark (``render.standins.media.make_clip``), cached by their
parameters and the generator's source."""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from bench.figures import log
from render.standins import media


@dataclass(frozen=True)
class ClipSpec:
    name: str
    width: int
    height: int
    seconds: float
    fps: int = 25

    def key(self) -> str:
        src = Path(media.__file__).read_bytes()
        h = hashlib.sha256(src).hexdigest()[:10]
        return f"{self.width}x{self.height}-{self.seconds:g}s-{self.fps}fps-audio-{h}"


@dataclass
class Clip:
    spec: ClipSpec
    path: Path
    frames: int
    face_frames: int
    faces: int


def make_clip(spec: ClipSpec, clips_dir: Path, fresh: bool) -> Clip:
    clips_dir.mkdir(parents=True, exist_ok=True)
    path = clips_dir / f"{spec.key()}.mp4"
    meta = path.with_suffix(".json")
    if not fresh and path.is_file() and meta.is_file():
        m = json.loads(meta.read_text())
        log(f"  clip {spec.name}: cached {path.name}")
        return Clip(spec, path, m["frames"], m["face_frames"], m["faces"])
    t0 = time.perf_counter()
    tmp = path.with_name(path.stem + f".tmp-{os.getpid()}.mp4")
    truth = media.make_clip(tmp, width=spec.width, height=spec.height, fps=spec.fps,
                            seconds=spec.seconds, audio=True)
    os.replace(tmp, path)
    m = {"frames": truth.frame_count, "face_frames": len(truth.frames_with_faces()),
         "faces": sum(len(b) for b in truth.boxes)}
    meta.write_text(json.dumps(m))
    log(f"  clip {spec.name}: generated {path.name} ({truth.frame_count} frames) in "
        f"{time.perf_counter() - t0:.1f}s")
    return Clip(spec, path, m["frames"], m["face_frames"], m["faces"])
