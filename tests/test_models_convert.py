"""`render models convert NAME fp16` on small generated models (and the real YuNet when present)."""
from __future__ import annotations

import hashlib
import io
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

from render.errors import ModelError, UsageError
from render.models import commands
from render.models.convert import TOLERANCE, converter_version
from render.models.manifest import load_manifest
from render.models.store import ModelStore, default_stamp_dir

YUNET = Path(__file__).resolve().parents[2] / "shared" / "models" / "face_detection_yunet.onnx"


def _save(graph, path: Path) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def toy_swapper(path: Path, *, emap_used: bool) -> Path:
    """target [n,3,8,8] + source [n,16] -> sigmoid(conv(target) + colour(source)); emap last."""
    rs = np.random.RandomState(0)
    conv_w = (rs.standard_normal((3, 3, 3, 3)) * 0.3).astype(np.float32)
    w_s = (rs.standard_normal((16, 3)) * 0.5).astype(np.float32)
    emap = (rs.standard_normal((16, 16)) / 4).astype(np.float32)
    latent = "latent" if emap_used else "source"
    nodes = [helper.make_node("Conv", ["target", "conv_w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("MatMul", [latent, "w_s"], ["col"]),
             helper.make_node("Reshape", ["col", "shape"], ["col4"]),
             helper.make_node("Add", ["c", "col4"], ["sum"]),
             helper.make_node("Sigmoid", ["sum"], ["output"])]
    if emap_used:
        nodes.insert(0, helper.make_node("MatMul", ["source", "emap"], ["latent"]))
    inits = [numpy_helper.from_array(conv_w, "conv_w"), numpy_helper.from_array(w_s, "w_s"),
             numpy_helper.from_array(np.array([-1, 3, 1, 1], np.int64), "shape"),
             numpy_helper.from_array(emap, "emap")]
    graph = helper.make_graph(
        nodes, "toy_swapper",
        [helper.make_tensor_value_info("target", TensorProto.FLOAT, ["n", 3, 8, 8]),
         helper.make_tensor_value_info("source", TensorProto.FLOAT, ["n", 16])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", 3, 8, 8])], inits)
    return _save(graph, path)


def overflowing(path: Path) -> Path:
    """y = (x * 1e5) * 1e-5: fp16 clips 1e5 to 1e4, so the fp16 file is off by 10x."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["input", "big"], ["a"]),
         helper.make_node("Mul", ["a", "small"], ["output"])], "overflow",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, "h", "w"])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, "h", "w"])],
        [numpy_helper.from_array(np.array(1e5, np.float32), "big"),
         numpy_helper.from_array(np.array(1e-5, np.float32), "small")])
    return _save(graph, path)


def register(models: Path, name: str, file: Path, **kw) -> None:
    """Add an entry for ``file`` (already in ``models``) to ``models/manifest.yaml``."""
    path = models / "manifest.yaml"
    doc = yaml.safe_load(path.read_text()) if path.exists() else {"version": 1, "models": {}}
    entry = {"file": file.name, "sha256": hashlib.sha256(file.read_bytes()).hexdigest(),
             "size": file.stat().st_size, "urls": [], "licence": "test, non-commercial",
             "commercial_use": False, "contract": "swapper-inswapper", "template": "arcface_128",
             "input_size": 8, "precision": "fp32"}
    entry.update(kw)
    doc["models"][name] = entry
    path.write_text(yaml.safe_dump(doc))


def run(argv, tmp_path, profiles=None, models_dir=None):
    out = io.StringIO()
    rc = commands.main(argv, models_dir=models_dir or tmp_path / "models",
                       cache_dir=tmp_path / "cache", manifest_paths=[],
                       profiles=profiles or {}, out=out,
                       fetch_options=dict(timeout=0.5, retries=0, backoff=0.01, progress=False))
    return rc, out.getvalue()


def session(path: Path):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("emap_used", [False, True])
def test_convert_within_tolerance_keeps_emap_last_and_float32(tmp_path, emap_used):
    models = tmp_path / "models"
    models.mkdir()
    src = toy_swapper(models / "toy_swap.onnx", emap_used=emap_used)
    register(models, "toy_swap", src)
    original = onnx.load(str(src))

    rc, out = run(["convert", "toy_swap", "fp16"], tmp_path)
    assert rc == 0 and "toy_swap_fp16" in out
    dst = models / "toy_swap_fp16.onnx"
    assert dst.is_file() and not (models / "toy_swap_fp16.onnx.partial").exists()

    converted = onnx.load(str(dst))
    names = [t.name for t in converted.graph.initializer]
    assert names == [t.name for t in original.graph.initializer] and names[-1] == "emap"
    emap = converted.graph.initializer[-1]
    assert emap.data_type == TensorProto.FLOAT
    np.testing.assert_array_equal(numpy_helper.to_array(emap),
                                  numpy_helper.to_array(original.graph.initializer[-1]))
    assert converted.graph.initializer[0].data_type == TensorProto.FLOAT16  # weights are fp16
    assert {i.type.tensor_type.elem_type for i in converted.graph.input} == {TensorProto.FLOAT}

    m = load_manifest(models)
    e = m.resolve("toy_swap", "fp16")
    assert e.name == "toy_swap_fp16" and e.precision == "fp16" and e.source == "toy_swap"
    assert e.source_sha256 == hashlib.sha256(src.read_bytes()).hexdigest()
    assert e.converter == converter_version() and e.converter.startswith("onnxconverter-common ")
    assert (e.contract, e.template, e.input_size, e.licence, e.commercial_use) == \
        ("swapper-inswapper", "arcface_128", 8, "test, non-commercial", False)
    assert e.origin == models / "manifest.yaml" and "toy_swap" in m  # source entry kept
    store = ModelStore(models, m, default_stamp_dir(tmp_path / "cache"))
    assert store.status(e) == "verified"  # stamped by convert: no re-hash at render time

    rs = np.random.default_rng(5)
    feeds = {"target": rs.uniform(0, 1, (2, 3, 8, 8)).astype(np.float32),
             "source": rs.standard_normal((2, 16)).astype(np.float32)}
    a = session(src).run(None, feeds)[0]
    b = session(dst).run(None, feeds)[0]
    assert b.dtype == np.float32 and float(np.abs(a - b).max()) <= TOLERANCE

    before = dst.stat().st_mtime_ns
    rc, out = run(["convert", "toy_swap"], tmp_path)  # again: nothing to do
    assert dst.stat().st_mtime_ns == before


def test_conversion_outside_tolerance_is_refused_and_deleted(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    src = overflowing(models / "over.onnx")
    register(models, "over", src, contract="enhancer-gfpgan", template="ffhq_512", input_size=16)
    manifest_before = (models / "manifest.yaml").read_text()
    with pytest.raises(ModelError, match="differs from fp32 by more than the tolerance.*deleted"):
        run(["convert", "over", "fp16"], tmp_path)
    assert sorted(p.name for p in models.iterdir()) == ["manifest.yaml", "over.onnx"]
    assert (models / "manifest.yaml").read_text() == manifest_before


def test_convert_refuses_to_clobber_another_models_file(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    src = toy_swapper(models / "inswapper_128.onnx", emap_used=False)
    register(models, "my_swap", src)  # its fp16 file name would be the pinned inswapper_128_fp16's
    with pytest.raises(UsageError, match="already used by model inswapper_128_fp16"):
        run(["convert", "my_swap", "fp16"], tmp_path)


def test_convert_refuses_a_corrupt_source(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    src = toy_swapper(models / "toy_swap.onnx", emap_used=False)
    register(models, "toy_swap", src)
    src.write_bytes(src.read_bytes()[:-1] + b"\0")
    with pytest.raises(ModelError, match=r"toy_swap .*is corrupt"):
        run(["convert", "toy_swap", "fp16"], tmp_path)
    assert not (models / "toy_swap_fp16.onnx").exists()


def test_fetch_profile_converts_what_has_no_pinned_fp16(tmp_path):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    src = toy_swapper(ctx / "toy_swap.onnx", emap_used=True)
    register(ctx, "toy_swap", src)  # ctx/manifest.yaml: an overlay shipped with the file
    rc, out = run(["fetch", "profile=p", f"from={ctx}"], tmp_path,
                  profiles={"p": [("toy_swap", "fp16")]})
    assert rc == 0 and "toy_swap_fp16: converted from toy_swap" in out
    m = load_manifest(tmp_path / "models")
    e = m.resolve("toy_swap", "fp16")
    assert ModelStore(tmp_path / "models", m, default_stamp_dir(tmp_path / "cache")).verify(e)


def test_standin_inswapper_converts(tmp_path):
    from render import standins

    models = tmp_path / "models"
    models.mkdir()
    src = models / "standin_swap.onnx"
    standins.make_inswapper(src)
    register(models, "standin_swap", src, input_size=128)
    run(["convert", "standin_swap", "fp16"], tmp_path)
    converted = onnx.load(str(models / "standin_swap_fp16.onnx"))
    assert converted.graph.initializer[-1].name == "emap"
    assert converted.graph.initializer[-1].data_type == TensorProto.FLOAT


@pytest.mark.skipif(not YUNET.is_file(), reason="shared/models/face_detection_yunet.onnx absent")
def test_real_yunet_converts_within_tolerance(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    src = models / "yunet_real.onnx"
    shutil.copyfile(YUNET, src)
    register(models, "yunet_real", src, contract="detector-yunet", template=None, input_size=320,
             licence="MIT", commercial_use=True)
    rc, out = run(["convert", "yunet_real", "fp16"], tmp_path)
    assert rc == 0
    e = load_manifest(models).resolve("yunet_real", "fp16")
    assert e.file == "yunet_real_fp16.onnx" and e.size < src.stat().st_size
