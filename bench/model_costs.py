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

The whole-frame processors' models are counted in ``bench/frame_costs.py``.

hyperswap_1a/1b/1c_256: FaceFusion Labs publish no architecture. The stand-in gets inswapper_128's
cost per call: in FaceFusion on one GPU hyperswap_1a_256 renders at inswapper's rate (a user's
measurement, ReSwapper issue 12). That is an assumption, not a count.
"""
from __future__ import annotations

from pathlib import Path

from bench.counting import Count
from bench.frame_costs import UNPINNED


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
COUNTED = {
    "inswapper_128": inswapper_128, "arcface_w600k_r50": arcface_w600k_r50,
    "gfpgan_1.4": gfpgan_1_4, "xseg_1": xseg, "xseg_2": xseg, "xseg_3": xseg,
    "bisenet_resnet_18": lambda: bisenet(18), "bisenet_resnet_34": lambda: bisenet(34),
    "2dfan4": fan_2d,
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
