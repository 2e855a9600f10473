"""What each face editor control does to LivePortrait's expression and head pose: FaceFusion
3.8's deltas (``processors/modules/face_editor/core.py``), in its order.

A change adds ``sign · interp(v, [−1, 1], [−amount, amount])`` (= sign · amount · v) to one
expression value ``e[point, axis]`` (axis 0 = x, 1 = y, 2 = z), computed in float64 and stored
into the float32 expression as FaceFusion's in-place ``+=`` / ``-=`` does. Most controls change
other values for v > 0 than for v ≤ 0.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..live_portrait import limit_angles, limit_expression, rotation

#: one change: (point, axis, sign, amount)
Change = tuple[int, int, int, float]
#: a control's changes for v > 0 and for v ≤ 0
Branches = tuple[tuple[Change, ...], tuple[Change, ...]]


def _same(*changes: Change) -> Branches:
    return changes, changes


#: the expression controls, in the order FaceFusion applies them (eye gaze, mouth grim, mouth
#: position, pout, purse, smile, eyebrows)
EXPRESSION: dict[str, Branches] = {
    "eye_gaze_horizontal": (((11, 0, +1, 0.015), (15, 0, +1, 0.020)),
                            ((11, 0, +1, 0.020), (15, 0, +1, 0.015))),
    "eye_gaze_vertical": _same((1, 1, +1, 0.0025), (2, 1, -1, 0.0025), (11, 1, -1, 0.010),
                               (13, 1, -1, 0.005), (15, 1, -1, 0.010), (16, 1, -1, 0.005)),
    "mouth_grim": (((17, 2, -1, 0.005), (19, 2, +1, 0.01), (20, 1, -1, 0.06), (20, 2, -1, 0.03)),
                   ((19, 1, -1, 0.05), (19, 2, -1, 0.02), (20, 2, -1, 0.03))),
    "mouth_position_horizontal": _same((19, 0, +1, 0.05), (20, 0, +1, 0.04)),
    "mouth_position_vertical": (((19, 1, -1, 0.04), (20, 1, -1, 0.02)),
                                ((19, 1, -1, 0.05), (20, 1, -1, 0.04))),
    "mouth_pout": (((19, 1, -1, 0.022), (19, 2, +1, 0.025), (20, 2, -1, 0.002)),
                   ((19, 1, +1, 0.022), (19, 2, +1, 0.025), (20, 2, -1, 0.002))),
    "mouth_purse": (((19, 1, -1, 0.04), (19, 2, -1, 0.02)),
                    ((14, 1, -1, 0.02), (17, 2, +1, 0.01), (19, 2, -1, 0.015),
                     (20, 2, -1, 0.002))),
    "mouth_smile": (((20, 1, -1, 0.015), (14, 1, -1, 0.025), (17, 1, +1, 0.01),
                     (17, 2, +1, 0.004), (3, 1, -1, 0.0045), (7, 1, -1, 0.0045)),
                    ((14, 1, -1, 0.02), (17, 1, +1, 0.003), (19, 1, +1, 0.02),
                     (19, 2, -1, 0.005), (20, 2, +1, 0.01), (3, 1, +1, 0.0045),
                     (7, 1, +1, 0.0045))),
    "eyebrow_direction": (((1, 1, +1, 0.015), (2, 1, -1, 0.020)),
                          ((1, 0, -1, 0.015), (2, 0, +1, 0.020), (1, 1, +1, 0.005),
                           (2, 1, -1, 0.005))),
}

#: head controls: (the Motion angle's index, degrees at v = −1, degrees at v = +1)
HEAD: dict[str, tuple[int, float, float]] = {
    "head_pitch": (0, 20.0, -20.0), "head_yaw": (1, 60.0, -60.0), "head_roll": (2, -15.0, 15.0)}


def edit_expression(expression: np.ndarray, values: Mapping[str, float]) -> np.ndarray:
    """(1, 21, 3) float32: ``expression`` with every control of ``values`` applied in
    FaceFusion's order, then limited to LivePortrait's range (as FaceFusion always does)."""
    e = np.array(expression, np.float32)
    for name, (positive, rest) in EXPRESSION.items():
        v = float(values[name])
        for point, axis, sign, amount in (positive if v > 0 else rest):
            delta = float(np.interp(v, [-1.0, 1.0], [-amount, amount]))
            e[0, point, axis] = np.float32(float(e[0, point, axis]) + sign * delta)
    return limit_expression(e)


def edit_rotation(angles: tuple[float, float, float], values: Mapping[str, float]) -> np.ndarray:
    """(3, 3) float32: the head rotation with the pitch, yaw and roll controls added to the
    crop's own ``angles`` (degrees), limited as FaceFusion limits them."""
    wanted = list(angles)
    for name, (index, low, high) in HEAD.items():
        wanted[index] += float(np.interp(float(values[name]), [-1.0, 1.0], [low, high]))
    return rotation(*limit_angles(angles, wanted))
