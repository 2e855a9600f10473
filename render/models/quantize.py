"""fp32 → int8: ONNX Runtime's static quantisation, calibrated on real faces, kept only through a
fidelity gate.

The int8 model is QDQ with per-channel int8 weights and uint8 activations, their ranges taken
(MinMax) from the inputs the model gets in a render of the calibration material
(:mod:`.calibration`): the same inputs give the same scales and the same file. It is kept only if,
on held-out faces, its results stay within its kind's gate of the fp32 model's, judged on what a
render uses of them:

- face processors (swappers, enhancers): the crops they give back, in grey levels: mean
  difference ≤ 1.5 and 99th percentile ≤ 8;
- the embedder and a swapper's converter: cosine to the fp32 vector ≥ 0.995 for every face;
- detectors: the same faces in every frame, each box at IoU ≥ 0.95 with the fp32 one;
- masks: the same side of 0.5 on ≥ 98 % of the pixels;
- landmarkers: points within 1 % of the face's size on average.

The figures go into the new manifest entry (``fidelity``, ``calibration``) and so into every
report that uses it; a model that fails stays fp32 and the command says why in one line.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import ModelError, UsageError
from ..faces.detect import Detector
from ..faces.embed import Embedder
from ..model_handle import ModelEntry, ProcessorModel
from .calibration import Material, Recording, builtin_frames, clip_frames, material, part_for
from .manifest import Manifest, write_local_entries
from .store import ModelStore, hash_file

log = logging.getLogger(__name__)

#: each kind's gate: figure → (bound, "max" or "min")
GATES: dict[str, dict[str, tuple[float, str]]] = {
    "image": {"mean_levels": (1.5, "max"), "p99_levels": (8.0, "max")},
    "identity": {"min_cosine": (0.995, "min")},
    "detector": {"min_iou": (0.95, "min"), "frames_with_other_faces": (0.0, "max")},
    "mask": {"agreement": (0.98, "min")},
    "points": {"mean_error_of_face": (0.01, "max")},
}
#: the opset from which ONNX's DequantizeLinear takes per-channel scales
PER_CHANNEL_OPSET = 13
#: the contracts whose last initializer the renderer reads (inswapper's emap): kept as it is
KEEP_LAST_INITIALIZER = ("swapper-inswapper",)


class Session:
    """An ONNX Runtime session on the CPU as the parts call one (``run``, ``session``)."""

    def __init__(self, path: Path) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(path), sess_options=options,
                                            providers=["CPUExecutionProvider"])
        self.providers = ["CPUExecutionProvider"]

    def run(self, feeds: Mapping[str, Any]) -> list:
        return self.session.run(None, dict(feeds))


def quantizer_version() -> str:
    import onnxruntime

    return (f"onnxruntime {onnxruntime.__version__} static QDQ (per-channel int8 weights, uint8 "
            f"activations, MinMax)")


def judge(kind: str, fp32: list[np.ndarray], int8: list[np.ndarray],
          meta: Mapping[str, Any] | None = None) -> dict[str, float]:
    """The gate's figures of ``int8``'s outputs against ``fp32``'s (same items, same order)."""
    if kind == "image":
        diff = np.concatenate([np.abs(a.astype(np.int16) - b.astype(np.int16)).ravel()
                               for a, b in zip(fp32, int8)]).astype(np.float64)
        return {"mean_levels": round(float(diff.mean()), 3),
                "p99_levels": round(float(np.percentile(diff, 99)), 3)}
    if kind == "identity":
        cos = [float(np.dot(a.ravel(), b.ravel()) /
                     max(np.linalg.norm(a) * np.linalg.norm(b), 1e-12)) for a, b in zip(fp32, int8)]
        return {"min_cosine": round(min(cos), 5), "mean_cosine": round(float(np.mean(cos)), 5)}
    if kind == "detector":
        ious, other = [], 0
        for a, b in zip(fp32, int8):
            if len(a) != len(b):
                other += 1
                continue
            for box in a:
                ious.append(max((_iou(box, c) for c in b), default=0.0))
        return {"min_iou": round(min(ious, default=1.0), 4), "frames_with_other_faces": other,
                "frames": len(fp32)}
    if kind == "mask":
        same = np.concatenate([((a >= 0.5) == (b >= 0.5)).ravel() for a, b in zip(fp32, int8)])
        return {"agreement": round(float(same.mean()), 5)}
    if kind == "points":
        sides = (meta or {}).get("sides") or [1.0] * len(fp32)
        errors = [float(np.linalg.norm(a - b, axis=-1).mean()) / max(side, 1.0)
                  for a, b, side in zip(fp32, int8, sides)]
        return {"mean_error_of_face": round(float(np.mean(errors)), 5)}
    raise ValueError(kind)


def passes(kind: str, figures: Mapping[str, float]) -> str | None:
    """None when ``figures`` pass ``kind``'s gate, else what failed, in words."""
    for name, (bound, how) in GATES[kind].items():
        value = figures[name]
        if (how == "max" and value > bound) or (how == "min" and value < bound):
            return f"{name} {value:g} ({'above' if how == 'max' else 'below'} {bound:g})"
    return None


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    x1, y1 = max(a[0], b[0]), max(a[1], b[1])
    x2, y2 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0


def convert_int8(entry: ModelEntry, models_dir: Path, manifest: Manifest, store: ModelStore, *,
                 detector: ModelEntry, embedder: ModelEntry, calibrate: Path | None,
                 cache_dir: Path) -> ModelEntry:
    """Quantise ``entry`` beside it, gate it and add its manifest entry; ``detector`` and
    ``embedder`` (fp32 entries) find and know the calibration faces."""
    if entry.precision == "int8":
        raise UsageError(f"model {entry.name} is already int8: nothing to convert")
    if entry.precision != "fp32":
        raise UsageError(f"model {entry.name} is {entry.precision}: convert its fp32 model "
                         f"({entry.source or 'the fp32 entry'}) to int8")
    try:
        from onnxruntime.quantization import quantize_static  # noqa: F401
    except ImportError:
        raise UsageError("int8 conversion needs onnxruntime's quantization tools (and onnx), "
                         "which are not installed here") from None
    name, file = f"{entry.name}_int8", f"{Path(entry.file).stem}_int8.onnx"
    for other in manifest:
        if other.file == file and other.name != name:
            raise UsageError(f"the int8 file name {file} is already used by model {other.name} "
                             f"({other.origin}): rename {entry.name}'s file")
    if name in manifest and manifest.get(name).source != entry.name:
        raise UsageError(f"a model named {name} already exists in {manifest.get(name).origin} "
                         f"and was not converted from {entry.name}: rename one of them")
    src = store.verify(entry)
    find = Detector(Session(store.verify(detector)), detector.contract,
                    size=detector.input_size or 640, score=0.5, nms_iou=0.4)
    frames = clip_frames(calibrate) if calibrate is not None else builtin_frames()
    where = (f"{calibrate.name} (sha256 {hash_file(calibrate)[:16]}…)" if calibrate is not None
             else "the built-in faces (scikit-image data)")
    mat = material(frames, find, where)
    needs = {n: ProcessorModel(manifest.get(n), path, Session(path), cache_dir)
             for n in entry.needs for path in (store.verify(manifest.get(n)),)}
    part = part_for(entry, src, mat, embedder=Embedder(Session(store.verify(embedder))),
                    needs=needs, cache_dir=cache_dir)
    fp32 = Session(src)
    recording = Recording(fp32)
    part.run(recording, False, mat)
    if not recording.feeds:
        raise UsageError(f"int8 calibration of {entry.name} fed the model nothing: give "
                         f"calibrate=CLIP, a clip with faces")
    out = Path(models_dir) / file
    tmp = out.with_name(out.name + ".partial")
    try:
        _quantise(src, tmp, recording.feeds, entry)
        meta = dict(part.meta)
        if "sides" in meta:
            meta["sides"] = mat.split(meta["sides"])[1]
        figures = judge(part.kind, part.run(fp32, True, mat),
                        part.run(Session(tmp), True, mat), meta)
        failed = passes(part.kind, figures)
        if failed is not None:
            raise ModelError(f"int8 conversion of {entry.name} failed its fidelity gate on "
                             f"held-out faces: {failed}; it stays fp32 (nothing was written)")
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    try:
        return _enter(entry, out, figures, recording, mat, part, where, models_dir, store)
    except BaseException:
        with contextlib.suppress(OSError):      # no file without its entry
            out.unlink()
        raise


def _enter(entry: ModelEntry, out: Path, figures: dict, recording: Recording, mat: Material,
           part: Any, where: str, models_dir: Path, store: ModelStore) -> ModelEntry:
    sha = hash_file(out)
    name, file = f"{entry.name}_int8", out.name
    held = len(mat.split(part.items)[1])
    new = dataclasses.replace(
        entry, name=name, file=file, sha256=sha, size=out.stat().st_size, urls=(),
        precision="int8", variants={}, confirmed=True, source=entry.name,
        source_sha256=entry.sha256,
        converter=quantizer_version(), needs=entry.needs, origin=None, fidelity=figures,
        calibration=f"{len(recording.feeds)} calls on {where}; gate on {held} held-out items",
        note=f"converted from {entry.file}")
    path = write_local_entries(models_dir, [new])
    store.write_stamp(out, sha)
    log.info("wrote %s (%s), gate %s, and its entry %s in %s", out, sha[:12], figures, name, path)
    return dataclasses.replace(new, origin=path)


def _opset(path: Path) -> int:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _quantise(src: Path, dest: Path, feeds: list[dict[str, np.ndarray]], entry: ModelEntry) -> None:
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                          QuantType, quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._feeds = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._feeds, None)

    logging.disable(logging.WARNING)     # the quantiser's advice goes to the root logger
    per_channel = True
    # the quantiser writes beside its input (a shape-inferred copy): its input is a link in a
    # folder of its own, so nothing but the .partial output is ever written in the models folder
    with tempfile.TemporaryDirectory(prefix="render-int8-") as work:
        source = Path(work) / "model.onnx"
        try:
            source.symlink_to(src.resolve())
            if _opset(src) < PER_CHANNEL_OPSET:      # per-channel scales need opset 13
                try:
                    from onnx import version_converter

                    upgraded = version_converter.convert_version(onnx.load(str(src)),
                                                                 PER_CHANNEL_OPSET)
                    source = Path(work) / "upgraded.onnx"
                    onnx.save(upgraded, str(source))
                except Exception:  # noqa: BLE001 - an op the converter cannot lift: per tensor
                    per_channel = False
            quantize_static(str(source), str(dest), Reader(), quant_format=QuantFormat.QDQ,
                            per_channel=per_channel, activation_type=QuantType.QUInt8,
                            weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)
        except Exception as exc:  # noqa: BLE001 - the quantiser raises many kinds
            first = " ".join(str(exc).split())[:300] or type(exc).__name__
            raise ModelError(f"cannot quantise model {entry.name} to int8 ({first}): it stays "
                             f"fp32") from None
        finally:
            logging.disable(logging.NOTSET)
    if entry.contract in KEEP_LAST_INITIALIZER:
        original = onnx.load(str(src), load_external_data=False).graph.initializer
        model = onnx.load(str(dest))
        inits = model.graph.initializer
        if original and (not inits or inits[-1].name != original[-1].name
                         or inits[-1].data_type != original[-1].data_type):
            kept = [i for i in inits if i.name != original[-1].name]
            del inits[:]
            inits.extend(kept)
            inits.append(original[-1])
            onnx.save(model, str(dest))
