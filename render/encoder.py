"""The video encoder of an output: a codec its container can hold, the crf and preset that go
with it, and the encoder threads. The plan resolves them once, so the bytes never depend on the
machine that encodes."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from . import media as ffargs
from .config import Config
from .errors import UsageError
from .media.formats import CODECS, PRESETS, SOFTWARE_FALLBACK, has_alpha

#: encoder threads when ``encode.threads=0``: pinned, because x264/x265/vpx output depends on the
#: thread count, and the bytes must not depend on the machine's cores
PINNED_ENCODE_THREADS = 4
#: libvpx-vp9: row-based multithreading with fixed tile columns, so the bitstream does not depend
#: on the thread count; cpu-used 4 keeps the speed near x264's 'medium'
_VP9_EXTRA = ("-row-mt", "1", "-tile-columns", "2", "-cpu-used", "4")


def _vp9_crf(x264_crf: int) -> int:
    """libvpx-vp9's crf (0-63) of about the quality of an x264 crf (0-51)."""
    return max(0, min(63, round(x264_crf * 1.5)))


def _alpha_settings(cfg: Config, output: Path) -> ffargs.EncodeSettings:
    """VP9 with alpha (webm) or ProRes 4444 (mov): the codec is the format's; crf and preset
    carry over to VP9 as for any webm, ProRes takes neither."""
    codec, opts, pix_fmt = ffargs.ALPHA_FORMATS[Path(ffargs.final_path(output)).suffix.lower()]
    enc = cfg.encode
    if "encode.codec" in cfg.explicit and enc.codec != codec:
        raise UsageError(f"encode.codec={enc.codec}: the matte goes into {output.suffix} files as "
                         f"alpha only with {codec} (leave encode.codec out, or set "
                         f"background.output=fill)")
    if "encode.pix_fmt" in cfg.explicit and enc.pix_fmt != pix_fmt:
        raise UsageError(f"encode.pix_fmt={enc.pix_fmt}: the matte goes into {output.suffix} "
                         f"files as alpha only in {pix_fmt} (leave encode.pix_fmt out, or set "
                         f"background.output=fill)")
    threads = enc.threads or PINNED_ENCODE_THREADS
    if codec == "prores_ks":
        return ffargs.EncodeSettings(codec=codec, crf=None, preset=None, pix_fmt=pix_fmt,
                                     extra=opts, threads=threads)
    crf = enc.crf if "encode.crf" in cfg.explicit else _vp9_crf(enc.crf)
    preset = enc.preset if "encode.preset" in cfg.explicit else "good"
    return ffargs.EncodeSettings(codec=codec, crf=crf, preset=preset, pix_fmt=pix_fmt,
                                 extra=(*opts, *_VP9_EXTRA), threads=threads)


def _check_preset(codec: str, preset: str | None) -> None:
    known = PRESETS.get(codec)
    if preset and known is not None and preset not in known:
        raise UsageError(f"encode.preset={preset} is not a preset of {codec} (one of "
                         f"{', '.join(known)})")


def encode_settings(cfg: Config, output: Path, hw: Mapping[str, bool] | None = None,
                    alpha: bool = False) -> tuple[ffargs.EncodeSettings, str]:
    """The encoder for ``output``'s container: the profile's codec where the container takes it;
    for a container that cannot hold the profile's codec (x264 in WebM) the container's own
    default; a codec the user forced on the command line that the container cannot hold is an
    error before any work. With ``alpha`` the format's encoder that keeps an alpha channel."""
    _, family = ffargs.output_format(output)
    if alpha:
        return _alpha_settings(cfg, output), family
    if has_alpha(cfg.encode.pix_fmt):
        raise UsageError(f"encode.pix_fmt={cfg.encode.pix_fmt} has an alpha channel, and this "
                         f"render makes none: the background remover's matte is written as "
                         f"alpha (processors=background,... with a .webm, .mov, .png or .webp "
                         f"output)")
    legal = CODECS[family]
    enc = cfg.encode
    codec, crf, preset = enc.codec, enc.crf, enc.preset
    _check_preset(codec, preset)      # the same answer with or without NVENC here
    if codec in SOFTWARE_FALLBACK and not (hw or {}).get(codec, False):
        codec = SOFTWARE_FALLBACK[codec]      # the caller said so in one log line
        if preset and preset not in PRESETS[codec]:   # nvenc's own (p1..p7, hq, ll...)
            preset = "medium"
    if legal is not None and codec not in legal:
        if "encode.codec" in cfg.explicit:
            raise UsageError(f"encode.codec={codec} cannot go into {output.suffix} files "
                             f"(use one of {', '.join(legal)})")
        codec = legal[0]
        if codec == "libvpx-vp9" and "encode.crf" not in cfg.explicit:
            crf = _vp9_crf(enc.crf)
        if codec == "libvpx-vp9" and "encode.preset" not in cfg.explicit:
            preset = "good"
    extra: tuple[str, ...] = _VP9_EXTRA if codec == "libvpx-vp9" else ()
    threads = enc.threads or PINNED_ENCODE_THREADS
    return ffargs.EncodeSettings(codec=codec, crf=crf, preset=preset, pix_fmt=enc.pix_fmt,
                                 extra=extra, threads=threads), family
