"""What LivePortrait's models cost per call (the face editor's six files, three of which the
expression restorer runs too), counted layer by layer from KwaiVGI/LivePortrait's code
(``src/config/models.yaml`` and ``src/modules/``), the method of ``bench/model_costs.py``.

The files are not pinned yet (``sha256: null`` until the first fetch), so each count is checked
against the parameter counts LivePortrait's authors publish (:data:`PUBLISHED_PARAMS`, millions:
F 0.84, M 28.12, W 45.53, G 55.37, S and R together 0.23):

* feature extractor (F): ``SameBlock2d`` 3 → 64 at 256 px, two ``DownBlock2d`` (64 → 128 → 256,
  each 3 × 3 then a 2 × 2 average pool), a 1 × 1 conv to 512 reshaped to a (32, 16, 64, 64)
  volume, six ``ResBlock3d`` (two 3 × 3 × 3 convs of 32 channels each);
* motion extractor (M): ConvNeXt-V2 tiny at 256 px (depths 3, 3, 9, 3; widths 96…768; each
  block a 7 × 7 depthwise conv, layer norm, 4× MLP with GRN), then the heads: 21 × 3 keypoints,
  scale, 66 bins each of pitch, yaw and roll, translation and 21 × 3 expression;
* generator = LivePortrait's warping module (W) and SPADE decoder (G), one graph in FaceFusion's
  export: the dense motion network (a 1 × 1 × 1 compress to 4 channels, an hourglass of five 3-D
  down and up blocks from 110 input channels, block 32, max 1024, over 16 × 64 × 64; the 7 × 7 × 7
  mask conv to 22 channels and the 7 × 7 occlusion conv), the third and fourth convs (512 → 256);
  then the SPADE decoder (3 × 3 conv 256 → 512, six SPADE resblocks of 512 at 64 px, one to 256 at
  128 px, one to 64 at 256 px, each SPADE a 128-wide shared conv and γ, β convs on the 256-channel
  warped feature, and the 3 × 3 conv to 12 channels shuffled to 3 × 512 × 512);
* stitcher (126 → 128 → 128 → 64 → 65), lip retargeter (65 → 128 → 128 → 64 → 63), eye
  retargeter (66 → 256 → 256 → 128 → 128 → 64 → 63): MLPs.

Batch norms are counted by their two affine parameters (the published counts are PyTorch's
parameters); the grid sampling, softmax, Gaussian heatmaps and norms are not MACs counted here.
``python -m bench.live_portrait_costs`` prints the table and the face editor's and the expression
restorer's cost per face.
"""
from __future__ import annotations

from bench.counting import Count

#: the parameter counts LivePortrait's authors publish, in millions (its README's table)
PUBLISHED_PARAMS = {"feature_extractor": 0.84, "motion_extractor": 28.12, "warping": 45.53,
                    "spade": 55.37, "stitching_retargeting": 0.23}


def _conv3d(c: Count, cin: int, cout: int, k: int, depth: int, side: int) -> None:
    """A k × k × k convolution whose output is depth × side × side."""
    c.macs += k ** 3 * cin * cout * depth * side * side
    c.params += k ** 3 * cin * cout + cout


def _norm(c: Count, channels: int) -> None:
    """A batch or layer norm's affine parameters."""
    c.params += 2 * channels


def feature_extractor() -> Count:
    c = Count()
    c.conv(3, 64, 3, 256)
    _norm(c, 64)
    for cin, cout, side in ((64, 128, 256), (128, 256, 128)):     # conv, then the 2 × 2 pool
        c.conv(cin, cout, 3, side)
        _norm(c, cout)
    c.conv(256, 512, 1, 64)
    for _ in range(6):
        for _ in range(2):
            _norm(c, 32)
            _conv3d(c, 32, 32, 3, 16, 64)
    return c


def motion_extractor() -> Count:
    c = Count()
    dims, depths = (96, 192, 384, 768), (3, 3, 9, 3)
    side = 64
    c.conv(3, dims[0], 4, side)                  # the stem: 4 × 4, stride 4
    _norm(c, dims[0])
    for i, (d, depth) in enumerate(zip(dims, depths)):
        if i:
            _norm(c, dims[i - 1])
            side //= 2
            c.conv(dims[i - 1], d, 2, side)
        for _ in range(depth):                   # depthwise 7 × 7, norm, MLP with GRN
            c.depthwise(d, 7, side)
            _norm(c, d)
            c.conv(d, 4 * d, 1, side)
            c.params += 2 * 4 * d                # GRN's gamma and beta
            c.conv(4 * d, d, 1, side)
    _norm(c, dims[-1])
    for out in (63, 1, 66, 66, 66, 3, 63):       # kp, scale, pitch, yaw, roll, t, exp
        c.fc(dims[-1], out)
    return c


def warping() -> Count:
    c = Count()
    depth, kp, compress = 16, 21, 4
    _conv3d(c, 32, compress, 1, depth, 64)       # compress, and its batch norm
    _norm(c, compress)
    inputs = (kp + 1) * (compress + 1)           # 110: heatmaps and deformed features
    widths = [inputs, 64, 128, 256, 512, 1024]
    for i in range(5):                           # encoder: conv, norm, pool (1, 2, 2)
        _conv3d(c, widths[i], widths[i + 1], 3, depth, 64 >> i)
        _norm(c, widths[i + 1])
    up = 1024
    for i in range(4, -1, -1):                   # decoder: upsample (1, 2, 2), conv, norm, cat
        out = 32 * 2 ** i
        _conv3d(c, up, out, 3, depth, 64 >> i)
        _norm(c, out)
        up = out + widths[i]
    _conv3d(c, up, up, 3, depth, 64)             # 142 = 32 + 110
    _norm(c, up)
    _conv3d(c, up, kp + 1, 7, depth, 64)         # the mask: the costliest layer
    c.conv(up * depth, 1, 7, 64)                 # the occlusion map
    c.conv(512, 256, 3, 64)                      # third, with its norm; fourth
    _norm(c, 256)
    c.conv(256, 256, 1, 64)
    return c


def _spade(c: Count, channels: int, side: int, label: int = 256) -> None:
    c.conv(label, 128, 3, side)
    c.conv(128, channels, 3, side)
    c.conv(128, channels, 3, side)


def _spade_block(c: Count, fin: int, fout: int, side: int) -> None:
    middle = min(fin, fout)
    _spade(c, fin, side)
    c.conv(fin, middle, 3, side)
    _spade(c, middle, side)
    c.conv(middle, fout, 3, side)
    if fin != fout:                              # the learned shortcut
        _spade(c, fin, side)
        c.conv(fin, fout, 1, side, bias=False)


def spade() -> Count:
    c = Count()
    c.conv(256, 512, 3, 64)
    for _ in range(6):
        _spade_block(c, 512, 512, 64)
    _spade_block(c, 512, 256, 128)
    _spade_block(c, 256, 64, 256)
    c.conv(64, 12, 3, 256)                       # then a pixel shuffle to 3 × 512 × 512
    return c


def generator() -> Count:
    """FaceFusion's generator: the warping module and the SPADE decoder."""
    c = warping()
    g = spade()
    c.macs += g.macs
    c.params += g.params
    return c


def _mlp(sizes: tuple[int, ...]) -> Count:
    c = Count()
    for fin, fout in zip(sizes, sizes[1:]):
        c.fc(fin, fout)
    return c


def stitcher() -> Count:
    return _mlp((126, 128, 128, 64, 65))


def lip_retargeter() -> Count:
    return _mlp((65, 128, 128, 64, 63))


def eye_retargeter() -> Count:
    return _mlp((66, 256, 256, 128, 128, 64, 63))


#: manifest entry → its count per call
COUNTED = {
    "live_portrait_feature_extractor": feature_extractor,
    "live_portrait_motion_extractor": motion_extractor,
    "live_portrait": generator,
    "live_portrait_eye_retargeter": eye_retargeter,
    "live_portrait_lip_retargeter": lip_retargeter,
    "live_portrait_stitcher": stitcher,
}


def face_editor_gmacs(eyes: bool = False, lips: bool = False) -> float:
    """GMACs the face editor spends per face: both extractors, the stitcher and the generator,
    and a retargeter per open ratio set."""
    names = ["live_portrait_feature_extractor", "live_portrait_motion_extractor",
             "live_portrait_stitcher", "live_portrait",
             *(["live_portrait_eye_retargeter"] if eyes else []),
             *(["live_portrait_lip_retargeter"] if lips else [])]
    return sum(COUNTED[n]().macs for n in names) / 1e9


# -- the expression restorer (issue 40): its calls per face --------------------------------------
def expression_restorer_gmacs() -> float:
    """GMACs the expression restorer spends per face: the feature extractor once, the motion
    extractor twice (the current crop and the frame's as decoded) and the generator once."""
    calls = {"live_portrait_feature_extractor": 1, "live_portrait_motion_extractor": 2,
             "live_portrait": 1}
    return sum(n * COUNTED[name]().macs for name, n in calls.items()) / 1e9


def table() -> str:
    rows = ["model                            GMAC/call  GFLOP/call  M params  MiB (fp32)"]
    for name, count in COUNTED.items():
        c = count()
        rows.append(f"{name:32s} {c.macs / 1e9:9.4f}  {2 * c.macs / 1e9:10.4f}  "
                    f"{c.params / 1e6:8.3f}  {c.params * 4 / 2**20:10.1f}")
    rows.append(f"face_editor per face: {face_editor_gmacs():.1f} GMAC "
                f"({face_editor_gmacs(True, True):.1f} with both open ratios set)")
    rows.append(f"expression per face: {expression_restorer_gmacs():.1f} GMAC")
    return "\n".join(rows)


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(prog="python -m bench.live_portrait_costs",
                            description="print LivePortrait's counted cost per call "
                                        "(multiply-accumulates of its published architecture)"
                            ).parse_args()
    print(table())
