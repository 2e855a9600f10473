"""What each production model costs per call, counted layer by layer from its published
architecture: the figures the realistic stand-ins (``bench/realistic.py``) are built to.

No vendor publishes these models' FLOPs, and the files cannot be downloaded here, so each count
follows the architecture's source code, and its parameter count is checked against the pinned
file's size (``models/manifest.yaml``): float32 weights take 4 bytes each, so a count that
reproduces the file's size to within a few per cent has the file's layers.
``python -m bench.model_costs`` prints the table; ``tests/test_bench_costs.py`` checks the sizes.

MACs count the multiply-accumulates of convolutions and linear layers at batch 1; elementwise
work (activations, normalisation, resizes, modulation) is left out. One MAC is two FLOPs, the
unit of the stand-ins' ``gflops`` knob. Sources:

* inswapper_128: somanchiu/ReSwapper ``StyleTransferModel_128.py`` (its weights are loaded from
  inswapper_128.onnx by ``weight_transfer.py``), plus the 512 × 512 ``emap`` initializer;
* arcface_w600k_r50: insightface ``arcface_torch/backbones/iresnet.py`` (iresnet50), batch norms
  after convolutions folded by the export, the pre-activation ones kept (4 values per channel);
* gfpgan_1.4: TencentARC/GFPGAN ``gfpganv1_clean_arch.py`` and ``stylegan2_clean_arch.py``
  (512 px, channel multiplier 2, ``sft_half``, latent input), with the export's 15 stored noise
  maps (the style MLP and the U-Net's side RGB outputs are not in the graph);
* xseg_1/2/3: DeepFaceLab ``core/leras/models/XSeg.py`` (256 px, 32 base channels);
* bisenet_resnet_18/34: yakhyo/face-parsing ``models/bisenet.py`` and ``resnet.py`` (512 px; the
  export keeps both auxiliary heads);
* 2dfan4: 1adrianb/face-alignment ``models/fan.py`` (4 hourglass stacks of depth 4, 256
  features; its batch norms precede their convolutions and stay). The count's weights are 2.5 %
  short of the file, which also holds the heatmap decoding's index grids (no MACs).

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

hyperswap_1a/1b/1c_256: FaceFusion Labs publish no architecture. The stand-in gets inswapper_128's
cost per call: in FaceFusion on one GPU hyperswap_1a_256 renders at inswapper's rate (a user's
measurement, ReSwapper issue 12). That is an assumption, not a count.
"""
from __future__ import annotations

from pathlib import Path


class Count:
    """Multiply-accumulates and parameters of a network, summed layer by layer."""

    def __init__(self) -> None:
        self.macs = 0
        self.params = 0

    def conv(self, cin: int, cout: int, k: int, side: int, *, bias: bool = True) -> None:
        """A k × k convolution whose output is side × side."""
        self.macs += k * k * cin * cout * side * side
        self.params += k * k * cin * cout + (cout if bias else 0)

    def fc(self, fin: int, fout: int, *, bias: bool = True, tokens: int = 1) -> None:
        """A linear layer applied to ``tokens`` vectors."""
        self.macs += fin * fout * tokens
        self.params += fin * fout + (fout if bias else 0)

    def depthwise(self, channels: int, k: int, side: int) -> None:
        """A k × k depthwise convolution (one filter per channel) whose output is side × side."""
        self.macs += k * k * channels * side * side
        self.params += k * k * channels + channels

    def matmul(self, m: int, k: int, n: int) -> None:
        """A product of activations (m × k by k × n): no weights."""
        self.macs += m * k * n

    def values(self, n: int) -> None:
        """Stored values that are not a layer's weights (a kept batch norm, a constant)."""
        self.params += n


def inswapper_128() -> Count:
    c = Count()
    c.conv(3, 128, 7, 128)
    c.conv(128, 256, 3, 128)
    c.conv(256, 512, 3, 64)
    c.conv(512, 1024, 3, 32)
    for _ in range(12):                     # 6 style blocks of 2 convs, each with an AdaIN linear
        c.conv(1024, 1024, 3, 32)
        c.fc(512, 2048)
    c.conv(1024, 512, 3, 64)
    c.conv(512, 256, 3, 128)
    c.conv(256, 128, 3, 128)
    c.conv(128, 3, 7, 128)
    c.values(512 * 512)                     # emap
    return c


def arcface_w600k_r50() -> Count:
    c = Count()
    c.conv(3, 64, 3, 112)
    c.values(64)                            # PReLU
    cin, side = 64, 112
    for planes, blocks in zip((64, 128, 256, 512), (3, 4, 14, 3)):
        for b in range(blocks):
            out = side // 2 if b == 0 else side
            c.values(4 * cin)               # the pre-activation batch norm
            c.conv(cin, planes, 3, side)
            c.values(planes)                # PReLU
            c.conv(planes, planes, 3, out)
            if b == 0:
                c.conv(cin, planes, 1, out)
            cin, side = planes, out
    c.values(4 * 512)
    c.fc(512 * 7 * 7, 512)
    c.values(4 * 512)
    return c


def gfpgan_1_4() -> Count:
    c = Count()
    style = 512
    unet = {512: 32, 256: 64, 128: 128, 64: 256, 32: 256, 16: 256, 8: 256, 4: 256}
    gan = {r: 2 * ch for r, ch in unet.items()}
    c.conv(3, unet[512], 1, 512)
    side = 512
    while side > 4:                         # encoder: ResBlocks down to 4 px
        cin, cout = unet[side], unet[side // 2]
        c.conv(cin, cin, 3, side)
        c.conv(cin, cout, 3, side // 2)
        c.conv(cin, cout, 1, side // 2, bias=False)
        side //= 2
    c.conv(unet[4], unet[4], 3, 4)
    c.fc(unet[4] * 16, 16 * style)
    while side < 512:                       # decoder: ResBlocks up, and the SFT conditions
        cin, cout = unet[side], unet[side * 2]
        c.conv(cin, cin, 3, side)
        side *= 2
        c.conv(cin, cout, 3, side)
        c.conv(cin, cout, 1, side, bias=False)
        for _ in range(2):                  # scale and shift branches
            c.conv(cout, cout, 3, side)
            c.conv(cout, cout, 3, side)

    def modulated(cin: int, cout: int, k: int, side: int) -> None:
        c.fc(style, cin)
        c.conv(cin, cout, k, side, bias=False)

    c.values(gan[4] * 16)                   # the constant input
    modulated(gan[4], gan[4], 3, 4)
    c.values(1 + gan[4])
    modulated(gan[4], 3, 1, 4)
    c.values(3)
    cin = gan[4]
    for side in (8, 16, 32, 64, 128, 256, 512):
        modulated(cin, gan[side], 3, side)
        modulated(gan[side], gan[side], 3, side)
        c.values(2 * (1 + gan[side]))
        modulated(gan[side], 3, 1, side)
        c.values(3)
        cin = gan[side]
    for k in range(15):                     # stored noise maps replace the noise strengths
        side = 2 ** ((k + 5) // 2)
        c.values(side * side - 1)
    return c


def xseg() -> Count:
    c = Count()
    b = 32
    for cin, cout, side in ((3, b, 256), (b, b, 256), (b, 2 * b, 128), (2 * b, 2 * b, 128),
                            (2 * b, 4 * b, 64), (4 * b, 4 * b, 64), (4 * b, 8 * b, 32)):
        c.conv(cin, cout, 3, side)
    for side, n in ((32, 2), (16, 3), (8, 3)):
        for _ in range(n):
            c.conv(8 * b, 8 * b, 3, side)
    c.fc(4 * 4 * 8 * b, 512)
    c.fc(512, 4 * 4 * 8 * b)
    for cin, cout, side_in in ((8 * b, 4 * b, 4), (8 * b, 4 * b, 8), (8 * b, 4 * b, 16),
                               (8 * b, 4 * b, 32), (4 * b, 2 * b, 64), (2 * b, b, 128)):
        c.conv(cin, cout, 3, side_in)       # transposed, stride 2: its input's side counts
    for side in (8, 16, 32):
        c.conv(12 * b, 8 * b, 3, side)
        c.conv(8 * b, 8 * b, 3, side)
        c.conv(8 * b, 8 * b, 3, side)
    for cin, cout, side in ((8 * b, 4 * b, 64), (4 * b, 4 * b, 64), (4 * b, 2 * b, 128),
                            (2 * b, 2 * b, 128), (2 * b, b, 256), (b, b, 256), (b, 1, 256)):
        c.conv(cin, cout, 3, side)
    return c


def bisenet(depth: int) -> Count:
    c = Count()
    c.conv(3, 64, 7, 256)
    cin, side = 64, 128
    for stage, (planes, blocks) in enumerate(zip((64, 128, 256, 512),
                                                 {18: (2, 2, 2, 2), 34: (3, 4, 6, 3)}[depth])):
        for b in range(blocks):
            out = side // 2 if b == 0 and stage else side
            c.conv(cin, planes, 3, out)
            c.conv(planes, planes, 3, out)
            if cin != planes:
                c.conv(cin, planes, 1, out)
            cin, side = planes, out
    c.conv(512, 128, 1, 1)                  # context path: global context, attention refinement
    c.conv(512, 128, 3, 16)
    c.conv(128, 128, 1, 1)
    c.conv(128, 128, 3, 32)
    c.conv(256, 128, 3, 32)
    c.conv(128, 128, 1, 1)
    c.conv(128, 128, 3, 64)
    c.conv(256, 256, 1, 64)                 # feature fusion
    c.conv(256, 64, 1, 1, bias=False)
    c.conv(64, 256, 1, 1, bias=False)
    c.conv(256, 256, 3, 64)                 # the output head, then the two auxiliary heads
    c.conv(256, 19, 1, 64, bias=False)
    c.conv(128, 64, 3, 64)
    c.conv(64, 19, 1, 64, bias=False)
    c.conv(128, 64, 3, 32)
    c.conv(64, 19, 1, 32, bias=False)
    return c


def fan_2d(stacks: int = 4) -> Count:
    c = Count()

    def block(cin: int, cout: int, side: int) -> None:
        """FAN's ConvBlock: three pre-activated 3 × 3 convs (cout/2, /4, /4) concatenated."""
        for a, z in ((cin, cout // 2), (cout // 2, cout // 4), (cout // 4, cout // 4)):
            c.values(4 * a)
            c.conv(a, z, 3, side, bias=False)
        if cin != cout:
            c.values(4 * cin)
            c.conv(cin, cout, 1, side, bias=False)

    def hourglass(level: int, side: int) -> None:
        block(256, 256, side)
        block(256, 256, side // 2)
        if level > 1:
            hourglass(level - 1, side // 2)
        else:
            block(256, 256, side // 2)
        block(256, 256, side // 2)

    c.conv(3, 64, 7, 128)
    c.values(4 * 64)
    block(64, 128, 128)
    block(128, 128, 64)
    block(128, 256, 64)
    for i in range(stacks):
        hourglass(4, 64)
        block(256, 256, 64)
        c.conv(256, 256, 1, 64)
        c.values(4 * 256)
        c.conv(256, 68, 1, 64)
        if i < stacks - 1:
            c.conv(256, 256, 1, 64)
            c.conv(68, 256, 1, 64)
    return c


#: ConvNeXt's stage widths and depths (the T and L of ``ddcolor_arch.Encoder``)
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
PUBLISHED_PARAMS = {"real_esrgan_x2": 16.7, "real_esrgan_x4": 16.7, "span_kendata_x4": 0.43}

#: manifest entry → its architecture's count
COUNTED = {
    "inswapper_128": inswapper_128, "arcface_w600k_r50": arcface_w600k_r50,
    "gfpgan_1.4": gfpgan_1_4, "xseg_1": xseg, "xseg_2": xseg, "xseg_3": xseg,
    "bisenet_resnet_18": lambda: bisenet(18), "bisenet_resnet_34": lambda: bisenet(34),
    "2dfan4": fan_2d,
}
#: entries counted whose files are not pinned yet: no size to check the count against
UNPINNED = {
    "ddcolor": lambda: ddcolor("t"), "ddcolor_artistic": lambda: ddcolor("l"),
    "deoldify": lambda: deoldify("wide"), "deoldify_stable": lambda: deoldify("wide"),
    "deoldify_artistic": lambda: deoldify("deep"),
    # per call on one tile of the manifest's
    "real_esrgan_x2": lambda: rrdbnet(2, 256), "real_esrgan_x4": lambda: rrdbnet(4, 256),
    "span_kendata_x4": lambda: span(4, 128),
}
#: entries whose cost is another's (the docstring says why)
ASSUMED = {"hyperswap_1a_256": "inswapper_128", "hyperswap_1b_256": "inswapper_128",
           "hyperswap_1c_256": "inswapper_128", "inswapper_128_fp16": "inswapper_128"}


def gflops(name: str) -> float:
    """GFLOP per call (2 per multiply-accumulate) of manifest entry ``name``."""
    counts = {**COUNTED, **UNPINNED}
    return 2.0 * counts[ASSUMED.get(name, name)]().macs / 1e9


def pinned_sizes() -> dict[str, int]:
    """Each shipped manifest entry's pinned file size in bytes (entries not pinned yet have
    none)."""
    import yaml

    path = Path(__file__).resolve().parents[1] / "models" / "manifest.yaml"
    return {k: int(v["size"]) for k, v in yaml.safe_load(path.read_text())["models"].items()
            if v.get("size") is not None}


def weights_mib(name: str) -> float:
    """The pinned file's size in MiB (the stand-in's weights)."""
    return pinned_sizes()[name] / 2**20


def counted_mib(name: str) -> float:
    """The float32 weights of an entry not pinned yet, in MiB, from its count."""
    return UNPINNED[name]().params * 4 / 2**20


def table() -> str:
    sizes = pinned_sizes()
    rows = ["model                 GMAC/call  GFLOP/call  M params  x4 / pinned size"]
    counts = {**COUNTED, **UNPINNED}
    for name in [*COUNTED, *UNPINNED, *ASSUMED]:
        c = counts[ASSUMED.get(name, name)]()
        ratio = "" if name in ASSUMED else \
            f"{c.params * 4 / sizes[name]:.3f}" if name in sizes else "not pinned"
        note = f"  (assumed: {ASSUMED[name]}'s)" if name in ASSUMED else ""
        rows.append(f"{name:21s} {c.macs / 1e9:9.2f}  {2 * c.macs / 1e9:10.1f}  "
                    f"{c.params / 1e6:8.2f}  {ratio:>16s}{note}")
    return "\n".join(rows)


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(prog="python -m bench.model_costs",
                            description="print each production model's counted cost per call "
                                        "(multiply-accumulates of its published architecture)"
                            ).parse_args()
    print(table())
