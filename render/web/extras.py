"""What a student may add to a render beside the profile: the whole frame upscaled ×2 (the frame
enhancer, last) and the background removed (the background remover, first; a video's result is
then a WebM and a picture's a PNG, both with the matte as their alpha channel). Each is a
checkbox of the form, and becomes the job's ``processors`` key and, for the background, its
output's format."""
from __future__ import annotations

from typing import Mapping

from ..config import load_config

#: form field → the processor it adds
EXTRAS = {"upscale": "frame_enhance", "background": "background"}
#: the frame enhancer a student's upscale uses: ×2, BSD licensed
UPSCALE_MODEL = "real_esrgan_x2"


def ticked(fields: Mapping[str, str], name: str) -> bool:
    return fields.get(name, "").lower() in ("yes", "on", "true", "1")


def extra_settings(fields: Mapping[str, str], profile: str) -> dict[str, str]:
    """The job keys the ticked extras add to a render with ``profile``; empty when none is."""
    upscale, background = ticked(fields, "upscale"), ticked(fields, "background")
    if not (upscale or background):
        return {}
    chain = list(load_config({"profile": profile}, env={}).processors)
    chain = [*(["background"] if background else []), *chain,
             *(["frame_enhance"] if upscale else [])]
    out = {"processors": ",".join(chain)}
    if upscale:
        out["frame_enhance.model"] = UPSCALE_MODEL
    return out


def result_suffix(fields: Mapping[str, str], is_image: bool, suffix: str) -> str:
    """The result's extension: with the background removed, one that carries alpha."""
    if ticked(fields, "background"):
        return ".png" if is_image else ".webm"
    return suffix


def describe(settings: Mapping[str, str]) -> list[str]:
    """The extras a job's settings hold, as the pages name them."""
    chain = str(settings.get("processors", "")).split(",")
    return [name for name, processor in EXTRAS.items() if processor in chain]



