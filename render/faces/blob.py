"""Crops ↔ model tensors: BGR uint8 NHWC crops to RGB float NCHW inputs and back.

The channel swap and the NHWC ↔ NCHW transposition are done on uint8 data (a quarter of the
bytes of float32), and every float step runs in place on contiguous arrays; the arithmetic per
element is the plain ``x / 255`` (and its inverse ``rint(y * 255)``), so the values are exactly
those of the textbook expressions.

A uint8 input takes 256 values and a float16 output 65536 bit patterns, so those conversions are
tables computed once with the very same float32 steps and applied by one lookup per element,
faster than the arithmetic (bench/RESULTS.md).
"""
from __future__ import annotations

import functools

import cv2
import numpy as np

#: (from, to) → OpenCV's output depth, for the conversions ``cast`` hands to OpenCV
_HALF_DEPTHS = {(np.dtype(np.float32), np.dtype(np.float16)): cv2.CV_16F,
                (np.dtype(np.float16), np.dtype(np.float32)): cv2.CV_32F}


def cast(x: np.ndarray, dtype: type) -> np.ndarray:
    """``x.astype(dtype)``, with float32 ↔ float16 done by OpenCV: the same round-to-nearest-even
    values, but with the CPU's F16C instructions (NumPy converts half floats one at a time)."""
    if x.dtype == dtype:
        return x
    depth = _HALF_DEPTHS.get((x.dtype, np.dtype(dtype)))
    if depth is None or x.size == 0:
        return x.astype(dtype)
    flat = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    return cv2.add(flat, 0.0, dtype=depth).reshape(x.shape)   # x + 0.0 == x, converted


def owned_float32(out: np.ndarray) -> np.ndarray:
    """A float32 copy of a model output that the caller may change in place."""
    y = cast(np.asarray(out), np.float32)
    return y.copy() if y is out else y


def to_rgb_nchw(crops: np.ndarray) -> np.ndarray:
    """(N,H,W,3) BGR uint8 → contiguous (N,3,H,W) RGB uint8."""
    return np.ascontiguousarray(crops[..., ::-1].transpose(0, 3, 1, 2))


def to_bgr_nhwc(planes: np.ndarray) -> np.ndarray:
    """(N,3,H,W) RGB uint8 → contiguous (N,H,W,3) BGR uint8 (interleaved by ``cv2.merge``: NumPy's
    strided copy of the same takes 7 times as long)."""
    planes = np.ascontiguousarray(planes)
    out = np.empty((planes.shape[0], planes.shape[2], planes.shape[3], 3), np.uint8)
    for i, p in enumerate(planes):
        out[i] = cv2.merge((p[2], p[1], p[0]))
    return out


def _unit(x: np.ndarray) -> np.ndarray:
    """float32 ``x / 255``, in place."""
    np.divide(x, 255.0, out=x)
    return x


def _signed(x: np.ndarray) -> np.ndarray:
    """float32 ``(x / 255 - 0.5) / 0.5``, in place."""
    np.divide(x, 255.0, out=x)
    np.subtract(x, 0.5, out=x)
    np.divide(x, 0.5, out=x)
    return x


def _to_bytes(y: np.ndarray) -> np.ndarray:
    """float32 ``rint(clip(y, 0, 1) * 255)`` as uint8, ``y`` changed in place."""
    np.clip(y, 0.0, 1.0, out=y)
    np.multiply(y, 255.0, out=y)
    np.rint(y, out=y)
    return y.astype(np.uint8)


@functools.lru_cache(maxsize=None)
def _input_table(kind: str, dtype: np.dtype) -> np.ndarray:
    """The 256 values of one input conversion (``unit`` or ``signed``) of every uint8, in ``dtype``."""
    x = np.arange(256, dtype=np.float32)
    table = cast(_unit(x) if kind == "unit" else _signed(x), dtype.type)
    table.flags.writeable = False
    return table


@functools.lru_cache(maxsize=None)
def _half_output_table() -> np.ndarray:
    """:func:`_to_bytes` of every float16 bit pattern (NaNs included: the same cast decides them)."""
    y = cast(np.arange(65536, dtype=np.uint16).view(np.float16), np.float32)
    with np.errstate(invalid="ignore"):
        table = _to_bytes(y)
    table.flags.writeable = False
    return table


def _look_up(planes: np.ndarray, kind: str, dtype: type) -> np.ndarray:
    """``_input_table(kind, dtype)[planes]`` by OpenCV's LUT (NumPy's gather widens every uint8
    index to 64 bits first: 5 times as slow); a float16 table goes through as its 16-bit patterns."""
    table = _input_table(kind, np.dtype(dtype))
    planes = np.ascontiguousarray(planes)
    if planes.size == 0:
        return np.empty(planes.shape, table.dtype)
    bits = table.view(np.int16) if table.dtype == np.float16 else table
    out = cv2.LUT(planes.reshape(-1, planes.shape[-1]), bits)
    return out.view(table.dtype).reshape(planes.shape)


def unit_input(crops: np.ndarray, dtype: type) -> np.ndarray:
    """BGR uint8 crops → RGB NCHW ``x / 255`` in ``dtype`` (the 0..1 models: inswapper)."""
    return _look_up(to_rgb_nchw(crops), "unit", dtype)


def signed_input(planes: np.ndarray, dtype: type) -> np.ndarray:
    """RGB NCHW uint8 planes (:func:`to_rgb_nchw`) → ``(x / 255 - 0.5) / 0.5`` in ``dtype`` (the
    −1..1 models: GFPGAN, which also blends with the same planes)."""
    return _look_up(planes, "signed", dtype)


def unit_output(out: np.ndarray) -> np.ndarray:
    """RGB NCHW model output in 0..1 (clipped) → BGR uint8 NHWC ``rint(y * 255)``."""
    out = np.asarray(out)
    if out.dtype == np.float16:
        return to_bgr_nhwc(np.take(_half_output_table(), out.view(np.uint16)))
    return to_bgr_nhwc(_to_bytes(owned_float32(out)))
