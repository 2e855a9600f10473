"""What a deep-swapper (DFM) model costs per call, counted layer by layer from DeepFaceLab's
SAEHD as its ``export_dfm`` builds the graph (iperov/DeepFaceLab ``models/Model_SAEHD/Model.py``,
``core/leras/archis/DeepFakeArchi.py``), the method of ``bench/model_costs.py``.

What one call runs (batch 1, ``in_face:0`` of side R):

* the encoder: four 5 × 5 stride-2 convolutions of e, 2e, 4e, 8e channels (R/2 … R/16), the
  result flattened (``-u``: pixel-normalised, no weights);
* the inter(s): a dense layer to ``ae_dims``, a dense layer to (R/32)² · C (``-d``; R/16
  without it), one upscale (a 3 × 3 conv to 4C, depth-to-space). ``df``: one inter, C = ae_dims;
  ``liae``: inter_AB and inter_B, C = 2·ae_dims each, their codes concatenated;
* the decoder's face branch once: three upscales (8d, 4d, 2d channels) each followed by a
  residual block of two 3 × 3 convs, then the 1 × 1 output conv (``-d``: plus three 3 × 3
  output convs, the four outputs depth-to-space to R);
* the decoder's mask branch twice (the swapped face's mask and the target's): three upscales
  (8m, 4m, 2m; ``-d``: a fourth, m) and a 1 × 1 conv to one channel. ``df`` runs decoder_src's
  and decoder_dst's (both sets of weights in the file); ``liae`` runs its one decoder's twice
  (one set).

MACs count convolutions and dense layers; activations, pixel norm and depth-to-space are free.
The dims of FaceFusion's 157 DFM files are not published (every model was trained with its
own ``archi``, ``ae_dims``, ``e_dims``, ``d_dims``, ``d_mask_dims`` and resolution), and no
parameter count is published for SAEHD, so :func:`saehd` counts DeepFaceLab's defaults
(``liae-ud``, ae 256, e 64, d 64, mask 22) at a chosen side: a representative model, not a given
file. Once a file is fetched, ``python -m bench.deep_swap_costs FILE.dfm`` prints the weights it
holds beside the counts (float32: 4 bytes each).
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.counting import Count


@dataclass(frozen=True)
class Saehd:
    """An SAEHD model's architecture: ``archi`` (``df`` or ``liae``, options after a dash) and
    its dims, DeepFaceLab's defaults."""

    archi: str = "liae-ud"
    resolution: int = 224
    ae_dims: int = 256
    e_dims: int = 64
    d_dims: int = 64
    d_mask_dims: int = 22

    @property
    def kind(self) -> str:
        return self.archi.split("-")[0]

    @property
    def opts(self) -> str:
        return self.archi.partition("-")[2]


def _upscale(c: Count, cin: int, cout: int, side: int) -> None:
    """DeepFakeArchi's Upscale: a 3 × 3 conv to 4·cout at ``side``, then depth-to-space."""
    c.conv(cin, cout * 4, 3, side)


def _mask_branch(c: Count, m: Saehd, cin: int, side: int) -> None:
    dm = m.d_mask_dims
    for k, (a, b) in enumerate(((cin, dm * 8), (dm * 8, dm * 4), (dm * 4, dm * 2))):
        _upscale(c, a, b, side << k)
    last = dm * 2
    if "d" in m.opts:
        _upscale(c, dm * 2, dm, side << 3)
        last = dm
    c.conv(last, 1, 1, m.resolution)


def saehd(model: Saehd = Saehd()) -> Count:
    """One call of the exported graph."""
    assert buildable(model), model
    m, c = model, Count()
    side, cin = m.resolution, 3
    for k in range(4):                                       # the encoder
        side //= 2
        cout = m.e_dims * min(2 ** k, 8)
        c.conv(cin, cout, 5, side)
        cin = cout
    flat = cin * side * side
    low = m.resolution // (32 if "d" in m.opts else 16)
    code = m.ae_dims * (2 if m.kind == "liae" else 1)      # each inter's channels
    for _ in range(2 if m.kind == "liae" else 1):            # the inter(s)
        c.fc(flat, m.ae_dims)
        c.fc(m.ae_dims, low * low * code)
        _upscale(c, code, code, low)
    z, zc = 2 * low, code * (2 if m.kind == "liae" else 1)
    d = m.d_dims
    for k, (a, b) in enumerate(((zc, d * 8), (d * 8, d * 4), (d * 4, d * 2))):   # face branch
        _upscale(c, a, b, z << k)
        c.conv(b, b, 3, z << (k + 1))
        c.conv(b, b, 3, z << (k + 1))
    c.conv(d * 2, 3, 1, z << 3)
    if "d" in m.opts:
        for _ in range(3):
            c.conv(d * 2, 3, 3, z << 3)
    _mask_branch(c, m, zc, z)
    second = Count()                                          # the other mask
    _mask_branch(second, m, zc, z)
    c.macs += second.macs
    if m.kind == "df":                                        # decoder_dst's own weights
        c.params += second.params
    return c


def buildable(m: Saehd) -> bool:
    """An architecture DeepFaceLab can build: df or liae, options of u and d, a side its
    downscales and the inter's code divide."""
    return m.kind in ("df", "liae") and set(m.opts) <= {"u", "d"} and \
        m.resolution % (32 if "d" in m.opts else 16) == 0


#: the rows the table prints: DeepFaceLab's default architecture and df-ud, at the sides of
#: FaceFusion's files (224 the most common, 320 the next)
COUNTED = {f"{a} {r}": Saehd(a, r) for a in ("liae-ud", "df-ud") for r in (224, 320)}


def file_params(path: str) -> int:
    """The weights a graph file holds (its float initializers)."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    total = 0
    for t in graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        total += n if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16) else 0
    return total


def table() -> str:
    rows = ["SAEHD (DeepFaceLab defaults)  GMAC/call  GFLOP/call  M params  float32 file"]
    for name, m in COUNTED.items():
        c = saehd(m)
        rows.append(f"{name:28s}  {c.macs / 1e9:9.2f}  {2 * c.macs / 1e9:10.1f}  "
                    f"{c.params / 1e6:8.1f}  {c.params * 4 / 2**20:8.0f} MiB")
    return "\n".join(rows)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.deep_swap_costs",
                                     description="print a DFM model's counted cost per call "
                                                 "(DeepFaceLab's SAEHD at its default dims)")
    parser.add_argument("files", nargs="*", help="fetched .dfm files: the weights each holds")
    args = parser.parse_args()
    print(table())
    for f in args.files:
        print(f"{f}: {file_params(f) / 1e6:.1f} M weights")
