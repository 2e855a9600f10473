"""fp32 → fp16 conversion for models that have no pinned fp16 file.

Uses onnxconverter-common's ``float16.convert_float_to_float16(model, keep_io_types=True)``: the
weights and activations become float16 while the graph's inputs and outputs stay float32, so the
renderer feeds and reads both files the same way.

Things the renderer relies on and that this module keeps intact:

* the inswapper's ``emap`` (the 512×512 matrix stored as the model's LAST initializer, read with
  the ``onnx`` package) stays the last initializer and stays float32; if a node consumes it, that
  node is kept in float32 (the converter casts around it);
* initializers keep their original order.

The result ``<stem>_fp16.onnx`` is written beside the source, and an entry ``<name>_fp16`` is
added to ``<models_dir>/manifest.yaml`` with ``source``, ``source_sha256`` (the verified hash of
the fp32 file) and ``converter`` (``onnxconverter-common X.Y.Z``), so the renderer resolves
``precision=fp16`` to it and verifies it like any pinned file.

Check before the file is kept: both models run on the same fixed, seeded input (shapes from the
model's inputs; a dynamic batch dimension becomes 1 and other dynamic dimensions the entry's
``input_size``; values in the range the contract's preprocessing produces). The documented
tolerance: for every output, ``max |fp16 − fp32| ≤ 2e-2 × max(1, max |fp32|)``, i.e. an absolute
2e-2 for outputs in 0..1 or −1..1 (swapped faces, enhanced faces, masks, scores), scaled to the
output's peak magnitude for larger outputs (logits, box offsets). A non-finite fp16 output where
the fp32 one is finite also fails. On failure the output is deleted and ModelError is raised.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import tempfile
import warnings
import os
from pathlib import Path
from typing import Any

import numpy as np

from render.errors import ModelError, UsageError

from .manifest import Manifest, ModelEntry, write_local_entries
from .store import ModelStore, hash_file

log = logging.getLogger(__name__)

TOLERANCE = 2e-2
KEEP_LAST_INITIALIZER_FP32 = ("swapper-inswapper",)
_DTYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(uint8)": np.uint8,
    "tensor(int8)": np.int8, "tensor(bool)": np.bool_,
}


def converter_version() -> str:
    import onnxconverter_common

    return f"onnxconverter-common {onnxconverter_common.__version__}"


def converted_name(entry: ModelEntry, precision: str = "fp16") -> tuple[str, str]:
    """(entry name, file name) of the converted model."""
    return f"{entry.name}_{precision}", f"{Path(entry.file).stem}_{precision}.onnx"


def _session(path: Path, what: str):
    import onnxruntime as ort

    available = ort.get_available_providers()
    attempts = []
    if "CUDAExecutionProvider" in available:
        attempts.append(["CUDAExecutionProvider", "CPUExecutionProvider"])
    attempts.append(["CPUExecutionProvider"])
    options = ort.SessionOptions()
    options.log_severity_level = 3
    error: Exception | None = None
    for providers in attempts:
        try:
            return ort.InferenceSession(str(path), sess_options=options, providers=providers)
        except Exception as exc:  # onnxruntime raises its own exception types
            error = exc
    first = " ".join(str(error).split())[:300]
    raise ModelError(f"cannot run the {what} model {path.name} on this machine ({first}): "
                     f"run the conversion where onnxruntime can execute fp16 (e.g. with a GPU)")


def _fixed_inputs(session, entry: ModelEntry) -> dict[str, np.ndarray]:
    """A seeded input per graph input, in the value range the contract's preprocessing makes."""
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {}
    size = entry.input_size or 64
    for arg in session.get_inputs():
        dtype = _DTYPES.get(arg.type)
        if dtype is None:
            raise ModelError(f"model {entry.name} input {arg.name} has type {arg.type}, which the "
                             f"conversion check cannot feed: convert it by hand")
        shape = [d if isinstance(d, int) and d > 0 else (1 if i == 0 else size)
                 for i, d in enumerate(arg.shape)]
        count = int(np.prod(shape)) if shape else 1
        if not np.issubdtype(dtype, np.floating):
            feeds[arg.name] = np.zeros(shape, dtype=dtype)
            continue
        if count <= 4:  # scalar knobs such as CodeFormer's fidelity weight
            value = np.full(shape, 0.5)
        elif entry.contract == "detector-yunet":
            value = rng.uniform(0.0, 255.0, shape)
        elif entry.contract == "occluder-xseg":
            value = rng.uniform(0.0, 1.0, shape)
        elif entry.contract == "swapper-inswapper" and len(shape) == 2:
            value = rng.standard_normal(shape)
            value /= np.linalg.norm(value, axis=-1, keepdims=True)
        elif entry.contract == "swapper-inswapper":
            value = rng.uniform(0.0, 1.0, shape)
        else:
            value = rng.uniform(-1.0, 1.0, shape)
        feeds[arg.name] = value.astype(dtype)
    return feeds


def compare(fp32_path: Path, fp16_path: Path, entry: ModelEntry) -> float:
    """Run both files on the fixed input; return the worst diff/scale ratio (≤ 1 passes)."""
    s32 = _session(fp32_path, "fp32")
    s16 = _session(fp16_path, "fp16")
    feeds = _fixed_inputs(s32, entry)
    feeds16 = {}
    for arg in s16.get_inputs():  # keep_io_types keeps float32, but be safe
        value = feeds[arg.name]
        dtype = _DTYPES.get(arg.type, value.dtype)
        feeds16[arg.name] = value.astype(dtype)
    try:
        out32 = s32.run(None, feeds)
        out16 = s16.run(None, feeds16)
    except Exception as exc:
        first = " ".join(str(exc).split())[:300]
        raise ModelError(f"model {entry.name} failed on the conversion check input ({first}): "
                         f"check its input_size in the manifest") from None
    worst = 0.0
    for meta, a, b in zip(s32.get_outputs(), out32, out16):
        a = np.asarray(a)
        b = np.asarray(b)
        if not np.issubdtype(a.dtype, np.floating):
            if not np.array_equal(a, b):
                return float("inf")
            continue
        a = a.astype(np.float64)
        b = b.astype(np.float64)
        if a.shape != b.shape or not np.all(np.isfinite(b[np.isfinite(a)])):
            log.warning("fp16 output %s of %s is not finite or changed shape", meta.name,
                        entry.name)
            return float("inf")
        finite = np.isfinite(a)
        if not finite.any():
            continue
        diff = float(np.max(np.abs(a[finite] - b[finite])))
        scale = max(1.0, float(np.max(np.abs(a[finite]))))
        ratio = diff / (TOLERANCE * scale)
        log.info("fp16 check %s output %s: max abs diff %.3g (tolerance %.3g)", entry.name,
                 meta.name, diff, TOLERANCE * scale)
        worst = max(worst, ratio)
    return worst


def _convert_proto(src: Path, entry: ModelEntry):
    import onnx
    from onnxconverter_common import float16

    model = onnx.load(str(src))
    graph = model.graph
    order = [init.name for init in graph.initializer]
    keep: dict[str, Any] = {}
    block_nodes: list[str] = []
    if entry.contract in KEEP_LAST_INITIALIZER_FP32 and order:
        last = graph.initializer[len(order) - 1]
        keep[last.name] = onnx.TensorProto()
        keep[last.name].CopyFrom(last)
        for i, node in enumerate(graph.node):
            if last.name in node.input:
                if not node.name:
                    node.name = f"render_keep_fp32_{i}"
                block_nodes.append(node.name)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model16 = float16.convert_float_to_float16(
                model, keep_io_types=True, node_block_list=block_nodes or None)
        for warning in caught:
            log.warning("fp16 conversion of %s: %s", entry.name, warning.message)
    except Exception as exc:
        first = " ".join(str(exc).split())[:300]
        raise ModelError(f"cannot convert model {entry.name} to fp16 ({first}): use a pinned "
                         f"fp16 file or precision=fp32") from None
    g16 = model16.graph
    for init in g16.initializer:  # float32 again for the kept tensors
        if init.name in keep:
            init.CopyFrom(keep[init.name])
    by_name = {init.name: init for init in g16.initializer}
    new_names = [n for n in by_name if n not in order]
    wanted = [n for n in order[:-1] if n in by_name] + new_names + \
        [n for n in order[-1:] if n in by_name]
    if [init.name for init in g16.initializer] != wanted:
        log.info("restoring the initializer order of %s", entry.name)
        tensors = [onnx.TensorProto() for _ in wanted]
        for tensor, name in zip(tensors, wanted):
            tensor.CopyFrom(by_name[name])
        del g16.initializer[:]
        g16.initializer.extend(tensors)
    if order and (not g16.initializer or g16.initializer[-1].name != order[-1]):
        raise ModelError(f"fp16 conversion of {entry.name} lost its last initializer "
                         f"{order[-1]}: use a pinned fp16 file or precision=fp32")
    for name, original in keep.items():
        if by_name[name].data_type != original.data_type:
            raise ModelError(f"fp16 conversion of {entry.name} changed {name}'s type: use "
                             f"precision=fp32")
    return model16


def convert(entry: ModelEntry, precision: str, models_dir: Path, manifest: Manifest, *,
            stamp_dir: Path | None = None) -> ModelEntry:
    """Convert ``entry`` to ``precision`` (fp16 only) beside it; return the new manifest entry."""
    import onnx

    if precision != "fp16":
        raise UsageError(f"cannot convert to {precision!r}: `render models convert "
                         f"{entry.name} fp16` or `... int8`")
    if entry.precision == "fp16":
        raise UsageError(f"model {entry.name} is already fp16: nothing to convert")
    try:
        import onnxconverter_common  # noqa: F401 - the converter, an optional dependency
    except ImportError:
        raise UsageError("render models convert needs onnxconverter-common, which is not "
                         "installed here: pip install onnxconverter-common (from a checkout: "
                         "pip install -e '.[convert]')") from None
    pinned = entry.variants.get("fp16")
    if pinned:
        raise UsageError(f"model {entry.name} has a pinned fp16 file ({pinned}): run "
                         f"`render models fetch {pinned}` instead of converting")
    models_dir = Path(models_dir).expanduser()
    name, file = converted_name(entry, precision)
    if name in manifest:
        existing = manifest.get(name)
        if existing.source != entry.name:
            raise UsageError(f"a model named {name} already exists in {existing.origin} and was "
                             f"not converted from {entry.name}: rename one of them")
    for other in manifest:
        if other.file == file and other.name != name:
            raise UsageError(f"the fp16 file name {file} is already used by model {other.name} "
                             f"({other.origin}): rename {entry.name}'s file")
    with contextlib.ExitStack() as stack:
        if stamp_dir is None:  # no stamp cache: verify by hashing, keep nothing
            stamp_dir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        return _convert(entry, precision, models_dir, manifest, name, file,
                        ModelStore(models_dir, manifest, stamp_dir))


def _convert(entry: ModelEntry, precision: str, models_dir: Path, manifest: Manifest, name: str,
             file: str, store: ModelStore) -> ModelEntry:
    import onnx

    src = store.verify(entry)
    if name in manifest:
        existing = manifest.get(name)
        if existing.source_sha256 == entry.sha256 and existing.file == file:
            with contextlib.suppress(ModelError):
                store.verify(existing)
                log.info("model %s is already converted and verified", name)
                return existing
    out = models_dir / file
    tmp = out.with_name(out.name + ".partial")
    log.info("converting %s to fp16 with %s", entry.name, converter_version())
    model16 = _convert_proto(src, entry)
    try:
        onnx.save(model16, str(tmp))
        del model16
        worst = compare(src, tmp, entry)
        if not worst <= 1.0:
            raise ModelError(
                f"fp16 conversion of {entry.name} differs from fp32 by more than the tolerance "
                f"(max |diff| ≤ {TOLERANCE} × output scale; worst {worst:.3g}× that): the output "
                f"was deleted; use precision=fp32 for this model")
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    sha = hash_file(out)
    new = ModelEntry(
        name=name, file=file, sha256=sha, size=out.stat().st_size, urls=(),
        licence=entry.licence, commercial_use=entry.commercial_use, contract=entry.contract,
        template=entry.template, input_size=entry.input_size, precision=precision,
        variants={}, confirmed=True, source=entry.name, source_sha256=entry.sha256,
        converter=converter_version(),
        note=f"converted from {entry.file}; fp16 check within {worst:.2f} of the tolerance",
    )
    path = write_local_entries(models_dir, [new])
    store.write_stamp(out, sha)
    log.info("wrote %s (%s) and its entry %s in %s", out, sha[:12], name, path)
    return dataclasses.replace(new, origin=path)
