"""The stability figure of ``make bench`` (issue 30): how still a swapped face holds, measured
against the truth.

A generated clip: the astronaut's head (a real photographed face) moved over the background by a
known similarity transform per frame — a steady move, a sudden stop, a sudden start, a fast turn
and a stop — with a little sensor noise in every frame, and hidden in a few frames (misses of 1, 2 and 3 frames). The real YuNet detector
(``shared/models/face_detection_yunet.onnx``; skipped without it) runs in the renderer's own face
stage with the default profile's detector settings, once with ``stabilize.enabled`` and once
without, and the figures come from the stage's face debugger (``debug.faces``):

* **RMS error**: of the key points used against the true ones, in % of the face width;
* **jitter**: RMS of the frame-to-frame second difference of (used − true), in % of the face width
  (a face moving on a smooth path has none: what is left is tremble);
* **lag**: after each sudden stop or start, the time shift (frames) that best lays the used
  points' path over the true one in the 15 frames after it;
* **unswapped**: frames inside the track where no face was swapped (the hidden frames included);
* **cost**: the tracks, the window and the filter per frame, timed by replaying the detections;
* **the crop**: what the swapper is shown. Each frame's crop transform (recorded by the debugger:
  profile low's swapper, arcface_128) puts the crop's four corners in the frame; carried back
  through the clip's true motion into the head's own coordinates they would stand still if the
  crop followed the face exactly. Their spread (RMS about their mean), jitter (RMS second
  difference) and worst second difference (the largest jump of one corner against its
  neighbours' frames, a pop), in % of the face width: over every frame with a crop, and between
  the clip's events (``EVENT_FRAMES``), where the targets apply. At a sudden stop or start the
  true velocity steps by 3-4 % of the face width in one frame, and a crop that follows smoothly
  has that step as its error's second difference, whatever the fit; through the turn this YuNet
  hardly sees the rotation, so no fit or filter can follow it (a detector's limit, shown in the
  whole-clip figures; bench/RESULTS.md).

The true key points: the mean of the detections mapped back into the head's own coordinates
(the detector's constant bias is not an error of the stabiliser), carried by each frame's
transform. The stage runs with profile low's settings.
``python -m bench.stability [--png docs/stability.png]``.
"""
from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cv2
import numpy as np

from bench.realistic import yunet_path

FPS = 25
FRAMES = 160
WIDTH, HEIGHT = 1280, 720
NOISE = 3.0                                 # grey levels of sensor noise (RMS) in every frame
HIDDEN = (20, 30, 31, 85, 86, 87)           # misses of 1, 2 and 3 frames, while moving
EVENTS = {"stop": 40, "start": 65, "stop after turn": 115}
PROFILE = "low"
CROP = ("arcface_128", 128)                 # profile low's swapper (inswapper_128): its crop
#: frames within 3 (the centred line's half window) of the stop and the start, and the turn
EVENT_FRAMES = frozenset([*range(37, 44), *range(62, 69), *range(102, 119)])


def path_at(i: int) -> tuple[float, float, float]:
    """(x, y, degrees) of the head's centre in frame ``i``: right at 3 px/frame to frame 40, still
    to 65, then left and down at 4 px/frame, turning 25° in frames 105-115, still from 115."""
    x, y = 420.0 + 3.0 * min(i, 40), 330.0
    if i > 65:
        k = min(i, 115) - 65
        x, y = x - 3.2 * k, y + 2.4 * k
    angle = 0.0 if i <= 105 else 2.5 * (min(i, 115) - 105)
    return x, y, angle


def transform_at(i: int, head_hw: tuple[int, int]) -> np.ndarray:
    """2 x 3: head pixels → frame pixels in frame ``i``."""
    x, y, angle = path_at(i)
    h, w = head_hw
    m = cv2.getRotationMatrix2D((w / 2, h / 2), angle, 1.0)
    m[:, 2] += (x - w / 2, y - h / 2)
    return m


def head_image() -> np.ndarray:
    from render.standins.media import photo_face

    head = photo_face()[0:300, 90:370]
    return cv2.resize(head, (336, 360), interpolation=cv2.INTER_AREA)


def make_frames() -> tuple[list[np.ndarray], np.ndarray]:
    """The clip's frames (the frame number in pixel (0, 0) is not needed: frames are in order)."""
    from render.standins.media import _gradient, background

    head = head_image()
    ones = np.full(head.shape[:2], 255, np.uint8)
    base = _gradient(WIDTH, HEIGHT)
    rng = np.random.default_rng(30)       # sensor noise: a still face is not a still image
    frames = []
    for i in range(FRAMES):
        frame = background(WIDTH, HEIGHT, i, _base=base)
        if i not in HIDDEN:
            m = transform_at(i, head.shape[:2])
            warped = cv2.warpAffine(head, m, (WIDTH, HEIGHT), flags=cv2.INTER_LINEAR)
            alpha = cv2.warpAffine(ones, m, (WIDTH, HEIGHT), flags=cv2.INTER_LINEAR)[..., None] / 255.0
            frame = frame * (1 - alpha) + warped * alpha
        noise = rng.normal(0.0, NOISE, frame.shape)
        frames.append(np.clip(frame + noise + 0.5, 0, 255).astype(np.uint8))
    return frames, np.array(head.shape[:2])


def run_stage(frames: list[np.ndarray], yunet: Path, enabled: bool, out: Path) -> dict[int, dict]:
    """The default profile's face finding over ``frames``; returns the debug lines by frame."""
    import onnxruntime as ort

    from render.config import load_config
    from render.face_debug import FaceDebug
    from render.face_stage import ChainStep, FaceStage, Tracking
    from render.face_window import face_filter
    from render.faces.detect import Detector
    from render.faces.select import select_faces
    from render.faces.tracks import TrackLinker, TrackSelection
    from render.pipeline import StageTimes
    from render.sessions import LazySession

    cfg = load_config({"profile": PROFILE, "stabilize.enabled": str(enabled).lower()}, env={})
    so = ort.SessionOptions()
    so.log_severity_level = 3
    session = ort.InferenceSession(str(yunet), so, providers=["CPUExecutionProvider"])
    det = Detector(LazySession(lambda: session), "detector-yunet", size=cfg.detect.size,
                   score=cfg.detect.score, nms_iou=cfg.detect.nms)
    s = cfg.stabilize
    tracks = Tracking(TrackLinker(max_missed=s.fill), TrackSelection("one"), s.fill,
                      face_filter(s.min_cutoff, s.beta, s.d_cutoff), s.window) \
        if s.enabled else None
    # a chain of one step with the swapper's crop, so the debugger records its transform; the
    # chain itself never runs (``prepare``'s work is not called)
    crop = ChainStep(SimpleNamespace(template=CROP[0], size=CROP[1]), run=None, masks=())
    stage = FaceStage(detector=det, select=lambda frame, faces: select_faces(faces, "one"),
                      chain=[crop], times=StageTimes(), tracks=tracks,
                      debug=FaceDebug(out, overlay=False))
    stage.segment(start=0, preroll=0, frames=None)
    for i in range(0, len(frames), 8):
        stage.prepare([f.copy() for f in frames[i:i + 8]])
    stage.finish()
    return {x["frame"]: x for x in map(json.loads, out.read_text().splitlines())}


def replay_cost(lines: dict[int, dict], frames: list[np.ndarray], repeat: int = 20) -> float:
    """Microseconds per frame of linking, the window and the filter, over the detections."""
    from render.config import load_config
    from render.face_window import DETECTED, FaceWindow, TrackFace, face_filter
    from render.faces.tracks import TrackLinker, TrackSelection
    from render.faces.types import Face

    s = load_config({"profile": PROFILE}, env={}).stabilize
    found = [[Face(np.array(f["box"], np.float32), np.array(f["raw"], np.float32), f["score"])
              for f in lines[i]["faces"] if f["how"] == "detected"] for i in range(len(frames))]
    best = math.inf
    for _ in range(repeat):
        linker, select = TrackLinker(max_missed=s.fill), TrackSelection("one")
        window = FaceWindow(fill=s.fill, make_filter=face_filter(s.min_cutoff, s.beta, s.d_cutoff),
                            window=s.window)
        t0 = time.perf_counter()
        for frame, faces in zip(frames, found):
            ids = linker.link(faces)
            chosen = select(frame, faces, ids, linker.alive())
            window.push(frame, [TrackFace(t, f, DETECTED, t in chosen) for t, f in zip(ids, faces)])
        window.finish()
        best = min(best, time.perf_counter() - t0)
    return best / len(frames) * 1e6


def points(lines: dict[int, dict], field: str) -> dict[int, np.ndarray]:
    """Frame → the key points of the selected face (``raw`` or ``used``)."""
    out = {}
    for i, line in lines.items():
        chosen = [f for f in line["faces"] if f["selected"]]
        if chosen and not (field == "raw" and chosen[0]["how"] == "filled"):
            out[i] = np.array(chosen[0][field], np.float64)
    return out


def truth_points(raw: dict[int, np.ndarray], head_hw: np.ndarray) -> dict[int, np.ndarray]:
    """The true key points of every frame: the mean detection in head coordinates, carried by
    each frame's transform."""
    back = [cv2.transform(p[None], cv2.invertAffineTransform(transform_at(i, head_hw)))[0]
            for i, p in raw.items()]
    mean = np.mean(back, axis=0)
    return {i: cv2.transform(mean[None], transform_at(i, head_hw))[0] for i in range(FRAMES)}


def lag(used: dict[int, np.ndarray], truth: dict[int, np.ndarray], event: int) -> float:
    """Frames by which ``used`` trails ``truth`` around ``event``: the time shift (0.05 steps)
    that best lays the path of the points' centre over the true one from 5 frames before to 10
    after, up to a constant offset (the detector's bias at a pose is not a lag)."""
    frames = [i for i in range(event - 5, event + 11) if i in used]
    centre = {i: truth[i].mean(axis=0) for i in truth}

    def shifted(t: float) -> np.ndarray:
        a = min(max(int(math.floor(t)), 0), FRAMES - 1)
        b = min(a + 1, FRAMES - 1)
        return centre[a] + (t - a) * (centre[b] - centre[a])

    def cost(d: float) -> float:
        r = np.array([used[i].mean(axis=0) - shifted(i - d) for i in frames])
        return float(np.sum((r - r.mean(axis=0)) ** 2))

    shifts = np.arange(-3, 6, 0.05)
    return float(shifts[int(np.argmin([cost(d) for d in shifts]))])


def figures(pts: dict[int, np.ndarray], truth: dict[int, np.ndarray], width: float,
            visible: set[int]) -> dict[str, Any]:
    frames = sorted(i for i in pts if i in visible)
    err = {i: (pts[i] - truth[i]) / width * 100 for i in frames}
    rms = math.sqrt(np.mean([np.mean(e ** 2) for e in err.values()]))
    second = [err[i + 1] - 2 * err[i] + err[i - 1] for i in frames if i - 1 in err and i + 1 in err]
    jitter = math.sqrt(np.mean([np.mean(s ** 2) for s in second]))
    return {"rms_pct": round(rms, 3), "jitter_pct": round(jitter, 3),
            "lag_frames": {k: round(lag(pts, truth, e), 2) for k, e in EVENTS.items()}}


def crop_corners(lines: dict[int, dict], head_hw: np.ndarray, width: float
                 ) -> dict[int, np.ndarray]:
    """Frame → the crop's corners carried back through the true motion, in % of the face
    width (see the module's docstring)."""
    side = CROP[1]
    square = np.array([[0, 0], [side, 0], [0, side], [side, side]], np.float64)
    corners = {}
    for i, line in lines.items():
        chosen = [f for f in line["faces"] if f["selected"] and "transform" in f]
        if chosen:
            to_frame = cv2.invertAffineTransform(np.array(chosen[0]["transform"], np.float64))
            to_head = cv2.invertAffineTransform(transform_at(i, head_hw))
            corners[i] = cv2.transform(cv2.transform(square[None], to_frame), to_head)[0] \
                / width * 100
    return corners


def crop_figures(corners: dict[int, np.ndarray], frames: set[int]) -> dict[str, Any]:
    """Spread, jitter and worst second difference of ``corners`` over ``frames`` (a second
    difference counts where its middle frame is one of them)."""
    kept = sorted(i for i in corners if i in frames)
    mean = np.mean([corners[i] for i in kept], axis=0)
    spread = math.sqrt(np.mean([np.mean((corners[i] - mean) ** 2) for i in kept]))
    second = [corners[i + 1] - 2 * corners[i] + corners[i - 1]
              for i in kept if i - 1 in corners and i + 1 in corners]
    jitter = math.sqrt(np.mean([np.mean(d ** 2) for d in second]))
    worst = max(float(np.linalg.norm(d, axis=1).max()) for d in second)
    return {"frames": len(kept), "spread_pct": round(spread, 3), "jitter_pct": round(jitter, 3),
            "worst_pct": round(worst, 3)}


def plot(path: Path, raw: dict, used: dict, truth: dict, width: float) -> None:
    """Two panels: the nose tip's x path (true white, raw detection red, stabilised green), and
    each one's error in % of the face width (hidden frames shaded)."""
    w, h, pad = 1200, 640, 50
    img = np.full((h, w, 3), 24, np.uint8)
    panels = [(pad, 300), (340, h - pad)]
    sx = (w - 2 * pad) / (FRAMES - 1)
    for i in HIDDEN:
        for top, bottom in panels:
            cv2.rectangle(img, (int(pad + (i - 0.5) * sx), top), (int(pad + (i + 0.5) * sx), bottom),
                          (60, 60, 60), -1)
    xs = [truth[i][2, 0] for i in range(FRAMES)]
    lo, hi = min(xs) - 10, max(xs) + 10

    def line(panel, series, colour, value_range, thick=1):
        top, bottom = panel
        a, b = value_range
        pts = [(int(pad + i * sx), int(bottom - (v - a) / (b - a) * (bottom - top)))
               for i, v in series]
        for p, q in zip(pts, pts[1:]):
            cv2.line(img, p, q, colour, thick, cv2.LINE_AA)

    nose = lambda d: [(i, d[i][2, 0]) for i in sorted(d)]           # noqa: E731
    line(panels[0], nose(truth), (255, 255, 255), (lo, hi), 2)
    line(panels[0], nose(raw), (60, 60, 230), (lo, hi))
    line(panels[0], nose(used), (80, 220, 80), (lo, hi))
    span = 4.0
    err = lambda d: [(i, (d[i][2, 0] - truth[i][2, 0]) / width * 100) for i in sorted(d)]  # noqa: E731
    line(panels[1], [(0, 0), (FRAMES - 1, 0)], (120, 120, 120), (-span, span))
    line(panels[1], err(raw), (60, 60, 230), (-span, span))
    line(panels[1], err(used), (80, 220, 80), (-span, span), 2)
    text = [((pad, 30), "nose tip x (px) by frame: true (white), raw detection (red), "
             "stabilised (green); grey: face hidden", (230, 230, 230)),
            ((pad, 330), f"error of the nose tip x in % of the face width (+-{span:g} %)",
             (230, 230, 230))]
    for (x, y), s, c in text:
        cv2.putText(img, s, (x, y), cv2.FONT_HERSHEY_SIMPLEX, 0.55, c, 1, cv2.LINE_AA)
    for name, e in EVENTS.items():
        x = int(pad + e * sx)
        cv2.putText(img, name, (x + 3, 60), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (200, 200, 0), 1,
                    cv2.LINE_AA)
        cv2.line(img, (x, 45), (x, h - pad), (200, 200, 0), 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), img)


def measure(png: Path | None = None) -> dict[str, Any] | None:
    """Every figure, or None without the real YuNet detector."""
    yunet = yunet_path()
    if yunet is None:
        return None
    frames, head_hw = make_frames()
    with tempfile.TemporaryDirectory() as tmp:
        stab = run_stage(frames, yunet, True, Path(tmp) / "on.jsonl")
        plain = run_stage(frames, yunet, False, Path(tmp) / "off.jsonl")
    raw, used = points(stab, "raw"), points(stab, "used")
    truth = truth_points(raw, head_hw)
    width = float(np.mean([f["box"][2] - f["box"][0] for line in stab.values()
                           for f in line["faces"] if f["selected"]]))
    visible = set(range(FRAMES)) - set(HIDDEN)
    out = {"frames": FRAMES, "face_width_px": round(width, 1),
           "detected_frames": len(raw), "raw": figures(raw, truth, width, visible),
           "stabilised": figures(used, truth, width, visible),
           "unswapped": {"raw": FRAMES - len(points(plain, "used")),
                         "stabilised": FRAMES - len(used)},
           "cost_us_per_frame": round(replay_cost(stab, frames), 1),
           "crop": {}}
    between = set(range(FRAMES)) - EVENT_FRAMES
    for name, lines in (("raw", plain), ("stabilised", stab)):
        corners = crop_corners(lines, head_hw, width)
        out["crop"][name] = crop_figures(corners, set(range(FRAMES)))
        out["crop"][f"{name}, between events"] = crop_figures(corners, between)
    r, s, c = out["raw"], out["stabilised"], out["crop"]["stabilised, between events"]
    out["targets"] = {
        "jitter at most a third of raw": s["jitter_pct"] <= r["jitter_pct"] / 3,
        "RMS error no worse than raw": s["rms_pct"] <= r["rms_pct"],
        "lag at most 1 frame": all(abs(v) <= 1.0 for v in s["lag_frames"].values()),
        "0 unswapped frames (misses of 1-3)": out["unswapped"]["stabilised"] == 0,
        "crop jitter at most 0.6 % between events": c["jitter_pct"] <= 0.6,
        "crop worst second difference at most 3 % between events": c["worst_pct"] <= 3.0}
    if png is not None:
        plot(png, raw, used, truth, width)
    return out


def report(fig: dict[str, Any]) -> str:
    r, s = fig["raw"], fig["stabilised"]
    lines = [f"stability ({fig['frames']} frames, face {fig['face_width_px']:g} px wide, "
             f"profile {PROFILE}, YuNet found {fig['detected_frames']}):",
             f"  {'':12} {'RMS error %':>12} {'jitter %':>9}  lag (frames) " +
             ", ".join(EVENTS),
             f"  {'raw':12} {r['rms_pct']:12.3f} {r['jitter_pct']:9.3f}  " +
             ", ".join(f"{v:+.2f}" for v in r["lag_frames"].values()),
             f"  {'stabilised':12} {s['rms_pct']:12.3f} {s['jitter_pct']:9.3f}  " +
             ", ".join(f"{v:+.2f}" for v in s["lag_frames"].values()),
             f"  unswapped frames inside the track: raw {fig['unswapped']['raw']}, stabilised "
             f"{fig['unswapped']['stabilised']} (hidden: {len(HIDDEN)})",
             f"  stabiliser cost: {fig['cost_us_per_frame']:g} us per frame",
             f"  the swapper's crop ({CROP[0]}), its corners against the true motion, % of the "
             f"face width:",
             f"  {'':27} {'spread %':>9} {'jitter %':>9} {'worst %':>8}  frames"]
    for name, c in fig["crop"].items():
        lines.append(f"  {name:27} {c['spread_pct']:9.3f} {c['jitter_pct']:9.3f} "
                     f"{c['worst_pct']:8.3f}  {c['frames']}")
    lines += [f"  target {k}: {'met' if v else 'NOT met'}" for k, v in fig["targets"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--png", type=Path, default=None, help="draw the point paths into this PNG")
    p.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    a = p.parse_args(argv)
    fig = measure(a.png)
    if fig is None:
        print("stability: the real YuNet detector is not at shared/models; skipped")
        return 0
    print(report(fig))
    if a.json is not None:
        a.json.write_text(json.dumps(fig, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
