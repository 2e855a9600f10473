"""What a student may add to a render beside the profile: the whole frame upscaled ×2 (the frame
enhancer, last) and the background removed (the background remover, first; a video's result is
then a WebM and a picture's a PNG, both with the matte as their alpha channel). Each is a
checkbox of the form, and becomes the job's ``processors`` key and, for the background, its
output's format."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ..config import Config, load_config
from ..errors import ModelError
from ..models.manifest import load_manifest
from ..models.store import ModelStore, default_stamp_dir

#: form field → the processor it adds
EXTRAS = {"upscale": "frame_enhance", "background": "background"}
#: the frame enhancer a student's upscale uses: ×2, BSD licensed
UPSCALE_MODEL = "real_esrgan_x2"
#: form field → the model it needs (the background remover's default)
MODELS = {"upscale": UPSCALE_MODEL, "background": "modnet"}


def available(cfg: Config) -> list[str]:
    """The extras this server offers: those whose model is pinned and in its models folder (a
    student cannot fetch one; the teacher runs ``render models fetch NAME``)."""
    manifest = load_manifest(cfg.models_dir, [Path(p) for p in cfg.models.manifest])
    store = ModelStore(cfg.models_dir, manifest, default_stamp_dir(cfg.cache_path))
    out = []
    for extra, model in MODELS.items():
        try:
            entry = manifest.get(model)
        except ModelError:
            continue
        if entry.sha256 and store.status(entry) in ("verified", "present"):
            out.append(extra)
    return out


def unavailable(fields: Mapping[str, str], offered: list[str]) -> str | None:
    """Why a ticked extra cannot be had here (one line), or None."""
    for extra in EXTRAS:
        if ticked(fields, extra) and extra not in offered:
            return (f"{extra} is not offered on this server: its model {MODELS[extra]} is not "
                    f"fetched (the teacher can run `render models fetch {MODELS[extra]}`)")
    return None


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



