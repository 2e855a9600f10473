"""What the age modifier's models cost per call, counted layer by layer from their published
architectures (the method of ``bench/model_costs.py``; MACs of convolutions and linear layers
at batch 1, fixed blur kernels counted too, activations and norms free). Their files are not
pinned yet (``sha256: null``), so the counts are checked against the parameter counts their
authors publish where there is one (:data:`PUBLISHED_PARAMS`).

* fran: ry-lu/pytorch-face-reaging-network ``models/generator.py`` at 1024 px: a U-Net on RGB
  and two age planes (5 channels), a double 3 × 3 conv at each of five levels (64 … 1024
  channels), kornia's MaxBlurPool down (a 3 × 3 blur per channel at stride 2) and a 3 × 3
  Gaussian blur before each bilinear ×2 up, a 1 × 1 conv to RGB. 31.4 M parameters with the
  batch norms' weights and biases, what its README's training summary gives. FaceFusion's file
  may hold other weights of this network (the age planes and the added input are the export's);
* fairface: torchvision's ResNet-34 with an 18-way head (7 races, 2 genders, 9 ages; dchen236/
  FairFace ``predict.py``) at 224 px, its batch norms folded; the same network with the 1000-way
  head and its batch norms' weights has torchvision's published 21.8 M;
* styleganex_age: williamyang1991/StyleGANEX ``models/psp.py``, ``encoders/psp_encoders.py``,
  ``stylegan2/model.py`` as ``video_editing.py`` runs its age model (trained ``--use_skip
  --skip_max_layer=7 --use_att=1``): the IR-SE-50 encoder over the 384-px crop up to its 1/8
  features (the first-layer feature and the seven skip features; the export drops what only
  that pass's styles use) and over the 256-px face in full for the 18 styles; the generator
  from the first-layer feature at 48 px, its 8 … 32 px layers dilated at 48 px, then doubling
  to 1536 px, with the seven fusion layers and their attention. The StyleGAN2 generator's own
  weights (its mapping network and constant too, which the graph drops) count 30.37 M, against
  the 30.0 M published for StyleGAN2 at 1024 px (NVIDIA's own implementation; StyleGANEX builds
  on rosinality's port). No parameter count is published for the StyleGANEX encoder (its 18
  style blocks alone hold 236 M) or its fusion layers: counted, not checked; the file's size
  will check them once it is fetched (float32: 4 bytes each).
"""
from __future__ import annotations

from bench.counting import Count

#: parameters (millions) as their authors publish them
PUBLISHED_PARAMS = {"fran": 31.4, "resnet34": 21.8, "stylegan2_1024": 30.0}


def _blur(c: Count, channels: int, side: int, taps: int = 9) -> None:
    """A fixed blur per channel whose output is side × side: its MACs, no weights."""
    c.matmul(channels * side * side, taps, 1)


def _double_conv(c: Count, cin: int, cout: int, side: int, bn: bool) -> None:
    c.conv(cin, cout, 3, side)
    c.conv(cout, cout, 3, side)
    if bn:
        c.values(2 * 2 * cout)


def fran(side: int = 1024) -> Count:
    """ry-lu's FRAN generator on a ``side`` input; its batch norms' weights and biases counted
    (the figure its authors publish)."""
    c = Count()
    c.conv(5, 64, 3, side)
    c.conv(64, 64, 3, side)
    c.values(2 * 64)                            # one batch norm, used after both convs
    widths = (64, 128, 256, 512, 1024)
    s = side
    for cin, cout in zip(widths, widths[1:]):   # down: max, blur at stride 2, double conv
        s //= 2
        _blur(c, cin, s)
        _double_conv(c, cin, cout, s, bn=True)
    for cin, cout in zip(widths[:0:-1], widths[-2::-1]):   # up: blur, ×2, concat, double conv
        _blur(c, cin, s)
        s *= 2
        _double_conv(c, cin + cout, cout, s, bn=True)
    c.conv(64, 3, 1, side)
    return c


def resnet34(classes: int = 18, side: int = 224, *, bn: bool = False) -> Count:
    """torchvision's ResNet-34; ``bn``: its batch norms' weights and biases counted (the
    published figure), else folded into the convs (what an export holds)."""
    c = Count()

    def norm(channels: int) -> None:
        if bn:
            c.values(2 * channels)

    c.conv(3, 64, 7, side // 2, bias=not bn)
    norm(64)
    cin, s = 64, side // 4
    for stage, (planes, count) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3))):
        for b in range(count):
            stride = 2 if b == 0 and stage else 1
            out = s // stride
            c.conv(cin, planes, 3, out, bias=not bn)
            norm(planes)
            c.conv(planes, planes, 3, out, bias=not bn)
            norm(planes)
            if b == 0 and stride != 1:
                c.conv(cin, planes, 1, out, bias=not bn)
                norm(planes)
            cin, s = planes, out
    c.fc(512, classes)
    return c


def fairface(side: int = 224) -> Count:
    return resnet34(18, side)


# -- StyleGANEX ---------------------------------------------------------------------------------
#: IR-SE-50's units: (in, out, stride) per unit, in order
IR_SE_50 = [(64, 64, 2), (64, 64, 1), (64, 64, 1),
            (64, 128, 2), *[(128, 128, 1)] * 3,
            (128, 256, 2), *[(256, 256, 1)] * 13,
            (256, 512, 2), (512, 512, 1), (512, 512, 1)]


def _ir_se_unit(c: Count, cin: int, cout: int, stride: int, side: int) -> int:
    """pSp's bottleneck_IR_SE on a ``side`` input (batch norms folded or kept as 4 values where
    one leads the unit); returns its output side."""
    out = side // stride
    c.values(4 * cin)                           # the leading batch norm (no conv before it)
    c.conv(cin, cout, 3, side, bias=False)
    c.values(cout)                              # PReLU
    c.conv(cout, cout, 3, out)                  # stride here, its batch norm folded
    c.fc(cout, cout // 16, bias=False)          # squeeze and excitation
    c.fc(cout // 16, cout, bias=False)
    if cin != cout:
        c.conv(cin, cout, 1, out)               # the shortcut's 1 × 1, batch norm folded
    return out


def _encoder_body(c: Count, side: int, units: int) -> list[tuple[int, int]]:
    """The input layer and the first ``units`` units; returns each unit's (channels, side)."""
    c.conv(3, 64, 3, side)
    c.values(64)
    seen, s = [], side
    for cin, cout, stride in IR_SE_50[:units]:
        s = _ir_se_unit(c, cin, cout, stride, s)
        seen.append((cout, s))
    return seen


def _style_block(c: Count, spatial: int, side: int) -> None:
    """GradualStyleBlock: stride-2 convs from ``side`` down by log2(``spatial``) halvings (they
    run on the feature map's own side), pooled, one equalised linear layer."""
    s = side
    for _ in range(spatial.bit_length() - 1):
        s = (s + 1) // 2
        c.conv(512, 512, 3, s)
    c.fc(512, 512)


def styleganex_encoder(extended: int = 384, face: int = 256) -> Count:
    c = Count()
    # the extended crop: the body to unit 20, the first-layer feature from units 10, 15 and 20
    _encoder_body(c, extended, 21)
    c.conv(768, 512, 1, extended // 8)          # featlayer
    # the face: the whole body, the feature pyramid, 3 + 4 + 11 style blocks
    _encoder_body(c, face, 24)
    c.conv(256, 512, 1, face // 8)              # latlayer1, latlayer2
    c.conv(128, 512, 1, face // 4)
    for count, spatial, side in ((3, 16, face // 16), (4, 32, face // 8), (11, 64, face // 4)):
        for _ in range(count):
            _style_block(c, spatial, side)
    c.values(2 * 18 * 512)                      # latent_avg and the editing vector
    return c


def _generator_layers(first: int) -> list[tuple[int, int, bool]]:
    """(channels, side, doubles) of the generator's layers from 8 px on, for a ``first``-px
    first-layer feature: its 8 … 32 px layers dilated at that side, then doubling."""
    channels = [512, 512, 512, 512, 256, 128, 64, 32]
    sides = [first, first, first, 2 * first, 4 * first, 8 * first, 16 * first, 32 * first]
    return [(ch, s, i >= 3) for i, (ch, s) in enumerate(zip(channels, sides))]


def stylegan2_generator(first: int = 48, *, mapping: bool = False) -> Count:
    """The StyleGAN2 generator (1024 px, channel multiplier 2) as StyleGANEX runs it from a
    ``first``-px feature; ``mapping``: its mapping network and constant input too (the weights
    the published count has; StyleGANEX's graph drops them)."""
    c = Count()
    if mapping:
        for _ in range(8):
            c.fc(512, 512)
        c.values(512 * 4 * 4)
    c.fc(512, 512)                              # conv1: modulation, the dilated 3 × 3
    c.conv(512, 512, 3, first, bias=False)
    c.values(1 + 512)                           # noise weight, activation bias
    c.fc(512, 512)                              # to_rgb1
    c.conv(512, 3, 1, first, bias=False)
    c.values(3)
    cin, s = 512, first
    for cout, side, doubles in _generator_layers(first):
        c.fc(512, cin)                          # the up conv: transposed, then a blur
        if doubles:
            c.conv(cin, cout, 3, s, bias=False)  # each input pixel spreads a 3 × 3 kernel
            _blur(c, cout, side, 16)
        else:
            _blur(c, cin, side)
            c.conv(cin, cout, 3, side, bias=False)
        c.values(1 + cout)
        c.fc(512, cout)                         # the second conv
        c.conv(cout, cout, 3, side, bias=False)
        c.values(1 + cout)
        c.fc(512, cout)                         # to_rgb and the skip's upsampling
        c.conv(cout, 3, 1, side, bias=False)
        c.values(3)
        _blur(c, 3, side, 4 if doubles else 9)
        cin, s = cout, side
    return c


#: the fusion layers: (encoder channels, generator channels, side at a 48-px first layer)
FUSION = ((256, 512, 1), (256, 512, 1), (256, 512, 1), (256, 512, 1), (128, 512, 2),
          (64, 256, 4), (64, 128, 8))


def fusion_layers(first: int = 48) -> Count:
    """StyleGANEX's seven FusionLayers (``use_skip_torgb``, ``use_att=1``)."""
    c = Count()
    for inc, outc, scale in FUSION:
        s = first * scale
        c.conv(inc, outc, 3, s)                 # transform
        c.fc(512, outc)                         # attention: its MLP on the editing vector,
        c.fc(outc, outc)
        c.fc(outc, 4 * outc)                    # the AdaIN's style,
        c.conv(2 * outc, 1, 3, s)               # the mask conv
        c.conv(2 * outc, outc, 3, s)            # fusion_out
        c.conv(3 + outc, 3, 3, s)               # fusion_skip
    return c


def styleganex_age(extended: int = 384, face: int = 256) -> Count:
    c = Count()
    for part in (styleganex_encoder(extended, face), stylegan2_generator(extended // 8),
                 fusion_layers(extended // 8)):
        c.macs += part.macs
        c.params += part.params
    return c


COUNTED = {"fran": fran, "styleganex_age": styleganex_age, "fairface": fairface}


def table() -> str:
    rows = ["model            GMAC/call  GFLOP/call  M params  float32"]
    for name, count in COUNTED.items():
        c = count()
        rows.append(f"{name:15s}  {c.macs / 1e9:9.1f}  {2 * c.macs / 1e9:10.1f}  "
                    f"{c.params / 1e6:8.1f}  {c.params * 4 / 2**20:5.0f} MiB")
    return "\n".join(rows)


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(prog="python -m bench.age_costs",
                            description="print the age modifier's models' counted cost per call "
                                        "(multiply-accumulates of their published architectures)"
                            ).parse_args()
    print(table())
