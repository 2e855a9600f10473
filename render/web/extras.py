"""What a student may add to a render beside the profile, each a field of the form that becomes
processors of the job's chain (built here, never from names the client sends) and their keys:

* ``upscale=yes``: the whole frame upscaled ×2 (the frame enhancer ``real_esrgan_x2``, last);
* ``background=yes``: the background removed (the background remover, first; a video's result is
  then a WebM and a picture's a PNG, both with the matte as their alpha channel);
* ``expression=yes`` or ``expression=N`` (0..100, ``expression.factor``; yes: its default): the
  target's own expression given back to the swapped face (the expression restorer);
* ``age=N`` (-100..100, ``age_modifier.direction``: years older +, younger -): the age modifier;
* a ``voice`` file (``render.web.voice``) and ``voice_mix=replace|mix`` (``lip_sync.audio_mix``):
  the lips moved to that voice (the lip syncer, ``lip_sync.audio``);
* ``mouth=yes``: the target's own mouth (lips, teeth, tongue) kept through the swap, so speech
  looks natural: ``mask.keep=mouth``, a key of the profile's own swap rather than a processor
  (:data:`KEY_EXTRAS`: such an extra adds its keys, not a step of the chain).

A value is checked by the schema's own validation (``render.config.validate.coerce``) against the
range its processor declares; 0 (age, expression) or no (a box) adds nothing. The face edits go
right after the swap, in this order: the expression restorer first, since it gives back the
expression the swap changed and must see the swapped face before anything else redraws it (after
the lip syncer it would put the old mouth back); then the age modifier, which redraws the whole
face (mouth included) as it now looks; then the lip syncer, so that it moves the final mouth. The
profile's own steps after the swap (the face enhancer, where the profile turns it on) then
sharpen the edited face, Wav2Lip's 96-px mouth included, as FaceFusion's lip syncer is used.

An extra is offered only where every model it loads is pinned and in the server's models folder
(its model, the models that one ``needs``, the models its options name — the lip syncer's voice
extractor — and the 68-point landmarker its processor asks for, which depends on the profile; for
a key extra, the landmark models a render with its keys loads, ``render.models.needs``, and the
parser the keep mask then takes the mouth from): a student cannot fetch one. :class:`Offer`
reads that at most every ``every`` seconds; a form that asks for an extra anyway gets one line
naming the missing models.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..config import SCHEMA, Config, load_config
from ..config.validate import coerce
from ..errors import ConfigError, ModelError
from ..models.manifest import load_manifest
from ..models.needs import landmark_models, mask_models
from ..models.store import ModelStore, default_stamp_dir
from ..processors import registry
from .errors import Refused
from .uploads import Received
from .voice import Voice, check_voice

#: form field → the processor it adds (the order the pages name them in)
EXTRAS = {"upscale": "frame_enhance", "background": "background", "expression": "expression",
          "age": "age_modifier", "voice": "lip_sync"}
#: form field (a box) → the keys it adds, for an extra that is a setting of the profile's own
#: steps rather than a processor: it adds no step to the chain
KEY_EXTRAS = {"mouth": {"mask.keep": "mouth"}}
#: every extra, in the order the pages name them
ALL = (*EXTRAS, *KEY_EXTRAS)
#: the face edits, in their order in the chain (right after the swap)
FACE_EDITS = ("expression", "age", "voice")
#: the frame enhancer a student's upscale uses: ×2, BSD licensed
UPSCALE_MODEL = "real_esrgan_x2"
#: the keys an extra always adds to the job
FIXED = {"upscale": {"frame_enhance.model": UPSCALE_MODEL}, **KEY_EXTRAS}
#: form field → the schema key its value is
KEYS = {"expression": "expression.factor", "age": "age_modifier.direction",
        "voice_mix": "lip_sync.audio_mix"}
#: how a refusal names an extra
LABELS = {"upscale": "upscale", "background": "background removal", "expression":
          "expression", "age": "age", "voice": "lip sync (the voice file)",
          "mouth": "keeping the video's own mouth"}
#: how a job's view names a key extra it asked for
SAID = {"mouth": "own mouth kept"}
#: the boxes' models, named by :func:`unavailable` (which is not told what is missing)
MODELS = {"upscale": UPSCALE_MODEL, "background": "modnet"}
YES, NO = ("yes", "on", "true", "1"), ("", "no", "off", "false")
#: the words that ask for the expression restorer at its default share ("1" is a share of 1)
EXPRESSION_YES = ("yes", "on", "true")


def ticked(fields: Mapping[str, str], name: str) -> bool:
    return fields.get(name, "").lower() in YES


# -- what the server offers ----------------------------------------------------------------------
def models_of(cfg: Config, extra: str) -> list[str]:
    """The manifest names an extra's processor loads with ``cfg`` (its ``needs`` not followed);
    for a key extra, :func:`key_models`."""
    if extra in KEY_EXTRAS:
        return key_models(cfg, extra)
    processor = registry.processor(EXTRAS[extra])
    assert processor is not None, extra
    section = getattr(cfg, processor.name)
    fixed = {k.split(".", 1)[1]: v for k, v in FIXED.get(extra, {}).items()}
    section = dataclasses.replace(section, **fixed) if fixed else section
    names = [getattr(section, "model", "")]
    if processor.option_models:
        names += processor.option_models(dataclasses.asdict(section))
    if processor.landmarks and processor.landmarks(section):
        names.append(cfg.landmark.model or cfg.landmark.estimator)
    return [n for n in dict.fromkeys(names) if n]


#: what a key extra is said to need when its keys cannot be had with the server's config (its
#: landmark or mask keys switched off): a name no manifest holds, so the extra is not offered
NO_LANDMARKER = "a 68-point landmarker"


def key_models(cfg: Config, extra: str) -> list[str]:
    """The landmark models a render with ``cfg`` loads once ``extra``'s keys are set
    (render.models.needs), and the parser whose classes the keep mask then takes (``mask.keep``
    with ``mask.parser`` on): the models ``mask.keep=mouth`` finds the mouth with."""
    sections: dict[str, dict[str, Any]] = {}
    for key, text in KEY_EXTRAS[extra].items():
        section, name = key.split(".", 1)
        sections.setdefault(section, {})[name] = coerce(SCHEMA[key], text, key)
    keyed = dataclasses.replace(cfg, **{s: dataclasses.replace(getattr(cfg, s), **values)
                                        for s, values in sections.items()})
    try:
        names = [*landmark_models(keyed).values(),
                 *(n for key, n in mask_models(keyed) if key == "mask.parser" and keyed.mask.keep)]
    except ConfigError:
        return [NO_LANDMARKER]
    return list(dict.fromkeys(names))


def missing_models(cfg: Config) -> dict[str, list[str]]:
    """Extra → the models it would load that are not pinned and in place (empty: offered)."""
    return _missing(cfg)[0]


def _missing(cfg: Config) -> tuple[dict[str, list[str]], frozenset[str]]:
    """:func:`missing_models`, and the names the manifests hold."""
    manifest = load_manifest(cfg.models_dir, [Path(p) for p in cfg.models.manifest])
    store = ModelStore(cfg.models_dir, manifest, default_stamp_dir(cfg.cache_path))
    out = {}
    for extra in ALL:
        todo, seen, missing = models_of(cfg, extra), set(), []
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.add(name)
            try:
                entry = manifest.get(name)
            except ModelError:
                missing.append(name)
                continue
            if not (entry.sha256 and store.status(entry) in ("verified", "present")):
                missing.append(name)
            todo += entry.needs
        out[extra] = missing
    return out, frozenset(manifest.names())


def available(cfg: Config) -> list[str]:
    """The extras a render with ``cfg`` can have here."""
    return [extra for extra, missing in missing_models(cfg).items() if not missing]


def why_not(extra: str, missing: Sequence[str], profile: str = "",
            manifest_names: Iterable[str] | None = None) -> str:
    """One line: why ``extra`` is not offered, and what the teacher does about it."""
    known = None if manifest_names is None else set(manifest_names)
    unknown = [n for n in missing if known is not None and n not in known]
    fetch = [n for n in missing if n not in unknown]
    is_ = lambda names: "is" if len(names) == 1 else "are"        # noqa: E731
    parts = [f"{', '.join(fetch)} {is_(fetch)} not fetched (the teacher can run `render models "
             f"fetch {' '.join(fetch)}`)"] if fetch else []
    if unknown:
        parts.append(f"{', '.join(unknown)} {is_(unknown)} not in the server's models manifest "
                     f"(the teacher adds {'it' if len(unknown) == 1 else 'them'}: "
                     f"docs/models.md)")
    where = f" with profile {profile}" if profile else ""
    return (f"{LABELS[extra]} is not offered on this server{where}: its "
            f"model{'' if len(missing) == 1 else 's'} {' and '.join(parts)}")


class Offer:
    """The extras on offer, per profile, read from the models folder at most every ``every``
    seconds (it reads the manifests), so the pages' settings stay quick; a model fetched
    meanwhile shows within that time."""

    def __init__(self, cfg: Config, overrides: Mapping[str, str], every: float = 30.0) -> None:
        self.cfg, self.overrides, self.every = cfg, dict(overrides), every
        self._seen: dict[str, tuple[float, dict[str, list[str]], frozenset[str]]] = {}
        self._lock = threading.Lock()

    def _read(self, profile: str) -> tuple[dict[str, list[str]], frozenset[str]]:
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(profile)
            if seen is None or now - seen[0] > self.every:
                cfg = load_config({**self.overrides, "profile": profile})
                seen = self._seen[profile] = (now, *_missing(cfg))
            return seen[1], seen[2]

    def offered(self, profiles: Iterable[str]) -> list[str]:
        """The extras some of ``profiles`` can have (in :data:`ALL` order)."""
        found = {e for p in profiles for e, missing in self._read(p)[0].items() if not missing}
        return [e for e in ALL if e in found]

    def by_profile(self, profiles: Iterable[str]) -> dict[str, list[str]]:
        return {p: self.offered([p]) for p in profiles}

    def refusal(self, extras: Iterable[str], profile: str) -> str | None:
        """Why one of ``extras`` cannot be had with ``profile`` (one line), or None."""
        missing, names = self._read(profile)
        for extra in extras:
            if missing.get(extra):
                return why_not(extra, missing[extra], profile, names)
        return None


def unavailable(fields: Mapping[str, str], offered: list[str]) -> str | None:
    """Why a ticked box (upscale, background) cannot be had here (one line), or None."""
    for extra in MODELS:
        if ticked(fields, extra) and extra not in offered:
            return why_not(extra, [MODELS[extra]])
    return None


def ranges() -> dict[str, dict[str, Any]]:
    """The sliders' ranges and starting values, as their processors declare them."""
    out = {}
    for field in ("expression", "age"):
        key = SCHEMA[KEYS[field]]
        out[field] = {"key": key.name, "min": key.meta["min"], "max": key.meta["max"],
                      "default": key.default}
    return out


# -- what a form asks for ------------------------------------------------------------------------
def value(fields: Mapping[str, str], field: str) -> Any:
    """The field's value as its key's type, held to the key's declared range (Refused 422)."""
    try:
        return coerce(SCHEMA[KEYS[field]], fields[field].strip(), field)
    except ConfigError as exc:
        raise Refused(422, str(exc)) from None


@dataclass
class Asked:
    """The extras one form asks for, checked; the job's chain and keys from them."""

    upscale: bool = False
    background: bool = False
    expression: int = 0               # expression.factor; 0: no expression restorer
    age: int = 0                      # age_modifier.direction; 0: no age modifier
    voice: Voice | None = None        # the lip syncer's voice; None: no lip syncer
    voice_mix: str = ""               # lip_sync.audio_mix as given ("": its default)
    mouth: bool = False               # mask.keep=mouth (a key extra)

    def names(self) -> list[str]:
        on = {"upscale": self.upscale, "background": self.background,
              "expression": bool(self.expression), "age": bool(self.age),
              "voice": self.voice is not None, **{e: getattr(self, e) for e in KEY_EXTRAS}}
        return [extra for extra in ALL if on[extra]]

    def store(self, folder: Path) -> list[tuple[str, str, Path, int, dict[str, Any]]]:
        return self.voice.store(folder) if self.voice is not None else []

    def settings(self, profile: str) -> dict[str, str]:
        """The job keys for a render with ``profile``; empty when nothing is asked for, no
        ``processors`` when only key extras are."""
        names = self.names()
        out = {}
        if any(extra in EXTRAS for extra in names):
            chain = list(load_config({"profile": profile}, env={}).processors)
            at = chain.index("swap") + 1 if "swap" in chain else 0
            chain[at:at] = [EXTRAS[e] for e in FACE_EDITS if e in names]
            chain = [*(["background"] if self.background else []), *chain,
                     *(["frame_enhance"] if self.upscale else [])]
            out["processors"] = ",".join(chain)
        for extra in names:
            out.update(FIXED.get(extra, {}))
        if self.expression:
            out[KEYS["expression"]] = str(self.expression)
        if self.age:
            out[KEYS["age"]] = str(self.age)
        if self.voice is not None:
            assert self.voice.path is not None, "store() first"
            out["lip_sync.audio"] = str(self.voice.path)
            if self.voice_mix:
                out[KEYS["voice_mix"]] = self.voice_mix
        return out

    def suffix(self, is_image: bool, suffix: str) -> str:
        """The result's extension: with the background removed, one that carries alpha."""
        if self.background:
            return ".png" if is_image else ".webm"
        return suffix


def read(received: Received, offer: Offer, profile: str) -> Asked:
    """What the form asks for beside the swap, each value in its declared range and each extra
    offered with ``profile`` (Refused 422 with one line). The voice file is checked later, with
    the target (:func:`check`)."""
    fields = received.fields
    asked = Asked(upscale=ticked(fields, "upscale"), background=ticked(fields, "background"),
                  **{extra: ticked(fields, extra) for extra in KEY_EXTRAS})
    if fields.get("age", "").strip():
        asked.age = value(fields, "age")
    text = fields.get("expression", "").strip().lower()
    if text in EXPRESSION_YES:
        asked.expression = SCHEMA[KEYS["expression"]].default
    elif text not in NO:
        asked.expression = value(fields, "expression")
    voice = received.files.get("voice")
    if fields.get("voice_mix", "").strip():
        if voice is None:
            raise Refused(422, "voice_mix given without a voice file: add the voice (voice) or "
                               "leave it out")
        asked.voice_mix = value(fields, "voice_mix")
    wanted = asked.names() + (["voice"] if voice is not None else [])
    refused = offer.refusal(wanted, profile)
    if refused:
        raise Refused(422, refused)
    return asked


def check(asked: Asked, received: Received, target_is_image: bool, max_seconds: float) -> None:
    """The voice file, if the form has one, checked beside the target (render.web.voice)."""
    voice = received.files.get("voice")
    if voice is not None:
        asked.voice = check_voice(voice, target_is_image, max_seconds)


# -- what a job asked for ------------------------------------------------------------------------
def describe(settings: Mapping[str, str]) -> list[str]:
    """The extras a job's settings hold, as the pages name them: "upscale", "background",
    "expression kept" (with its share where it is not the default), "age +30", "lips to your
    voice" ("… over the clip's sound" when mixed), then each key extra whose keys it holds
    (:data:`SAID`: "own mouth kept")."""
    chain = str(settings.get("processors", "")).split(",")
    out = []
    for extra, processor in EXTRAS.items():
        if processor not in chain:
            continue
        if extra == "expression":
            factor = str(settings.get(KEYS["expression"], SCHEMA[KEYS["expression"]].default))
            default = str(SCHEMA[KEYS["expression"]].default)
            out.append("expression kept" + ("" if factor == default else f" ({factor} %)"))
        elif extra == "age":
            years = str(settings.get(KEYS["age"], "0")).strip()
            out.append(f"age {'+' if years[:1] not in '-+0' else ''}{years}")
        elif extra == "voice":
            mixed = settings.get(KEYS["voice_mix"]) == "mix"
            out.append("lips to your voice" + (" over the clip's sound" if mixed else ""))
        else:
            out.append(extra)
    for extra, keys in KEY_EXTRAS.items():
        if all(str(settings.get(k, "")) == v for k, v in keys.items()):
            out.append(SAID[extra])
    return out
