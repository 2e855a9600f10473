"""What a config needs: the models a render with it loads."""
from __future__ import annotations

from .load import load_config
from .profiles import profile_names
from .schema import Config


def required_models(cfg: Config) -> list[tuple[str, str]]:
    """(manifest name, precision) of every model a render with ``cfg`` loads."""
    from ..landmarks.registry import named_models as landmark_models
    from ..masks.registry import named_models as mask_models
    from ..processors.steps import chain_steps

    return [(cfg.detect.model, "fp32"), (cfg.embed.model, "fp32"),
            *((s.model, s.precision) for s in chain_steps(cfg)),
            *((name, "fp32") for _, name in mask_models(cfg)),
            *((name, "fp32") for name in landmark_models(cfg).values())]


def profile_models() -> dict[str, list[tuple[str, str]]]:
    """Profile name → the models it needs (for ``render models list`` and ``fetch profile=all``)."""
    return {name: required_models(load_config({"profile": name}, env={}))
            for name in profile_names()}

