"""What an int8 model is calibrated and judged on: real faces, and each model run by the class
that drives it in a render, so its inputs are exactly a render's.

The material is frames with their faces: frames spread over a clip the user names
(``calibrate=clip.mp4``), or by default a small set made from the real face photographs that
ship with scikit-image (the astronaut, the cameraman and the Labeled Faces in the Wild sample)
with augmentations (scale, rotation, light, mirror). The faces are found by the detector the
config names, at fp32. Every third face (or frame, for a detector) is held out: the gate judges
the int8 model on faces its calibration never saw.

A :class:`Part` runs one model over the material as a render would (the detector over frames,
the embedder and the landmarkers over faces, the face processors and masks over aligned crops)
with whichever session it is given; :class:`Recording` keeps the inputs a session was fed, which
are the calibration data.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import cv2
import numpy as np

from ..errors import ModelError, UsageError
from ..faces import align
from ..faces.contracts import DETECTORS, EMBEDDERS
from ..faces.detect import Detector
from ..faces.embed import Embedder
from ..faces.types import Face
from ..landmarks.registry import LANDMARKS
from ..masks.registry import MASKS
from ..model_handle import ModelEntry, ProcessorModel
from ..options import Mask
from ..processors import registry
from ..processors.base import FaceProcessor, Source
from ..processors.lip_sync import VOICE_CONTRACTS

log = logging.getLogger(__name__)

#: frames taken from a calibration clip, and the fewest faces a calibration may rest on
CLIP_FRAMES = 24
MIN_FACES = 6
#: the most faces calibration and the gate use
MAX_FACES = 36
#: every HELD_OUT-th item is held out for the gate
HELD_OUT = 3


class Recording:
    """A session that keeps a copy of every input it is fed (the calibration data)."""

    def __init__(self, lazy: Any) -> None:
        self.lazy = lazy
        self.feeds: list[dict[str, np.ndarray]] = []

    @property
    def session(self) -> Any:
        return self.lazy.session

    @property
    def providers(self) -> list[str]:
        return self.lazy.providers

    def run(self, feeds: Mapping[str, Any]) -> list:
        self.feeds.append({k: np.array(v, copy=True) for k, v in feeds.items()})
        return self.lazy.run(feeds)


@dataclass
class Material:
    """Frames and the faces found in them; ``describe`` says where they came from."""

    frames: list[np.ndarray]
    faces: list[list[Face]]
    describe: str

    def face_items(self) -> list[tuple[int, Face]]:
        """Every face, or MAX_FACES spread over them (the order of the frames and, in a frame,
        the detector's)."""
        items = [(i, f) for i, faces in enumerate(self.faces) for f in faces]
        if len(items) <= MAX_FACES:
            return items
        return [items[int(k * len(items) / MAX_FACES)] for k in range(MAX_FACES)]

    def split(self, items: list) -> tuple[list, list]:
        """(calibration, held out): every HELD_OUT-th item is held out."""
        return ([x for k, x in enumerate(items) if k % HELD_OUT != HELD_OUT - 1],
                [x for k, x in enumerate(items) if k % HELD_OUT == HELD_OUT - 1])


def clip_frames(clip: Path, count: int = CLIP_FRAMES) -> list[np.ndarray]:
    """``count`` frames spread evenly over ``clip`` (a video or an image)."""
    from ..media.probe import probe
    from ..media.reader import FrameReader
    from ..media.video_args import decode_args, decoded_size

    if not clip.is_file():
        raise UsageError(f"calibrate={clip}: no such file")
    info = probe(clip)
    scale = 720 if info.height > 720 else None    # faces are found at up to 720p
    width, height = decoded_size(info, scale)
    total = max(1, int(info.frame_count or 1))
    wanted = {int(round(k * (total - 1) / max(1, count - 1))) for k in range(count)}
    frames = []
    with FrameReader(decode_args(info, scale_height=scale), width, height) as reader:
        for n, frame in enumerate(reader):
            if n in wanted:
                frames.append(np.array(frame, copy=True))
    if not frames:
        raise UsageError(f"calibrate={clip}: no frame could be read")
    return frames


def builtin_frames() -> list[np.ndarray]:
    """The built-in set: scikit-image's face photographs, each in several augmentations."""
    try:
        from skimage import data
    except ImportError:
        raise UsageError("int8 conversion without calibrate=CLIP needs scikit-image for its "
                         "built-in calibration faces: pip install scikit-image (from a checkout: "
                         "pip install -e '.[convert]'), or give calibrate=clip.mp4") from None
    rgb = [data.astronaut(), np.dstack([data.camera()] * 3)]
    lfw = data.lfw_subset()[:100]           # the first hundred are faces, 25 x 25 grey
    tiles = [cv2.resize((f * 255).astype(np.uint8), (160, 160), interpolation=cv2.INTER_CUBIC)
             for f in lfw[:16]]
    mosaic = np.vstack([np.hstack(tiles[r * 4:(r + 1) * 4]) for r in range(4)])
    photos = [cv2.cvtColor(np.ascontiguousarray(p), cv2.COLOR_RGB2BGR) for p in rgb]
    photos.append(cv2.cvtColor(mosaic, cv2.COLOR_GRAY2BGR))
    frames = []
    for photo in photos:
        for turn, scale, light, mirror in ((0, 1.0, 1.0, False), (12, 0.8, 1.15, True),
                                           (-10, 1.2, 0.8, False), (5, 0.65, 1.0, True)):
            frames.append(_augment(photo, turn, scale, light, mirror))
    return frames


def _augment(image: np.ndarray, turn: float, scale: float, light: float, mirror: bool
             ) -> np.ndarray:
    h, w = image.shape[:2]
    m = cv2.getRotationMatrix2D((w / 2, h / 2), turn, scale)
    out = cv2.warpAffine(image, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
    out = np.clip(out.astype(np.float32) * light, 0, 255).astype(np.uint8)
    return out[:, ::-1].copy() if mirror else out


def material(frames: list[np.ndarray], detector: Detector, describe: str) -> Material:
    faces = [detector.detect(f) for f in frames]
    return Material(frames, faces, describe)


# -- each kind of model, run as a render runs it ---------------------------------------------------
@dataclass
class Part:
    """One model over the material: ``run(session, held_out)`` gives its outputs on one half of
    the items (as arrays the gate compares); ``kind`` names the gate that judges them."""

    kind: str
    items: list
    call: Callable[[Any, list], list[np.ndarray]]
    meta: dict[str, Any] = field(default_factory=dict)

    def run(self, session: Any, held_out: bool, mat: Material) -> list[np.ndarray]:
        calibration, held = mat.split(self.items)
        return self.call(session, held if held_out else calibration)


def part_for(entry: ModelEntry, path: Path, mat: Material, *, embedder: Embedder,
             needs: Mapping[str, ProcessorModel], cache_dir: Path) -> Part:
    """The part that runs ``entry`` (its file at ``path``) over ``mat``."""
    contract = entry.contract
    if contract in VOICE_CONTRACTS:      # a lip syncer's: its input is a voice, not faces alone
        raise UsageError(f"model {entry.name} takes a voice, which int8 calibration's faces do "
                         f"not give: convert it to fp16, or run it at fp32")
    faces = mat.face_items()
    if contract in DETECTORS:
        size = entry.input_size or 640

        def detect(session: Any, frames: list) -> list[np.ndarray]:
            det = Detector(session, contract, size=size, score=0.5, nms_iou=0.4)
            return [np.array([f.box for f in det.detect(mat.frames[i])], np.float32).reshape(-1, 4)
                    for i in frames]
        return Part("detector", list(range(len(mat.frames))), detect)
    _need(faces, entry)
    if contract in EMBEDDERS:
        def embed(session: Any, items: list) -> list[np.ndarray]:
            e = Embedder(session)
            return [e.embed(mat.frames[i], f) for i, f in items]
        return Part("identity", faces, embed)
    if contract in registry.helper_contracts():
        embeddings = [embedder.embed(mat.frames[i], f) for i, f in faces]

        def convert(session: Any, items: list) -> list[np.ndarray]:
            name = session.session.get_inputs()[0].name
            return [np.asarray(session.run({name: e.reshape(1, -1)})[0]) for e in items]
        return Part("identity", embeddings, convert)
    processor = registry.for_contract(contract)
    if processor is not None:
        source_frame, source_face = mat.frames[faces[0][0]], faces[0][1]
        source = Source(embedder.embed(source_frame, source_face),
                        lambda: (source_frame, source_face))

        def step(session: Any, items: list) -> list[np.ndarray]:
            model = ProcessorModel(entry, path, session, cache_dir, dict(needs))
            proc = registry.driver(processor, contract)(processor.step(entry.name), model)
            assert isinstance(proc, FaceProcessor)
            run = proc.bind(source)
            out = [run(_crops(mat, [(i, f)], proc.template, proc.size))[0] for i, f in items]
            # a step with a paste mask of its own returns it as a 4th channel: judge the BGR
            return [o[..., :3].astype(np.uint8) for o in out] if proc.own_mask else out
        return Part("image", faces, step)
    if contract in MASKS.contracts():
        def mask(session: Any, items: list) -> list[np.ndarray]:
            role = next(MASKS.roles[k] for k, c in MASKS.keys.items() if contract in c)
            model = ProcessorModel(entry, path, session, cache_dir)
            m = MASKS.driver(contract)(role, model, Mask())
            out = []
            for i, f in items:
                matrix = align.estimate(f.kps, "arcface_128", 256)
                out.append(m(_crops(mat, [(i, f)], "arcface_128", 256), [f], [matrix])[0])
            return out
        return Part("mask", faces, mask)
    if contract in LANDMARKS.contracts():
        def points(session: Any, items: list) -> list[np.ndarray]:
            lm = LANDMARKS.driver(contract)("landmark", ProcessorModel(entry, path, session,
                                                                        cache_dir))
            if hasattr(lm, "detect"):
                return [lm.detect(mat.frames[i], f)[0] for i, f in items]
            return [lm.estimate(f.kps) for i, f in items]
        return Part("points", faces, points,
                    {"sides": [float(max(f.box[2] - f.box[0], f.box[3] - f.box[1]))
                               for _, f in faces]})
    raise ModelError(f"model {entry.name}: no part of render drives its contract {contract}, "
                     f"so it cannot be calibrated")


def _need(faces: list, entry: ModelEntry) -> None:
    if len(faces) < MIN_FACES:
        raise UsageError(f"int8 calibration of {entry.name} found {len(faces)} faces (at least "
                         f"{MIN_FACES} are needed): give calibrate=CLIP, a clip with faces")


def _crops(mat: Material, items: list[tuple[int, Face]], template: str, size: int) -> np.ndarray:
    return np.stack([align.warp(mat.frames[i], align.estimate(f.kps, template, size), size)
                     for i, f in items])
