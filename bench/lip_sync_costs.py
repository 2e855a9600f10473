"""What the lip syncer's Wav2Lip costs per call, counted layer by layer from its published
architecture (the method of ``bench/model_costs.py``: MACs of convolutions at batch 1,
activations and norms free; a transposed convolution counted per input pixel).

Rudrabha/Wav2Lip ``models/wav2lip.py`` and ``models/conv.py``: every ``Conv2d`` is a convolution
with a bias and a batch norm (its weight and bias counted as parameters, its running statistics
not), the face encoder takes the six-channel 96 × 96 input (the masked copy and the reference)
down to 1 × 1 in seven blocks, the audio encoder the (1, 80, 16) mel slice down to 1 × 1 (strides
(3, 1), 3, (3, 2)), the decoder goes back up with transposed convolutions, each block's output
joined to the face encoder's of its size, and a 1 × 1 convolution to RGB. wav2lip_96 and
wav2lip_gan_96 are the same network (the GAN one trained with a visual quality discriminator).
Kim et al., "A Unified Compression Framework for Efficient Speech-Driven Talking-Face
Generation" (MLSys workshop 2023, arXiv 2304.00471) publish 36.30 M parameters for this
generator: the count is checked against it (:data:`PUBLISHED_PARAMS`).

Not counted: EDTalk (edtalk_256): FaceFusion's file is an export of EDTalk's audio-driven path
whose composition (which of EDTalk's encoders, banks and generator it holds) FaceFusion does not
publish; and the MDX-Net voice extractors, whose UVR exports' layer widths are not published.
Their files' sizes will give their parameters once fetched (float32: 4 bytes each).
"""
from __future__ import annotations

from bench.counting import Count

#: parameters (millions) as published (Kim et al. 2023, their table of the original generator)
PUBLISHED_PARAMS = {"wav2lip": 36.30}


def _conv(c: Count, cin: int, cout: int, k: int, h: int, w: int, *, norm: bool = True) -> None:
    """A k × k convolution with a bias whose output is h × w (and Wav2Lip's batch norm)."""
    c.macs += k * k * cin * cout * h * w
    c.params += k * k * cin * cout + cout
    if norm:
        c.values(2 * cout)


def _up(c: Count, cin: int, cout: int, side_in: int) -> None:
    """A 3 × 3 transposed convolution with a bias and a batch norm, from side_in × side_in."""
    c.macs += 9 * cin * cout * side_in * side_in
    c.params += 9 * cin * cout + cout
    c.values(2 * cout)


def wav2lip(side: int = 96) -> Count:
    """The Wav2Lip generator on one 96-px face and one (80, 16) mel slice."""
    c = Count()
    # face encoder: (in, out, side out, residual 3 × 3 convs after it)
    _conv(c, 6, 16, 7, side, side)
    s = side
    for cin, cout, extra in ((16, 32, 2), (32, 64, 3), (64, 128, 2), (128, 256, 2),
                             (256, 512, 1)):
        s //= 2
        _conv(c, cin, cout, 3, s, s)
        for _ in range(extra):
            _conv(c, cout, cout, 3, s, s)
    _conv(c, 512, 512, 3, 1, 1)                 # 3 × 3 → 1 × 1, no padding
    _conv(c, 512, 512, 1, 1, 1)
    # audio encoder on 80 × 16: (in, out, h, w out, residual convs after it)
    for cin, cout, h, w, extra in ((1, 32, 80, 16, 2), (32, 64, 27, 16, 2), (64, 128, 9, 6, 2),
                                   (128, 256, 3, 3, 1)):
        _conv(c, cin, cout, 3, h, w)
        for _ in range(extra):
            _conv(c, cout, cout, 3, h, w)
    _conv(c, 256, 512, 3, 1, 1)
    _conv(c, 512, 512, 1, 1, 1)
    # decoder: each block's input is the last output joined to the encoder's of its side
    _conv(c, 512, 512, 1, 1, 1)
    _up(c, 1024, 512, 1)                        # 1 → 3, no padding
    _conv(c, 512, 512, 3, 3, 3)
    for cin, cout, s_in, extra in ((1024, 512, 3, 2), (768, 384, 6, 2), (512, 256, 12, 2),
                                   (320, 128, 24, 2), (160, 64, 48, 2)):
        _up(c, cin, cout, s_in)
        for _ in range(extra):
            _conv(c, cout, cout, 3, 2 * s_in, 2 * s_in)
    _conv(c, 80, 32, 3, side, side)
    _conv(c, 32, 3, 1, side, side, norm=False)
    return c


def main() -> None:
    import argparse

    argparse.ArgumentParser(prog="python -m bench.lip_sync_costs",
                            description="print the lip syncer's counted cost per call "
                                        "(multiply-accumulates of Wav2Lip's published "
                                        "architecture)").parse_args()
    count = wav2lip()
    print("lip syncer: counted cost per call (one face, one mel slice)")
    print(f"{'model':16} {'GMACs':>9} {'params (M)':>11} {'published (M)':>14}")
    for name in ("wav2lip_96", "wav2lip_gan_96"):
        print(f"{name:16} {count.macs / 1e9:9.2f} {count.params / 1e6:11.2f} "
              f"{PUBLISHED_PARAMS['wav2lip']:14.2f}")
    print("edtalk_256, kim_vocal_1/2, uvr_mdxnet: not counted (no published architecture of "
          "FaceFusion's exports)")


if __name__ == "__main__":
    main()
