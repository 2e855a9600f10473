"""5-point similarity warps onto each model's template, and their inverses.

The fit is the least-squares similarity over all five points (rotation, uniform scale,
translation), the alignment insightface trains its models with (Umeyama's) and the one
FaceFusion's ``estimateAffinePartial2D(RANSAC, threshold 100)`` settles on when every point is
an inlier. A robust fit (LMEDS) drops points of a face that does not fit the template closely,
which real faces never do: the crop then jumps from frame to frame.
"""
from __future__ import annotations

import cv2
import numpy as np

#: enters the job key (``versions.keyed``): raise it whenever the fit, the crop or the paste back
#: changes an output's bytes, so work folders, shards and reports made before are never mixed in
VERSION = "2"

# (x, y) as fractions of the crop side; see docs: production model contracts.
TEMPLATES: dict[str, np.ndarray] = {
    "arcface_112_v1": np.array([[0.35473214, 0.45658929], [0.64526786, 0.45658929],
                                [0.50000000, 0.61154464], [0.37913393, 0.77687500],
                                [0.62086607, 0.77687500]], dtype=np.float32),
    "arcface_112_v2": np.array([[0.34191607, 0.46157411], [0.65653393, 0.45983393],
                                [0.50022500, 0.64050536], [0.37097589, 0.82469196],
                                [0.63151696, 0.82325089]], dtype=np.float32),
    "arcface_128": np.array([[0.36167656, 0.40387734], [0.63696719, 0.40235469],
                             [0.50019687, 0.56044219], [0.38710391, 0.72160547],
                             [0.61507734, 0.72034453]], dtype=np.float32),
    # DeepFaceLab's whole face (FaceFusion's deep_swapper crops DFM models' input with it)
    "dfl_whole_face": np.array([[0.35342266, 0.39285716], [0.62797622, 0.39285716],
                                [0.48660713, 0.54017860], [0.38839287, 0.68750011],
                                [0.59821427, 0.68750011]], dtype=np.float32),
    "ffhq_512": np.array([[0.37691676, 0.46864664], [0.62285697, 0.46912813],
                          [0.50123859, 0.61331904], [0.39308822, 0.72541100],
                          [0.61150205, 0.72490465]], dtype=np.float32),
    # StyleGANEX's face with its surroundings (FaceFusion's age modifier): ffhq_512 shrunk 0.625
    # times about its nose tip
    "styleganex_384": np.array([[0.42353745, 0.52289879], [0.57725008, 0.52319972],
                                [0.50123859, 0.61331904], [0.43364461, 0.68337652],
                                [0.57015325, 0.68306005]], dtype=np.float32),
}
#: FaceFusion's age modifier fits the five points scaled 0.875 times about the nose tip to
#: styleganex_384; scaling the template 1 / 0.875 times about its own nose tip instead gives the
#: same crop but for a shift of a seventh of the nose tip's fit residual: the crop age_modifier's
#: styleganex is given and pasted back by
TEMPLATES["styleganex_384_extended"] = (
    TEMPLATES["styleganex_384"][2] + (TEMPLATES["styleganex_384"] - TEMPLATES["styleganex_384"][2])
    / np.float32(0.875)).astype(np.float32)
#: FaceFusion's face editor fits the five points scaled 1.5 times about the nose tip to ffhq_512;
#: the template's points pulled toward its own nose tip by 1 / 1.5 give the same crop but for a
#: shift of a third of the nose tip's fit residual (tests/test_face_editor.py)
TEMPLATES["ffhq_512_x1_5"] = (
    TEMPLATES["ffhq_512"][2] + (TEMPLATES["ffhq_512"] - TEMPLATES["ffhq_512"][2])
    / np.float32(1.5)).astype(np.float32)


def template_points(template: str, size: int) -> np.ndarray:
    try:
        return TEMPLATES[template] * size
    except KeyError:
        raise ValueError(f"unknown alignment template {template!r}; known: {', '.join(TEMPLATES)}") \
            from None


def estimate(kps: np.ndarray, template: str, size: int) -> np.ndarray:
    """2×3 similarity matrix mapping frame points onto the template scaled to ``size``: the least
    squares fit over all five points, in closed form (float64, rounded to float32 once)."""
    return similarity(kps, template_points(template, size)).astype(np.float32)


def similarity(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The 2×3 ``[[a, -b, tx], [b, a, ty]]`` minimising the squared distances of the mapped
    ``src`` points to ``dst``; points that all coincide give a translation."""
    p = np.asarray(src, np.float64).reshape(-1, 2)
    q = np.asarray(dst, np.float64).reshape(-1, 2)
    ps, qs = p.mean(axis=0), q.mean(axis=0)
    pc, qc = p - ps, q - qs
    norm = float(np.sum(pc * pc))
    if norm <= 1e-12:
        a, b = 1.0, 0.0
    else:
        a = float(np.sum(pc * qc)) / norm
        b = float(np.sum(pc[:, 0] * qc[:, 1] - pc[:, 1] * qc[:, 0])) / norm
    rot = np.array([[a, -b], [b, a]])
    return np.hstack([rot, (qs - rot @ ps)[:, None]])


def warp(frame: np.ndarray, matrix: np.ndarray, size: int) -> np.ndarray:
    """The ``size``×``size`` aligned crop."""
    return cv2.warpAffine(frame, matrix, (size, size), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_REPLICATE)


def invert(matrix: np.ndarray) -> np.ndarray:
    return cv2.invertAffineTransform(matrix).astype(np.float32)


def transform_points(points: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    pts = np.asarray(points, dtype=np.float32).reshape(-1, 2)
    return pts @ matrix[:, :2].T + matrix[:, 2]
