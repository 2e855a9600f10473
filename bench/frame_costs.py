"""What the whole-frame processors' models cost per call, counted layer by layer from their
published architectures (the method of ``bench/model_costs.py``, which prints them in its table).
Their files are not pinned yet (``sha256: null`` until the first fetch), so their counts are not
checked against a file size; where the authors publish a parameter count the count is checked
against it (:data:`PUBLISHED_PARAMS`).

The colourisers (``colourize``) are counted at ``colourize.size=256`` (their cost grows at least
with the side squared; ``ddcolor(side=…)``, ``deoldify(side=…)`` count other sides) from their
authors' code; their files are not pinned yet (``sha256: null`` until the first fetch), so their
counts are not checked against a size (:data:`UNPINNED`, the table says so):

* ddcolor: piddnad/DDColor ``basicsr/archs/ddcolor_arch.py`` and ``ddcolor_arch_utils/`` as its
  inference pipeline builds it (``num_output_channels=2``, ``num_queries=100``, ``num_scales=3``,
  ``dec_layers=9``, ``nf=512``): the ConvNeXt encoder (``convnext.py``: its four feature norms
  kept, the classifier norm dropped by the export), the pixel decoder (three ``UnetBlockWide``
  and the ×4 pixel shuffle to full size), the colour decoder (three 1×1 input projections, nine
  layers of cross-attention, self-attention and a 2048-wide FFN over 100 queries of 256, the
  3-layer colour MLP, the queries × full-size features product) and the 1×1 refine conv.
  Attention's own products (Q·Kᵀ, ·V) are counted as MACs; softmax and layer norms are not.
  ``ddcolor`` is counted with the ConvNeXt-T encoder (``ddcolor_paper_tiny``);
  ``ddcolor_artistic`` is DDColor-L (ConvNeXt-L, its model zoo says so). Which encoder
  FaceFusion's ``ddcolor.onnx`` holds is not published: the authors' default,
  ``ddcolor_modelscope``, is DDColor-L. The pinned size decides it once fetched
  (``ddcolor("l")`` has about 8 times ``ddcolor("t")``'s weights);
* deoldify / deoldify_stable / deoldify_artistic: jantic/DeOldify ``deoldify/unet.py`` and
  ``generators.py``: the video and stable generators are ``DynamicUnetWide`` on a ResNet-101
  (``nf_factor=2``), the artistic one ``DynamicUnetDeep`` on a ResNet-34 (``nf_factor=1.5``),
  both with spectral norm and one self-attention block; the ResNet's batch norms folded into
  its convolutions, the decoder's batch norms after a ReLU kept (4 values per channel).

The frame enhancers (``frame_enhance``) are counted per call on one tile of the manifest's
``tile``; their files are not pinned yet either (:data:`UNPINNED`), so their parameter counts are
checked against the ones their authors publish (:data:`PUBLISHED_PARAMS`):

* real_esrgan_x2 / x4: xinntao/Real-ESRGAN's RRDBNet (basicsr ``rrdbnet_arch.py``) at 256 px: 23
  RRDBs of 3 residual dense blocks (64 features, growth 32), two nearest ×2 upsamplings each
  followed by a 3 × 3 conv, then ``conv_hr`` and ``conv_last`` at the output size. x2
  pixel-unshuffles its input first (12 channels in at half the side), so its body runs on a
  quarter of x4's pixels. 16.7 M parameters, as the ESRGAN and Real-ESRGAN papers give;
* span_kendata_x4: SPAN (Wan et al., "Swift Parameter-free Attention Network for Efficient
  Super-Resolution", CVPR-W 2024; hongyuanyu/SPAN ``span_arch.py``) in its published config at
  128 px: 48 features, 6 SPABs, every ``Conv3XC`` as the single 3 × 3 conv it is
  re-parameterised into for inference (what an export holds), the upsampler's conv making 3·16
  channels for the pixel shuffle: 0.43 M parameters, the paper's ×4 figure. That kendata's file
  keeps the published config is an assumption its size will settle once fetched.

* modnet: ZHKKKe/MODNet ``src/models/modnet.py`` at 512 px in its inference graph: the
  MobileNetV2 backbone (width 1.0, batch norms folded), the low-resolution branch (the SE block
  on the 1/32 features, 5 × 5 convs at 1/16 and 1/8; no semantic head), the high-resolution
  branch (1/2 and 1/4) and the fusion branch to the full-size matte; its instance/batch norms
  are folded or cost nothing counted here. 6.48 M parameters against the 6.45 M its release's
  checkpoint holds.
"""
from __future__ import annotations

from bench.counting import Count

CONVNEXT = {"t": ((96, 192, 384, 768), (3, 3, 9, 3)), "l": ((192, 384, 768, 1536), (3, 3, 27, 3))}


def _attention(c: Count, d: int, queries: int, keys: int) -> None:
    """``nn.MultiheadAttention`` of ``queries`` over ``keys`` tokens of width ``d``, then its
    post-norm."""
    c.fc(d, d, tokens=queries)
    c.fc(d, d, tokens=keys)
    c.fc(d, d, tokens=keys)
    c.matmul(queries, d, keys)
    c.matmul(queries, keys, d)
    c.fc(d, d, tokens=queries)
    c.values(2 * d)


def convnext(c: Count, encoder: str, side: int) -> None:
    """DDColor's encoder: ConvNeXt without its classifier, with a norm on each stage's output."""
    dims, depths = CONVNEXT[encoder]
    s = side // 4
    c.conv(3, dims[0], 4, s)                 # the stem: 4 × 4, stride 4, and its norm
    c.values(2 * dims[0])
    for i, (d, depth) in enumerate(zip(dims, depths)):
        if i:
            c.values(2 * dims[i - 1])
            s //= 2
            c.conv(dims[i - 1], d, 2, s)
        for _ in range(depth):               # depthwise 7 × 7, norm, 4× MLP, layer scale
            c.depthwise(d, 7, s)
            c.values(2 * d)
            c.conv(d, 4 * d, 1, s)
            c.conv(4 * d, d, 1, s)
            c.values(d)
        c.values(2 * d)                      # norm0..3: the features the decoder takes


def ddcolor(encoder: str = "t", side: int = 256) -> Count:
    c = Count()
    dims = CONVNEXT[encoder][0]
    convnext(c, encoder, side)
    cin, s = dims[3], side // 32             # pixel decoder: three UnetBlockWide
    levels = []
    for skip, out in ((dims[2], 512), (dims[1], 512), (dims[0], 256)):
        c.conv(cin, 4 * out, 1, s)           # the shuffle's 1 × 1, its batch norm folded
        s *= 2
        c.values(4 * skip)                   # the skip's batch norm
        c.conv(out + skip, out, 3, s, bias=False)
        c.values(4 * out)                    # batch norm after the ReLU
        levels.append((out, s))
        cin = out
    c.conv(256, 256 * 16, 1, side // 4)      # the last shuffle: ×4 to full size
    d, queries = 256, 100                    # colour decoder
    for ch, s in levels:
        c.conv(ch, d, 1, s)
    for layer in range(9):
        keys = levels[layer % 3][1] ** 2
        _attention(c, d, queries, keys)      # cross-attention to one scale's features
        _attention(c, d, queries, queries)   # self-attention of the queries
        c.fc(d, 2048, tokens=queries)
        c.fc(2048, d, tokens=queries)
        c.values(2 * d)
    c.values(2 * d + 2 * queries * d + 3 * d)   # decoder norm, query features and positions, levels
    for _ in range(3):
        c.fc(d, d, tokens=queries)           # the colour MLP
    c.matmul(queries, d, side * side)        # colour queries × full-size features
    c.conv(queries + 3, 2, 1, side)          # refine: a, b
    return c


def _resnet(c: Count, depth: int, side: int) -> list[tuple[int, int]]:
    """torchvision's ResNet-34 or -101 up to layer4, batch norms folded; returns the channels
    and side of the outputs DeOldify's U-Net hooks (relu, layer1..3) and of layer4."""
    c.conv(3, 64, 7, side // 2)
    hooks = [(64, side // 2)]
    cin, s = 64, side // 4
    blocks = {34: (3, 4, 6, 3), 101: (3, 4, 23, 3)}[depth]
    for stage, (planes, count) in enumerate(zip((64, 128, 256, 512), blocks)):
        for b in range(count):
            stride = 2 if b == 0 and stage else 1
            out = s // stride
            if depth == 34:                  # BasicBlock
                c.conv(cin, planes, 3, out)
                c.conv(planes, planes, 3, out)
                width = planes
            else:                            # Bottleneck, the stride on its 3 × 3
                c.conv(cin, planes, 1, s)
                c.conv(planes, planes, 3, out)
                c.conv(planes, 4 * planes, 1, out)
                width = 4 * planes
            if b == 0 and (stride != 1 or cin != width):
                c.conv(cin, width, 1, out)
            cin, s = width, out
        hooks.append((cin, s))
    return hooks


def _self_attention(c: Count, n: int, tokens: int) -> None:
    """fastai's SelfAttention: 1-D convs to n/8, n/8 and n, two products, a gain."""
    c.fc(n, n // 8, bias=False, tokens=tokens)
    c.fc(n, n // 8, bias=False, tokens=tokens)
    c.fc(n, n, bias=False, tokens=tokens)
    c.matmul(tokens, n // 8, tokens)
    c.matmul(n, tokens, tokens)
    c.values(1)


def deoldify(variant: str = "wide", side: int = 256) -> Count:
    """``wide``: DynamicUnetWide on ResNet-101, nf_factor 2 (video, stable); ``deep``:
    DynamicUnetDeep on ResNet-34, nf_factor 1.5 (artistic)."""
    c = Count()
    hooks = _resnet(c, 101 if variant == "wide" else 34, side)
    ni, s = hooks[-1]
    c.values(4 * ni)                         # batch norm after the encoder
    c.conv(ni, 2 * ni, 3, s, bias=False)     # the middle convs, each with its batch norm
    c.values(4 * 2 * ni)
    c.conv(2 * ni, ni, 3, s, bias=False)
    c.values(4 * ni)
    up = ni
    skips = hooks[-2::-1]
    for i, (skip, s_out) in enumerate(skips):
        final = i == len(skips) - 1
        if variant == "wide":
            half = (1024 if not final else 512) // 2
            c.conv(up, 4 * half, 1, s_out // 2)       # the shuffle, its batch norm folded
            c.values(4 * skip)
            c.conv(half + skip, half, 3, s_out, bias=False)
            c.values(4 * half)
            out = half
        else:
            half = up // 2
            c.conv(up, 4 * half, 1, s_out // 2)
            c.values(4 * skip)
            cat = half + skip
            out = int((cat if not final else cat // 2) * 1.5)
            c.conv(cat, out, 3, s_out, bias=False)
            c.values(4 * out)
            c.conv(out, out, 3, s_out, bias=False)
            c.values(4 * out)
        if i == 1:
            _self_attention(c, out, s_out * s_out)
        up = out
    c.conv(up, 4 * up, 1, side // 2)          # to full size (weight norm folded)
    cat = up + 3                              # the input concatenated back
    c.conv(cat, cat, 3, side)                 # res_block: two 3 × 3 convs
    c.conv(cat, cat, 3, side)
    c.conv(cat, 3, 1, side)
    return c


def rrdbnet(scale: int, tile: int, *, blocks: int = 23, nf: int = 64, gc: int = 32) -> Count:
    """Real-ESRGAN's RRDBNet on one ``tile`` × ``tile`` input (x2: pixel-unshuffled first)."""
    c = Count()
    side = tile // 2 if scale == 2 else tile
    c.conv(3 * (4 if scale == 2 else 1), nf, 3, side)
    for _ in range(blocks * 3):             # 23 RRDBs of 3 residual dense blocks
        for k in range(4):
            c.conv(nf + k * gc, gc, 3, side)
        c.conv(nf + 4 * gc, nf, 3, side)
    c.conv(nf, nf, 3, side)                 # conv_body
    c.conv(nf, nf, 3, 2 * side)             # conv_up1, after a nearest x2
    c.conv(nf, nf, 3, 4 * side)             # conv_up2, after another
    c.conv(nf, nf, 3, 4 * side)             # conv_hr
    c.conv(nf, 3, 3, 4 * side)              # conv_last
    return c


def span(scale: int, tile: int, *, nf: int = 48, blocks: int = 6) -> Count:
    """SPAN on one ``tile`` × ``tile`` input, its Conv3XC re-parameterised (3 × 3 convs)."""
    c = Count()
    c.conv(3, nf, 3, tile)                  # conv_1
    for _ in range(blocks * 3):             # each SPAB: c1_r, c2_r, c3_r
        c.conv(nf, nf, 3, tile)
    c.conv(4 * nf, nf, 1, tile)             # conv_cat
    c.conv(nf, nf, 3, tile)                 # conv_2
    c.conv(nf, 3 * scale * scale, 3, tile)  # the upsampler's conv, then a pixel shuffle
    return c


#: the frame enhancers' parameter counts as their authors publish them (millions)
PUBLISHED_PARAMS = {"real_esrgan_x2": 16.7, "real_esrgan_x4": 16.7, "span_kendata_x4": 0.43,
                    "modnet": 6.45}

#: manifest entry → its architecture's count


def _mobilenet_v2(c: Count, side: int) -> None:
    """torchvision's MobileNetV2 (width 1.0) up to its last 1 × 1 conv, batch norms folded."""
    s = side // 2
    c.conv(3, 32, 3, s)
    cin = 32
    for t, cout, n, first in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                              (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            hidden = cin * t
            if t != 1:
                c.conv(cin, hidden, 1, s)
            s //= first if i == 0 else 1
            c.depthwise(hidden, 3, s)
            c.conv(hidden, cout, 1, s)
            cin = cout
    c.conv(320, 1280, 1, s)


def modnet(side: int = 512) -> Count:
    """MODNet's inference graph on a ``side`` × ``side`` input."""
    c = Count()
    _mobilenet_v2(c, side)
    hr = 32
    c.fc(1280, 1280 // 4, bias=False)                   # SE block
    c.fc(1280 // 4, 1280, bias=False)
    c.conv(1280, 96, 5, side // 16)                     # conv_lr16x
    c.conv(96 + 32, hr, 5, side // 8)                   # conv_lr8x (with enc8x)
    c.conv(16, hr, 1, side // 2)                        # tohr_enc2x
    c.conv(hr + 3, hr, 3, side // 4)                    # conv_enc2x (stride 2)
    c.conv(24, hr, 1, side // 4)                        # tohr_enc4x
    c.conv(2 * hr, 2 * hr, 3, side // 4)                # conv_enc4x
    for cin, cout in ((3 * hr + 3, 2 * hr), (2 * hr, 2 * hr), (2 * hr, hr)):
        c.conv(cin, cout, 3, side // 4)                 # conv_hr4x
    for cin, cout in ((2 * hr, 2 * hr), (2 * hr, hr), (hr, hr), (hr, hr)):
        c.conv(cin, cout, 3, side // 2)                 # conv_hr2x
    c.conv(hr, hr, 5, side // 4)                        # fusion: conv_lr4x
    c.conv(2 * hr, hr, 3, side // 2)                    # conv_f2x
    c.conv(hr + 3, hr // 2, 3, side)                    # conv_f
    c.conv(hr // 2, 1, 1, side)
    return c


#: entries counted whose files are not pinned yet: no size to check the count against
UNPINNED = {
    "ddcolor": lambda: ddcolor("t"), "ddcolor_artistic": lambda: ddcolor("l"),
    "deoldify": lambda: deoldify("wide"), "deoldify_stable": lambda: deoldify("wide"),
    "deoldify_artistic": lambda: deoldify("deep"),
    # per call on one tile of the manifest's
    "real_esrgan_x2": lambda: rrdbnet(2, 256), "real_esrgan_x4": lambda: rrdbnet(4, 256),
    "span_kendata_x4": lambda: span(4, 128),
    "modnet": lambda: modnet(512),
}
