"""The realistic bench's per-call costs are counted from each model's published architecture:
the count's weights must add up to the pinned file's size, or the count is not that file's."""
from __future__ import annotations

import pytest

from bench import cases, frame_costs, model_costs, realistic

#: how far params × 4 bytes may fall from the pinned size (2dfan4's file also holds its heatmap
#: decoding's index grids, 2.3 MB without MACs: the count is 2.5 % short there)
TOLERANCE = {"2dfan4": 0.03}


@pytest.mark.parametrize("name", sorted(model_costs.COUNTED))
def test_the_counted_weights_make_the_pinned_file(name):
    size = model_costs.pinned_sizes()[name]
    count = model_costs.COUNTED[name]()
    ratio = count.params * 4 / size
    assert abs(ratio - 1.0) <= TOLERANCE.get(name, 0.005), (name, ratio)
    assert count.macs > 0


def test_known_counts():
    """Figures a reader can check elsewhere: OpenVINO's Open Model Zoo gives the same IResNet-50
    (face-recognition-resnet50-arcface, LResNet50E-IR) 12.637 GFLOPs and 43.576 M parameters;
    ResNet-18/34 backbones cost 1.8/3.6 GMAC at 224 px, so BiSeNet at 512 px costs more than
    (512/224)² times those."""
    arcface = model_costs.arcface_w600k_r50()
    assert 2 * arcface.macs / 1e9 == pytest.approx(12.637, rel=0.01)
    assert arcface.params / 1e6 == pytest.approx(43.576, rel=0.002)
    assert model_costs.bisenet(18).macs > 1.8e9 * (512 / 224) ** 2
    assert model_costs.bisenet(34).macs > 3.6e9 * (512 / 224) ** 2


def test_the_realistic_set_uses_the_counts():
    for name in realistic.REAL_MODELS:
        assert realistic.REAL_GFLOPS[name] == pytest.approx(model_costs.gflops(name), abs=0.06)
        assert realistic.REAL_WEIGHTS_MB[name] == pytest.approx(
            model_costs.pinned_sizes()[name] / 2**20, abs=0.06)
    # hyperswap's architecture is not published: it is given inswapper's cost, and says so
    assert model_costs.ASSUMED["hyperswap_1a_256"] == "inswapper_128"
    assert "ReSwapper issue 12" in model_costs.__doc__


def test_the_frame_models_counts():
    """Real-ESRGAN's, SPAN's and MODNet's parameters are the published ones; x2 pixel-unshuffles
    its input, so at 256 px it costs what x4 costs at 128 px but for its first conv's 12
    channels in."""
    for name, published in frame_costs.PUBLISHED_PARAMS.items():
        assert frame_costs.UNPINNED[name]().params / 1e6 == pytest.approx(published, rel=0.01)
    x2, x4 = frame_costs.rrdbnet(2, 256), frame_costs.rrdbnet(4, 128)
    assert x2.macs - x4.macs == (12 - 3) * 64 * 9 * 128 * 128
    assert model_costs.gflops("real_esrgan_x4") == pytest.approx(
        4 * model_costs.gflops("real_esrgan_x2"), rel=0.05)


def test_the_face_processors_set_uses_the_counts():
    """The face processors' stand-ins get the counts of bench/deep_swap_costs.py,
    live_portrait_costs.py and age_costs.py; models whose count rounds to 0 GFLOP stay as
    they are."""
    from bench import age_costs, deep_swap_costs, face_models, live_portrait_costs

    dfm = deep_swap_costs.saehd(face_models.DFM_ARCHI)
    assert face_models.COSTS[face_models.DFM_MODEL] == pytest.approx(
        (2 * dfm.macs / 1e9, dfm.params * 4 / 2**20), abs=0.06)
    for name in ("live_portrait", "live_portrait_feature_extractor",
                 "live_portrait_motion_extractor"):
        assert face_models.COSTS[name][0] == pytest.approx(
            2 * live_portrait_costs.COUNTED[name]().macs / 1e9, abs=0.06)
    assert "live_portrait_stitcher" not in face_models.COSTS
    assert face_models.COSTS["fran"][0] == pytest.approx(2 * age_costs.fran().macs / 1e9, abs=0.06)
    for name, case in face_models.CASES.items():
        assert name in cases.REAL_CASES
        assert realistic.case_settings(name)["processors"] == case.settings["processors"]


@pytest.mark.parametrize("build, feeds", [
    ("generator", {"feature_volume": (1, 32, 16, 64, 64), "source": (1, 21, 3),
                   "target": (1, 21, 3)}),
    ("motion", {"input": (1, 3, 256, 256)}),
    ("fairface", {"input": (1, 3, 224, 224)}),
])
def test_a_costed_stand_in_keeps_its_answers(tmp_path, build, feeds):
    """add_cost adds the MatMul chain's exact 0 to the first output (a 0-d angle, an int64
    id, an image): the same outputs, the weights in the file."""
    import numpy as np
    import onnxruntime as ort

    from bench.face_models import add_cost
    from render.standins import age_modifiers, face_editor

    make = {"generator": face_editor.make_generator, "motion": face_editor.make_motion_extractor,
            "fairface": age_modifiers.make_fairface}[build]
    plain, costed = tmp_path / "plain.onnx", tmp_path / "costed.onnx"
    make(plain)
    make(costed)
    add_cost(costed, 0.2, 1.0)
    assert 2**20 < costed.stat().st_size - plain.stat().st_size < 1.1 * 2**20   # the weights
    rs = np.random.RandomState(0)
    x = {k: rs.random_sample(s).astype(np.float32) for k, s in feeds.items()}
    a, b = (ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
            for p in (plain, costed))
    assert [o.name for o in a.get_outputs()] == [o.name for o in b.get_outputs()]
    for u, v in zip(a.run(None, x), b.run(None, x)):
        assert u.dtype == v.dtype and u.shape == v.shape and np.array_equal(u, v)
