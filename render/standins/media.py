"""Generated media for tests, the benchmark and the demo: clips and images with "faces" the stand-in SCRFD detector finds.

A face is a filled square in ``FACE_COLOUR`` (BGR 60, 140, 230), optionally with two dark eye dots
at the arcface eye positions; backgrounds are smooth grey/blue gradients (red below blue everywhere,
so the stand-in detector's faceness there is 0).

Sizes: the stand-in detector finds a square of side D detector pixels best at stride D/4. With the
frame scaled to fit ``detector_size`` (default 640) on its longest side, ``face_side(stride, w, h)``
gives the frame-pixel side that becomes 4*stride detector pixels; e.g. for 1280x720 at 640: stride 16
-> 128 px, stride 32 -> 256 px.

Public API: ``FACE_COLOUR``/``face_colour``, ``ALT_FACE_COLOUR``, ``face_side``, ``draw_face``,
``background``, ``default_schedule``, ``make_clip -> ClipTruth``, ``make_source_image -> ImageTruth``,
``make_image_target -> ImageTruth``; and, from ``render.standins.readback``, ``read_frames`` and
``probe_counts -> ProbeCounts`` to read media back.
"""
from __future__ import annotations

import math
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple, Union

import cv2
import numpy as np

from render.standins.readback import ProbeCounts, probe_counts, read_frames

FACE_COLOUR: Tuple[int, int, int] = (60, 140, 230)  # BGR, skin/orange: faceness 1
face_colour = FACE_COLOUR
ALT_FACE_COLOUR: Tuple[int, int, int] = (40, 120, 210)  # BGR, also faceness 1, another "identity"
EYE_COLOUR: Tuple[int, int, int] = (40, 40, 40)
EYES = ((0.34191607, 0.46157411), (0.65653393, 0.45983393))  # arcface_112_v2 eye positions
DETECTOR_SIZE = 640

Box = Tuple[int, int, int, int]
# (cx, cy, side) or (cx, cy, side, colour_bgr)
FaceSpec = Union[Tuple[int, int, int], Tuple[int, int, int, Tuple[int, int, int]]]
Schedule = Callable[[int], Sequence[FaceSpec]]
PathLike = Union[str, "os.PathLike[str]"]


# ------------------------------------------------------------------------------------ drawing
def face_side(stride: int, width: int, height: int, detector_size: int = DETECTOR_SIZE) -> int:
    """Frame-pixel side (even) of a square that is 4*stride px at the detector input."""
    scale = detector_size / float(max(width, height))
    side = int(round(4 * stride / scale))
    return side + (side % 2)


def face_box(cx: int, cy: int, side: int, width: Optional[int] = None, height: Optional[int] = None) -> Box:
    """(x1, y1, x2, y2) of a square centred on (cx, cy); clipped to the frame when its size is given."""
    x1, y1 = int(cx) - int(side) // 2, int(cy) - int(side) // 2
    x2, y2 = x1 + int(side), y1 + int(side)
    if width is not None and height is not None:
        x1, y1 = max(0, x1), max(0, y1)
        x2, y2 = min(int(width), x2), min(int(height), y2)
    return (x1, y1, x2, y2)


def draw_face(frame: np.ndarray, cx: int, cy: int, side: int, colour: Sequence[int] = FACE_COLOUR,
              *, eyes: bool = True) -> Box:
    """Draw a filled face square (and eye dots) into a BGR uint8 frame in place; returns its clipped box."""
    h, w = frame.shape[:2]
    x1, y1, x2, y2 = face_box(cx, cy, side, w, h)
    if x2 <= x1 or y2 <= y1:
        return (x1, y1, x2, y2)
    frame[y1:y2, x1:x2] = np.asarray(colour, dtype=np.uint8)
    if eyes and side >= 16:
        r = max(1, int(side) // 16)
        ox, oy = int(cx) - int(side) // 2, int(cy) - int(side) // 2
        for ex, ey in EYES:
            cv2.circle(frame, (int(round(ox + ex * side)), int(round(oy + ey * side))), r, EYE_COLOUR, -1,
                       lineType=cv2.LINE_8)
    return (x1, y1, x2, y2)


def _gradient(width: int, height: int) -> np.ndarray:
    x = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    y = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    b = 150.0 + 60.0 * x + 0.0 * y
    g = 105.0 + 40.0 * y + 10.0 * x
    r = 85.0 + 30.0 * y + 0.0 * x
    return np.stack([b, g, r], axis=-1)


def background(width: int, height: int, index: int = 0, *, _base: Optional[np.ndarray] = None) -> np.ndarray:
    """Smooth grey/blue gradient (red < blue everywhere) with a slight per-frame variation."""
    base = _gradient(width, height) if _base is None else _base
    shift = np.array([6.0 * math.sin(0.31 * index), 4.0 * math.sin(0.17 * index + 1.0),
                      5.0 * math.cos(0.23 * index)], dtype=np.float32)
    return np.clip(np.rint(base + shift), 0, 255).astype(np.uint8)


def default_schedule(width: int, height: int, frame_count: int,
                     detector_size: int = DETECTOR_SIZE) -> Schedule:
    """No face for the first 5 frames (fewer on very short clips), then one stride-16 face moving
    slowly right; from 60 % of the clip on, a second, stride-32 face (ALT_FACE_COLOUR) on the right."""
    n = int(frame_count)
    small = face_side(16, width, height, detector_size)
    large = face_side(32, width, height, detector_size)
    no_face = 5 if n >= 20 else max(1, n // 4)
    two_from = max(no_face + 1, int(n * 0.6))
    cy = int(round(0.45 * height))

    def faces(i: int) -> List[FaceSpec]:
        if i < no_face:
            return []
        t = (i - no_face) / max(1, n - 1 - no_face)
        cx = int(round((0.28 + 0.12 * t) * width))
        out: List[FaceSpec] = [(cx, cy, small)]
        if i >= two_from:
            out.append((int(round(0.75 * width)), int(round(0.5 * height)), large, ALT_FACE_COLOUR))
        return out

    return faces


def render_frame(width: int, height: int, index: int, specs: Sequence[FaceSpec], *, eyes: bool = True,
                 _base: Optional[np.ndarray] = None) -> Tuple[np.ndarray, List[Box]]:
    frame = background(width, height, index, _base=_base)
    boxes = []
    for spec in specs:
        cx, cy, side = int(spec[0]), int(spec[1]), int(spec[2])
        colour = spec[3] if len(spec) > 3 else FACE_COLOUR  # type: ignore[misc]
        boxes.append(draw_face(frame, cx, cy, side, colour, eyes=eyes))
    return frame, boxes


# ------------------------------------------------------------------------------------ truth
@dataclass(frozen=True)
class ClipTruth:
    path: Path
    width: int
    height: int
    fps: Fraction
    frame_count: int
    seconds: float
    audio: bool
    boxes: List[List[Box]] = field(repr=False)  # per frame, (x1, y1, x2, y2) in frame pixels
    detector_size: int = DETECTOR_SIZE

    def centres(self, index: int) -> List[Tuple[float, float]]:
        return [((x1 + x2) / 2.0, (y1 + y2) / 2.0) for x1, y1, x2, y2 in self.boxes[index]]

    @property
    def detector_scale(self) -> float:
        """Frame -> detector-input scale when the frame is fitted to detector_size (longest side)."""
        return self.detector_size / float(max(self.width, self.height))

    def frames_with_faces(self) -> List[int]:
        return [i for i, b in enumerate(self.boxes) if b]


@dataclass(frozen=True)
class ImageTruth:
    path: Path
    width: int
    height: int
    boxes: List[Box]


# ------------------------------------------------------------------------------------ encoding
def _fps_fraction(fps: Union[int, float, str, Fraction]) -> Fraction:
    if isinstance(fps, Fraction):
        return fps
    if isinstance(fps, float):
        return Fraction(fps).limit_denominator(1001)
    return Fraction(fps)


def _run_ffmpeg_pipe(cmd: List[str], frames, what: str) -> None:
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err)
        broken = False
        try:
            for frame in frames:
                proc.stdin.write(np.ascontiguousarray(frame).tobytes())
        except BrokenPipeError:
            broken = True
        finally:
            try:
                proc.stdin.close()
            except BrokenPipeError:
                broken = True
            rc = proc.wait()
        if rc != 0 or broken:
            err.seek(0)
            msg = err.read().decode("utf-8", "replace").strip().splitlines()[-5:]
            raise RuntimeError(f"ffmpeg failed writing {what} (rc={rc}): {' | '.join(msg)}")


def make_clip(path: PathLike, *, width: int = 1280, height: int = 720,
              fps: Union[int, float, str, Fraction] = Fraction(25, 1), seconds: float = 2.0,
              faces: Optional[Schedule] = None, audio: bool = True, codec: str = "libx264", crf: int = 12,
              detector_size: int = DETECTOR_SIZE, eyes: bool = True, pix_fmt: Optional[str] = "yuv420p",
              preset: str = "veryfast") -> ClipTruth:
    """Encode a generated clip (frames piped to ffmpeg as raw bgr24) plus a 440 Hz sine track.

    ``faces(i)`` returns the faces of frame i as (cx, cy, side[, colour]); default
    ``default_schedule(width, height, frame_count, detector_size)``. frame_count = round(seconds*fps).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rate = _fps_fraction(fps)
    n = int(round(seconds * rate))
    if n < 1:
        raise ValueError("clip would have no frames")
    schedule = faces or default_schedule(width, height, n, detector_size)
    base = _gradient(width, height)
    truth: List[List[Box]] = []

    def frames():
        for i in range(n):
            frame, boxes = render_frame(width, height, i, schedule(i), eyes=eyes, _base=base)
            truth.append(boxes)
            yield frame

    ext = path.suffix.lower()
    cmd = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
           "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{width}x{height}",
           "-framerate", f"{rate.numerator}/{rate.denominator}", "-i", "pipe:0"]
    if audio:
        cmd += ["-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=48000:duration={float(seconds):.6f}"]
    cmd += ["-map", "0:v:0"]
    if audio:
        cmd += ["-map", "1:a:0"]
    cmd += ["-c:v", codec]
    if codec in ("libx264", "libx265"):
        cmd += ["-crf", str(crf), "-preset", preset]
    elif codec.startswith("libvpx"):
        cmd += ["-crf", str(crf), "-b:v", "0"]
    if pix_fmt:
        cmd += ["-pix_fmt", pix_fmt]
    if audio:
        cmd += ["-c:a", "libopus" if ext == ".webm" else "aac", "-b:a", "128k"]
    if ext in (".mp4", ".mov", ".m4v"):
        cmd += ["-movflags", "+faststart"]
    cmd += [str(path)]
    _run_ffmpeg_pipe(cmd, frames(), str(path))
    return ClipTruth(path=path, width=width, height=height, fps=rate, frame_count=n, seconds=float(seconds),
                     audio=audio, boxes=truth, detector_size=detector_size)


def photo_face() -> np.ndarray:
    """A real photographed face, BGR: the head of scikit-image's public-domain astronaut portrait
    (NASA), which the real YuNet detector finds (score about 0.93). Needs scikit-image."""
    from skimage import data as skimage_data

    return cv2.cvtColor(skimage_data.astronaut(), cv2.COLOR_RGB2BGR)


def make_photo_clip(path: PathLike, *, width: int = 1280, height: int = 720,
                    fps: Union[int, float, str, Fraction] = Fraction(25, 1), seconds: float = 2.0,
                    audio: bool = True, crf: int = 18, preset: str = "veryfast") -> int:
    """A clip of the astronaut's head (``photo_face``, scaled to about 45 % of the frame height)
    drifting slowly over the gradient background, for the real YuNet detector: one real face per
    frame. Returns the frame count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rate = _fps_fraction(fps)
    n = int(round(seconds * rate))
    if n < 1:
        raise ValueError("clip would have no frames")
    head = photo_face()[0:300, 90:370]                 # 300 x 280 px around the face
    scale = 0.45 * height / head.shape[0]
    head = cv2.resize(head, (int(round(head.shape[1] * scale)), int(round(head.shape[0] * scale))),
                      interpolation=cv2.INTER_AREA)
    hh, hw = head.shape[:2]
    base = _gradient(width, height)

    def frames():
        for i in range(n):
            t = i / max(n - 1, 1)
            x = int(round((width - hw) * (0.2 + 0.6 * t)))
            y = int(round((height - hh) * (0.5 + 0.2 * np.sin(2 * np.pi * t))))
            frame = background(width, height, i, _base=base)
            frame[y:y + hh, x:x + hw] = head
            yield frame

    cmd = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
           "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{width}x{height}",
           "-framerate", f"{rate.numerator}/{rate.denominator}", "-i", "pipe:0"]
    if audio:
        cmd += ["-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=48000:duration={float(seconds):.6f}",
                "-map", "0:v:0", "-map", "1:a:0"]
    cmd += ["-c:v", "libx264", "-crf", str(crf), "-preset", preset, "-pix_fmt", "yuv420p"]
    if audio:
        cmd += ["-c:a", "aac", "-b:a", "128k"]
    cmd += ["-movflags", "+faststart", str(path)]
    _run_ffmpeg_pipe(cmd, frames(), str(path))
    return n


def _write_image(path: Path, image: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    ext = path.suffix.lower()
    params: List[int] = [cv2.IMWRITE_JPEG_QUALITY, 95] if ext in (".jpg", ".jpeg") else []
    ok, buf = cv2.imencode(ext or ".png", image, params)
    if not ok:
        raise RuntimeError(f"could not encode {path}")
    path.write_bytes(buf.tobytes())


def make_source_image(path: PathLike, side: int = 128, *, size: int = 640,
                      colour: Sequence[int] = ALT_FACE_COLOUR, eyes: bool = True) -> ImageTruth:
    """A size x size image (jpg/png by suffix) with one face square of ``side`` px at the centre.

    Default: 640 x 640 with a 128 px face -> found at stride 32 whether or not the detector rescales.
    The default colour is ALT_FACE_COLOUR, another "identity" than the clip's FACE_COLOUR faces.
    """
    path = Path(path)
    img = background(size, size, 0)
    box = draw_face(img, size // 2, size // 2, side, colour, eyes=eyes)
    _write_image(path, img)
    return ImageTruth(path=path, width=size, height=size, boxes=[box])


def make_image_target(path: PathLike, *, width: int = 1280, height: int = 720,
                      faces: Optional[Sequence[FaceSpec]] = None, detector_size: int = DETECTOR_SIZE,
                      eyes: bool = True) -> ImageTruth:
    """A target image for image -> image renders. Default: one stride-32 face in the centre."""
    path = Path(path)
    if faces is None:
        faces = [(width // 2, height // 2, face_side(32, width, height, detector_size))]
    img, boxes = render_frame(width, height, 0, faces, eyes=eyes)
    _write_image(path, img)
    return ImageTruth(path=path, width=width, height=height, boxes=boxes)


__all__ = [
    "ALT_FACE_COLOUR",
    "ClipTruth",
    "DETECTOR_SIZE",
    "FACE_COLOUR",
    "ImageTruth",
    "ProbeCounts",
    "background",
    "default_schedule",
    "draw_face",
    "face_box",
    "face_colour",
    "face_side",
    "make_clip",
    "make_image_target",
    "make_source_image",
    "probe_counts",
    "read_frames",
    "render_frame",
]
