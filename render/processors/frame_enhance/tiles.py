"""The frame enhancer's tiles: a frame cut into square tiles that overlap, each tile run through
the model, and the results cross-faded into one frame ``scale`` times larger.

FaceFusion (``shared/docs/facefusion-processors.md`` §8) keeps the centre of each tile and butts
the centres together, and pads the frame with black: wherever two tiles' results differ a seam
shows along a straight line, and the frame's edges are enhanced next to black. Here:

- a tile is ``tile`` px square: ``context`` px along each side that the model sees and whose
  result is discarded (as FaceFusion discards it), around a *core* of ``tile − 2·context`` px
  whose result is kept;
- neighbouring cores overlap by ``overlap`` px, and over the overlap the two results are
  cross-faded by smoothstep ramps (3t² − 2t³) that sum to 1. The weights are separable (a tile's weight
  is its row's ramp times its column's), so where four cores meet the four weights still sum
  to 1. A difference between two tiles' results is spread over the overlap instead of stepping
  at one line: a step of D levels between two tiles becomes at most 1.5·D/R levels between
  neighbouring output pixels, R being the ramp's length in output pixels;
- the frame is padded by reflection (its own pixels mirrored at its edge), ``pad`` px more than
  the context, so the frame's edge is not a core's edge either; what lands outside the frame
  is discarded.

Deterministic and pure (NumPy): the same frame, model and tiling give the same bytes whatever
number of tiles goes into one model call. The tiles are merged one row of tiles at a time, so
besides the output only one band of float rows is held.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

#: tiles (N, T, T, C) uint8 → results (N, T·s, T·s, C) float32, the same channels in the same order
TilesFn = Callable[[np.ndarray], np.ndarray]
#: float rows of the result (R, W·s, C) → the output's rows (any dtype; it may change the float
#: rows in place): the enhancer's ·255 → clip → round → uint8
FinishFn = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Tiling:
    """How a frame is cut: the tile's edge (context included), the model's scale, the context
    discarded per side, the overlap of neighbouring cores and the reflected pad around the
    frame (all in input pixels)."""

    tile: int
    scale: int
    context: int = 0
    overlap: int = 0
    pad: int = 0

    @property
    def core(self) -> int:
        """The part of a tile whose result is kept."""
        return self.tile - 2 * self.context

    @property
    def stride(self) -> int:
        """From one core to the next."""
        return self.core - self.overlap

    def problem(self) -> str | None:
        """Why these numbers cannot tile a frame; None when they can."""
        if self.scale < 1:
            return f"scale {self.scale} is not a positive whole number"
        if min(self.context, self.overlap, self.pad) < 0:
            return "context, overlap and pad cannot be negative"
        if self.stride < 1:
            return (f"a tile of {self.tile} px keeps {self.core} px after its context "
                    f"({self.context} px a side), which leaves no room past an overlap of "
                    f"{self.overlap} px: the tile must be at least "
                    f"{2 * self.context + self.overlap + 1} px")
        return None

    def count(self, length: int) -> int:
        """Tiles along an axis of ``length`` frame pixels."""
        span = length + 2 * self.pad
        return 1 if span <= self.core else -(-(span - self.core) // self.stride) + 1

    def weights(self, n: int) -> list[np.ndarray]:
        """Each of ``n`` tiles' weights along an axis, over its core's output pixels: 1 where no
        other core overlaps it, a smoothstep ramp across each overlap (its length the overlap,
        or the stride where that is shorter, so no point has more than two ramps), 0 past the
        ramp into its neighbour's core. Neighbours' ramps sum to 1 at every pixel."""
        s = self.scale
        length, overlap = self.core * s, self.overlap * s
        ramp = min(self.overlap, self.stride) * s
        lead = (overlap - ramp) // 2              # the ramp sits in the middle of the overlap
        t = (np.arange(ramp, dtype=np.float64) + 0.5) / max(ramp, 1)
        up = t * t * (3.0 - 2.0 * t)       # smoothstep: exact IEEE arithmetic on every CPU
        down = 1.0 - up
        out = []
        for i in range(n):
            w = np.ones(length, np.float64)
            if i > 0:
                w[:lead] = 0.0
                w[lead:lead + ramp] = up
            if i < n - 1:
                start = self.stride * s + lead
                w[start:start + ramp] = down
                w[start + ramp:] = 0.0
            out.append(w.astype(np.float32))
        return out


def _padded(frame: np.ndarray, tiling: Tiling, ny: int, nx: int) -> np.ndarray:
    """``frame`` mirrored at its edges to cover every tile of an ``ny`` × ``nx`` grid."""
    h, w = frame.shape[:2]
    before = tiling.pad + tiling.context
    need = [(n - 1) * tiling.stride + tiling.tile for n in (ny, nx)]
    widths = [(before, need[0] - h - before), (before, need[1] - w - before), (0, 0)]
    mode = "reflect" if min(h, w) > 1 else "edge"     # a 1-px line has nothing to mirror
    return np.pad(frame, widths, mode=mode)


def _tiles(padded: np.ndarray, tiling: Tiling, ny: int, nx: int) -> Iterator[np.ndarray]:
    s, t = tiling.stride, tiling.tile
    for r in range(ny):
        for c in range(nx):
            yield padded[r * s:r * s + t, c * s:c * s + t]


def _results(tiles: Iterator[np.ndarray], fn: TilesFn, per_call: int, expect: tuple[int, ...]
             ) -> Iterator[np.ndarray]:
    """``fn`` over ``tiles`` ``per_call`` at a time; each result in the tiles' order."""
    batch: list[np.ndarray] = []

    def call() -> np.ndarray:
        out = fn(np.stack(batch))
        if tuple(out.shape) != (len(batch), *expect):
            raise ValueError(f"tiles of {batch[0].shape} gave results of {tuple(out.shape)[1:]}, "
                             f"not {expect}")
        batch.clear()
        return out

    for tile in tiles:
        batch.append(tile)
        if len(batch) == per_call:
            yield from call()
    if batch:
        yield from call()


def enhance(frame: np.ndarray, fn: TilesFn, tiling: Tiling, *, per_call: int = 1,
            finish: FinishFn | None = None) -> np.ndarray:
    """``frame`` (H, W, C) uint8 through ``fn`` in tiles, cross-faded: (H·s, W·s, C) of what
    ``finish`` makes of the float rows (float32 without it)."""
    why = tiling.problem()
    assert why is None, why
    h, w, channels = frame.shape
    s, core, stride = tiling.scale, tiling.core, tiling.stride
    ny, nx = tiling.count(h), tiling.count(w)
    wy, wx = tiling.weights(ny), tiling.weights(nx)
    width = ((nx - 1) * stride + core) * s            # the grid's cores, pad included
    crop = slice(tiling.pad * s, (tiling.pad + w) * s)
    top, end = tiling.pad * s, (tiling.pad + h) * s   # the frame's rows in the grid's
    cut = slice(tiling.context * s, (tiling.context + core) * s)
    results = _results(_tiles(_padded(frame, tiling, ny, nx), tiling, ny, nx), fn,
                       max(1, per_call), (tiling.tile * s, tiling.tile * s, channels))
    finish = finish or (lambda rows: rows)
    out: np.ndarray | None = None
    carry = np.zeros((0, width, channels), np.float32)
    for r in range(ny):
        band = np.zeros((core * s, width, channels), np.float32)
        band[:len(carry)] = carry
        for c in range(nx):
            kept = np.asarray(next(results), np.float32)[cut, cut]
            x = c * stride * s
            band[:, x:x + core * s] += kept * (wy[r][:, None, None] * wx[c][None, :, None])
        done = core * s if r == ny - 1 else stride * s    # rows no later tile reaches
        first = r * stride * s                            # the band's first row in the grid
        a, b = max(first, top), min(first + done, end)
        if a < b:
            rows = finish(band[a - first:b - first, crop])
            if out is None:
                out = np.empty((h * s, w * s, channels), rows.dtype)
            out[a - top:b - top] = rows
        carry = band[done:]
    assert out is not None
    return out
