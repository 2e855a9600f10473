"""The face processors' realistic cases (issue 40): their stand-ins at each production model's
counted cost, their settings and clip lengths, and how a model call of theirs is timed alone.

Each stand-in keeps its contract's inputs, outputs and answers (``render.standins``: the deep
swapper's, LivePortrait's, the age modifier's) and is given the counted cost per call and the
counted float32 weights by ``graph.dummy_zero``, the mechanism of the rest of the realistic set:
a MatMul chain over distinct weight matrices that depends on the model's first input and is
added, as an exact 0, to its first output (:func:`add_cost`; the DFM builder takes the knobs
itself). The counts and their sources:

================================ ============ ============= ======================================
model                            GFLOP / call weights (MiB) source
================================ ============ ============= ======================================
iperov_elon_musk_224 (DFM)       61.0         479 (counted) ``bench/deep_swap_costs.py``: SAEHD
                                                            liae-ud at 224, DeepFaceLab's default
live_portrait_feature_extractor  64.1         3.2           ``bench/live_portrait_costs.py``
live_portrait_motion_extractor   11.6         107           idem
live_portrait (generator)        1233.6       385           idem: warping module + SPADE decoder
eye/lip retargeters, stitcher    ~0           < 1           idem: MLPs, the stand-in as it is
fran                             1786.3       120           ``bench/age_costs.py``, at 1024 px
fairface                         7.3          81            idem: ResNet-34, 224 px
fan_68_5                         ~0                         a tiny MLP (68 points from the 5)
wav2lip_gan_96                   7.9          138           ``bench/lip_sync_costs.py``: Wav2Lip
kim_vocal_2 (voice extractor)    not counted                once a render, over the whole track
================================ ============ ============= ======================================

The cases (FaceFusion's settings, ``realistic.EQUAL_SETTINGS``, with the processors below):

* ``real-720p-deep-swap``: ``processors=deep_swap``, the DFM model above: about 61 GFLOP a
  frame besides the detector (the identity is the model's, so there is no inswapper call); the
  realistic clip's default length (2 s, 50 frames), like the swap cases;
* ``real-720p-face-editor``: ``processors=swap,face_editor`` with ``mouth_smile=0.5`` and
  ``eye_open_ratio=0.5`` (the eye retargeter runs, on the 68 points of ``landmark.estimator``,
  fan_68_5): the swap (349 GFLOP) and LivePortrait's four calls (1309 GFLOP) a face, about
  1.66 TFLOP a frame;
* ``real-720p-age``: ``processors=swap,age_modifier`` with fran, direction 20: the swap, FairFace
  (7.3) and fran (1786), about 2.14 TFLOP a frame;
* ``real-720p-expression``: ``processors=swap,expression``: the swap and LivePortrait's feature
  extractor, motion extractor twice and generator (1321 GFLOP) a face, about 1.67 TFLOP a frame;
* ``real-720p-lip-sync``: ``processors=swap,lip_sync`` (Wav2Lip GAN on the clip's own audio, the
  voice extracted once): the swap and Wav2Lip (7.9), about 357 GFLOP a frame.

The face editor's, the age modifier's and the expression restorer's cases default to 4 frames
(0.16 s of the clip, :data:`CASES`' ``seconds``), as the x2 frame enhancer's case defaults to 2:
at 1.7 to 2.1 TFLOP a frame a CPU takes 10 s or more a frame, so the 2-s clip would take 10
minutes or more a run, and a few frames measure the ratio to the bound as well (the per-call
times are seconds, far above the per-render start-up). ``--real-seconds`` overrides it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from bench import age_costs, deep_swap_costs, lip_sync_costs, live_portrait_costs

#: the deep swapper's model: DeepFaceLab's default architecture at FaceFusion's commonest side,
#: as the shipped default model's entry name
DFM_MODEL = "iperov_elon_musk_224"
DFM_ARCHI = deep_swap_costs.Saehd("liae-ud", 224)


def _cost(count) -> tuple[float, float]:
    return round(2.0 * count.macs / 1e9, 1), round(count.params * 4 / 2**20, 1)


#: manifest entry → (GFLOP per call, weights in MiB), counted; models whose count rounds to 0
#: GFLOP (the retargeters, the stitcher, fan_68_5) keep the stand-in as it is
COSTS: dict[str, tuple[float, float]] = {
    DFM_MODEL: _cost(deep_swap_costs.saehd(DFM_ARCHI)),
    **{name: _cost(count()) for name, count in live_portrait_costs.COUNTED.items()
       if 2 * count().macs / 1e9 >= 0.05},
    "fran": _cost(age_costs.fran(1024)),
    "fairface": _cost(age_costs.fairface()),
    "wav2lip_gan_96": _cost(lip_sync_costs.wav2lip()),
}


@dataclass(frozen=True)
class FaceCase:
    settings: dict[str, str]
    #: the clip's default length in seconds (None: the realistic clip's, ``--real-seconds``)
    seconds: float | None = None
    why: str = ""


CASES: dict[str, FaceCase] = {
    "real-720p-deep-swap": FaceCase(
        {"processors": "deep_swap", "deep_swap.model": DFM_MODEL},
        why="61 GFLOP a frame: the clip's default length"),
    "real-720p-face-editor": FaceCase(
        {"processors": "swap,face_editor", "face_editor.mouth_smile": "0.5",
         "face_editor.eye_open_ratio": "0.5"}, seconds=0.16,
        why="1.66 TFLOP a frame, LivePortrait 1.3 a face: 4 frames unless --real-seconds"),
    "real-720p-expression": FaceCase(
        {"processors": "swap,expression"}, seconds=0.16,
        why="1.67 TFLOP a frame (swap 349 + LivePortrait 1.32 a face): 4 frames unless "
            "--real-seconds"),
    "real-720p-lip-sync": FaceCase(
        {"processors": "swap,lip_sync", "lip_sync.model": "wav2lip_gan_96"},
        why="357 GFLOP a frame (swap 349 + Wav2Lip 7.9, the voice extracted once a render): "
            "the clip's default length"),
    "real-720p-age": FaceCase(
        {"processors": "swap,age_modifier", "age_modifier.model": "fran",
         "age_modifier.direction": "20"}, seconds=0.16,
        why="2.14 TFLOP a frame, fran 1.8 at 1024 px: 4 frames unless --real-seconds"),
}


def key() -> str:
    """What the written set depends on beyond ``render.standins``: the costs and the writers."""
    import inspect

    return repr(COSTS) + "".join(inspect.getsource(f) for f in (add_cost, _expand_filled,
                                                                 write_face_models))


def add_cost(path: Path, gflops: float, weights_mb: float) -> None:
    """Rewrite the stand-in graph at ``path`` with ``gflops`` GFLOP of extra compute a call over
    ``weights_mb`` MiB of weights (``graph.dummy_zero``) that depend on its first input and are
    added, as an exact 0, to its first output: the same answers at the counted cost."""
    import onnx

    from render.standins.graph import Graph, dummy_zero

    model = onnx.load(str(path))
    graph = model.graph
    first, out = graph.input[0], graph.output[0]
    elem = first.type.tensor_type.elem_type
    assert elem in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16), (path, first.name)
    g = Graph("bench_cost")
    source = first.name
    if len(first.type.tensor_type.shape.dim) != 4:     # dummy_zero takes (batch, …) 4-D
        mean = g.op("ReduceMean", [source], "all_mean", keepdims=1)
        source = g.op("Reshape", [mean, g.const(np.array([1, 1, 1, 1], np.int64), "shape")],
                      "source4")
    zero = dummy_zero(g, source, elem, gflops, weights_mb)
    if zero is None:
        return
    _expand_filled(g)
    raw = f"{out.name}/before_cost"
    for node in graph.node:                          # the output's producer and any consumer
        node.output[:] = [raw if o == out.name else o for o in node.output]
        node.input[:] = [raw if i == out.name else i for i in node.input]
    kind = out.type.tensor_type.elem_type
    if kind != elem:
        zero = g.op("Cast", [zero], "zero_cast", to=kind)
    g.op("Add", [raw, zero], output=out.name)
    graph.node.extend(g.nodes)
    graph.initializer.extend(g.inits)
    onnx.checker.check_model(model)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(model.SerializeToString(deterministic=True))
    os.replace(tmp, path)


def _expand_filled(g) -> None:
    """dummy_zero's starting activation (m × 512, one value) as an Expand of that value, not an
    initializer: the file then holds the counted weights (a 3-MiB feature extractor's chain
    starts from 80 MB of it), and ONNX Runtime folds it back to the same constant."""
    from onnx import helper, numpy_helper

    for init in [i for i in g.inits if "/dummy_a0_" in i.name]:
        a = numpy_helper.to_array(init)
        value = g.const(a.reshape(-1)[:1].reshape(()), "a0_value")
        shape = g.const(np.array(a.shape, np.int64), "a0_shape")
        g.inits.remove(init)
        g.nodes.insert(0, helper.make_node("Expand", [value, shape], [init.name],
                                           name=g.name("Expand")))


def write_face_models(d: Path) -> dict[str, dict[str, Any]]:
    """The face processors' stand-ins in models folder ``d`` (its ``manifest.yaml`` already
    written): the DFM model, LivePortrait's six files, fan_68_5, fran, FairFace and StyleGANEX
    (the last as it is: no case runs it), each at its :data:`COSTS`; returns the entries added."""
    import yaml

    from render.files import sha256_file
    from render.standins import quality
    from render.standins.age_modifiers import write_age_modifiers
    from render.standins.deep_swap import entry as dfm_entry, make_dfm
    from render.standins.face_editor import write_live_portrait
    from render.standins.lip_sync import write_lip_sync_models

    gflops, weights = COSTS[DFM_MODEL]
    make_dfm(d / f"{DFM_MODEL}.dfm", side=DFM_ARCHI.resolution, mode="tint", gflops=gflops,
             weights_mb=weights)
    entries = {DFM_MODEL: dfm_entry(d / f"{DFM_MODEL}.dfm", DFM_ARCHI.resolution)}
    entries.update(write_live_portrait(d))
    quality.make_fan_68_5(d / "fan_68_5.onnx")
    entries["fan_68_5"] = {"file": "fan_68_5.onnx", "licence": "test", "commercial_use": True,
                           "contract": "landmarker-fan-68-5", "template": None, "input_size": 5}
    manifest = d / "manifest.yaml"
    doc = yaml.safe_load(manifest.read_text())
    doc["models"].update(entries)
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False))
    entries.update(write_age_modifiers(d))           # adds its entries to the manifest itself
    entries.update(write_lip_sync_models(d, ("wav2lip_gan_96", "kim_vocal_2")))   # likewise
    doc = yaml.safe_load(manifest.read_text())
    for name, (gflops, weights) in COSTS.items():
        if name != DFM_MODEL:
            add_cost(d / doc["models"][name]["file"], gflops, weights)
    for name in entries:                             # the files as written, costs included
        e = doc["models"][name]
        e["sha256"] = sha256_file(d / e["file"])
        e["size"] = (d / e["file"]).stat().st_size
        entries[name] = e
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False))
    return entries


# -- a face step's call alone -------------------------------------------------------------------
def face_call(proc, source, frame: np.ndarray, face, *, identity: Callable[[], np.ndarray],
              landmarks: np.ndarray | None, clip: Path, number: int) -> Callable[[], np.ndarray]:
    """One call of face step ``proc`` on ``face`` of ``frame`` with what the face stage hands it
    (``render.face_stage``): the crop, then the face's raw embedding (``identity()``), its 68
    ``landmarks`` (frame pixels), its frame's ``number`` in ``clip`` and its crop as decoded,
    each where the step asks for it."""
    from render.faces import align

    m = align.estimate(face.kps, proc.template, proc.size)
    crop = align.warp(frame, m, proc.size)[None]
    extras: list[np.ndarray] = []
    if getattr(proc, "needs_target_identity", False):
        extras.append(np.asarray(identity(), np.float32).reshape(1, -1))
    if getattr(proc, "needs_landmarks", False):
        assert landmarks is not None, f"{proc.name} needs the 68 landmarks: no landmark step"
        points = align.transform_points(landmarks, m) if proc.landmarks_in_crop else landmarks
        extras.append(np.asarray(points, np.float32)[None])
    if getattr(proc, "needs_frame_numbers", False):
        extras.append(np.array([number], np.int64))
        run = proc.bind_timeline(source, timeline(clip))
    else:
        run = proc.bind(source)
    if getattr(proc, "needs_original", False):
        extras.append(crop)
    return lambda: run(crop, *extras)


def timeline(clip: Path):
    """The whole clip as a render's :class:`Timeline` (a lip syncer's audio slices)."""
    from render.files import sha256_file
    from render.media.probe import probe
    from render.processors.base import Timeline

    info = probe(clip)
    return Timeline(target=str(clip), sha256=sha256_file(clip), fps=info.fps, first=0,
                    frames=int(info.frame_count), audio_start=0.0 if info.audio else None)
