"""Profiles + ``key=value`` overrides → one validated, immutable :class:`Config`.

The schema is the dataclasses below: every leaf field carries its type (the annotation), its
default and a :func:`spec` with help text and constraints. Profile YAML files are nested
mappings of the same shape; command-line overrides use dotted keys (``detect.size=640``).
Nothing here is module-level mutable state: :func:`load_config` returns a fresh object that the
caller passes down.
"""
from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, get_origin, get_type_hints

import yaml

from ..errors import ConfigError, UsageError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PROFILES_DIR = PROJECT_ROOT / "profiles"

PROVIDERS = ("tensorrt", "cuda", "cpu")
MEMORY_STRATEGIES = ("low", "moderate", "high")
PRECISIONS = ("fp32", "fp16")


#: how a key enters the job key (the hash over everything that decides an output's bytes):
#: "bytes" — always; "never" — it cannot change the bytes (paths, threads, progress, locks), so
#: resuming with another value still resumes; "unless-default" — a key added later whose default
#: reproduces the earlier behaviour: left out at its default, so earlier job keys (and their work
#: folders, reports and marks) stay valid
KEYED = ("bytes", "never", "unless-default")


def spec(help: str, *, choices: Sequence[str] | None = None, min: float | None = None,
         max: float | None = None, multiple: int | None = None, env: str | None = None,
         keyed: str = "bytes") -> dict:
    """Field metadata: help text, constraints checked by :func:`_coerce`, and ``keyed`` (KEYED)."""
    assert keyed in KEYED, keyed
    return {"help": help, "choices": tuple(choices) if choices else None, "min": min, "max": max,
            "multiple": multiple, "env": env, "keyed": keyed}


def _f(default: Any, help: str, **kw: Any) -> Any:
    if isinstance(default, list):
        return field(default_factory=lambda d=tuple(default): d, metadata=spec(help, **kw))
    return field(default=default, metadata=spec(help, **kw))


@dataclass(frozen=True)
class Models:
    dir: str = _f("", "folder holding the model files (default: $RENDER_MODELS_DIR or "
                  "~/.cache/render/models)", env="RENDER_MODELS_DIR", keyed="never")
    manifest: tuple[str, ...] = _f([], "extra manifest files layered over the shipped one (comma separated)",
                                   keyed="never")


@dataclass(frozen=True)
class Detect:
    model: str = _f("scrfd_2.5g", "face detector (manifest name; SCRFD/RetinaFace or YuNet contract)")
    size: int = _f(640, "detector input size in px; frames are downscaled to fit", min=128, max=1280,
                   multiple=32)
    score: float = _f(0.5, "minimum detection score", min=0.0, max=1.0)
    nms: float = _f(0.4, "NMS IoU threshold", min=0.05, max=0.95)
    every: int = _f(1, "run the detector every N frames and track faces in between (1 = every frame)",
                    min=1, max=30)


@dataclass(frozen=True)
class Embed:
    model: str = _f("arcface_w600k_r50", "face embedder (ArcFace contract)")


@dataclass(frozen=True)
class Swap:
    model: str = _f("inswapper_128", "face swapper (inswapper contract)")
    precision: str = _f("fp32", "swapper weights precision", choices=PRECISIONS)


@dataclass(frozen=True)
class Enhance:
    enabled: bool = _f(False, "run the face enhancer after swapping")
    model: str = _f("gfpgan_1.4", "face enhancer (GFPGAN contract)")
    precision: str = _f("fp32", "enhancer weights precision", choices=PRECISIONS)
    blend: float = _f(0.8, "share of the enhanced face in the result", min=0.0, max=1.0)


@dataclass(frozen=True)
class Mask:
    type: str = _f("box", "paste-back mask", choices=("box", "feather"))
    padding: float = _f(0.0, "share of the crop side cut from each edge of the mask", min=0.0, max=0.4)
    blur: float = _f(0.3, "feather width as a share of the crop side (feather mask only)",
                     min=0.0, max=1.0)


@dataclass(frozen=True)
class Select:
    mode: str = _f("one", "which faces to swap: one (largest), many (all), reference (like the "
                   "reference face)", choices=("one", "many", "reference"))
    reference: str = _f("", "reference face image for mode=reference (default: the source image)")
    distance: float = _f(0.6, "max identity distance (1 - cosine) for mode=reference", min=0.0, max=2.0)
    embed_every: int = _f(25, "mode=reference: a face followed from detection to detection is "
                          "embedded again every N detections (1 = every frame)", min=1, max=1000)
    margin: float = _f(0.1, "mode=reference: a face whose distance was within this of "
                       "select.distance is embedded again at every detection", min=0.0, max=2.0)


@dataclass(frozen=True)
class Execution:
    providers: tuple[str, ...] = _f(["tensorrt", "cuda", "cpu"], "execution providers, tried in order",
                              choices=PROVIDERS)
    memory_strategy: str = _f("moderate", "memory strategy (see README)", choices=MEMORY_STRATEGIES,
                              keyed="never")
    frames_in_flight: int = _f(0, "frames decoded but not yet encoded (0 = from memory_strategy)",
                               min=0, max=256, keyed="never")
    batch_size: int = _f(0, "face crops per swapper/enhancer call when the model allows "
                         "(0 = from memory_strategy)", min=0, max=64, keyed="never")
    threads: int = _f(0, "ONNX Runtime intra-op threads per model call (0 = the cores shared out "
                      "over the lanes; ffmpeg at nice 19 while the models are the busier side, "
                      "half the cores for the models when ffmpeg is)", min=0, max=256,
                      keyed="never")
    lanes: int = _f(0, "batches of frames swapped and enhanced at once, each on its own thread "
                    "(0 = 2 on the CPU provider when execution.threads=0, else 1)", min=0, max=64,
                    keyed="never")
    graph_optimization: str = _f("all", "ONNX Runtime graph optimisation level",
                                 choices=("disable", "basic", "extended", "all"))
    graph_cache: bool = _f(True, "on the CPU provider, keep ONNX Runtime's optimised graph of each "
                           "large model in cache_dir/onnxruntime: later renders load it without "
                           "optimising again (same outputs; disk about the model's fp32 size)",
                           keyed="never")
    graph_cache_min_mb: int = _f(32, "models smaller than this (MiB) are optimised at every load, "
                                 "not cached", min=0, max=1 << 20, keyed="never")
    gpu_mem_limit_mb: int = _f(0, "CUDA arena limit in MiB (0 = from memory_strategy)", min=0,
                               max=1 << 20, keyed="never")
    trt_workspace_mb: int = _f(0, "TensorRT workspace cap in MiB (0 = from memory_strategy)", min=0,
                               max=1 << 20, keyed="never")


@dataclass(frozen=True)
class Encode:
    codec: str = _f("libx264", "video encoder (ffmpeg name; h264_nvenc / hevc_nvenc fall back to "
                    "libx264 / libx265 with one log line where NVENC is missing, e.g. H100/H200)")
    crf: int = _f(18, "constant rate factor (lower = better)", min=0, max=63)
    preset: str = _f("medium", "encoder preset")
    pix_fmt: str = _f("yuv420p", "output pixel format")
    threads: int = _f(0, "encoder threads (0 = ffmpeg's choice; pin it for bit-identical output "
                      "across machines with different core counts)", min=0, max=64)


@dataclass(frozen=True)
class Decode:
    hwaccel: str = _f("none", "decode on the GPU: cuda (NVDEC), auto (cuda where it works), none; "
                      "without a working NVDEC it falls back to software with one log line",
                      choices=("none", "cuda", "auto"))


@dataclass(frozen=True)
class Segment:
    seconds: float = _f(10.0, "length of a committed segment in seconds (a crash loses at most one; "
                        "boundaries are also multiples of detect.every)", min=0.5, max=3600.0)


@dataclass(frozen=True)
class Mark:
    enabled: bool = _f(True, "mark outputs as synthetic media: a metadata tag and a signed C2PA "
                       "manifest (the report records when this is off)")
    cert: str = _f("", "C2PA signing certificate chain (PEM, signing certificate first; default: a "
                   "local certificate created in cache_dir/c2pa)", keyed="never")
    key: str = _f("", "private key (PEM) of mark.cert", keyed="never")


@dataclass(frozen=True)
class Lock:
    slots: int = _f(1, "renders one device may run at once (one lock file per slot)", min=1, max=64,
                    keyed="never")
    timeout: float = _f(0.0, "seconds to wait for the device lock before giving up (0 = wait as "
                        "long as it takes)", min=0.0, keyed="never")
    device: str = _f("", "lock this device name instead of the detected GPU (or cpu); 'none' "
                     "takes no lock", keyed="never")


@dataclass(frozen=True)
class Shard:
    index: int = _f(-1, "which shard this process renders (0-based; -1 = from SLURM_ARRAY_TASK_ID "
                    "or JOB_COMPLETION_INDEX); `shard=I/N` sets index and count", min=-1,
                    keyed="never")
    count: int = _f(0, "render only this shard's segments of N, into the shared work folder "
                    "(0 = a whole render); `render assemble` joins them", min=0, max=100000,
                    keyed="never")


@dataclass(frozen=True)
class Config:
    profile: str = _f("moderate", "profile name (profiles/NAME.yaml), a path to a YAML file, or auto "
                      "(low/moderate/high by the GPU's memory; low on the CPU without one)",
                      keyed="never")
    source: str = _f("", "image with the source face (default: input_dir/source.jpg|png)",
                     keyed="never")
    target: str = _f("", "video or image to render (default: every video and image in input_dir)",
                     keyed="never")
    output: str = _f("", "output file (default: output_dir/<target name>)", keyed="never")
    input_dir: str = _f("", "folder rendered when no target is given", env="RENDER_INPUT_DIR",
                        keyed="never")
    output_dir: str = _f("", "folder for outputs when no output is given", env="RENDER_OUTPUT_DIR",
                         keyed="never")
    cache_dir: str = _f("", "cache folder: source embeddings, TensorRT engines, verified-stamps "
                        "(default: $RENDER_CACHE_DIR or ~/.cache/render)", env="RENDER_CACHE_DIR",
                        keyed="never")
    preview: bool = _f(False, "render a quick preview at preview_height")
    preview_height: int = _f(720, "output height when preview=true", min=64, max=4320, multiple=2)
    trim: str = _f("", "render only START-END: seconds (12.5-20) or frames with an f (300f-500f)")
    progress: str = _f("auto", "progress display", choices=("auto", "bar", "lines", "off"),
                       keyed="never")
    lock_dir: str = _f("", "folder of the device locks, shared by every render on this machine "
                       "(default: cache_dir/locks)", env="RENDER_LOCK_DIR", keyed="never")
    spool_dir: str = _f("", "job spool of render submit / render work (default: cache_dir/jobs)",
                        env="RENDER_SPOOL_DIR", keyed="never")
    state_dir: str = _f("", "the web page's accounts, sessions and uploads (default: "
                        "cache_dir/web)", env="RENDER_STATE_DIR", keyed="never")
    skip_done: bool = _f(True, "skip a target whose output is complete and whose report has this "
                         "render's job key (idempotent re-runs)", keyed="never")
    allow_partial: bool = _f(False, "render the readable part of a truncated target instead of "
                             "failing (the output is shorter, and says so)", keyed="never")
    source_face: int = _f(0, "which face of the source image to use when it has several: 0 = the "
                          "largest, 1 = the next largest, ...", min=0, max=64)
    processors: tuple[str, ...] = _f(["swap", "enhance"], "face processors run on each selected "
                                     "face, in order: a section (swap, enhance; a section with "
                                     "enabled=false is skipped) or a model's manifest name",
                                     keyed="unless-default")
    models: Models = field(default_factory=Models)
    detect: Detect = field(default_factory=Detect)
    embed: Embed = field(default_factory=Embed)
    swap: Swap = field(default_factory=Swap)
    enhance: Enhance = field(default_factory=Enhance)
    mask: Mask = field(default_factory=Mask)
    select: Select = field(default_factory=Select)
    execution: Execution = field(default_factory=Execution)
    encode: Encode = field(default_factory=Encode)
    decode: Decode = field(default_factory=Decode)
    segment: Segment = field(default_factory=Segment)
    mark: Mark = field(default_factory=Mark)
    lock: Lock = field(default_factory=Lock)
    shard: Shard = field(default_factory=Shard)
    #: the keys given on the command line (not a key itself): a forced value is an error where a
    #: profile's value would be adapted (e.g. the codec of a .webm output)
    explicit: frozenset = field(default=frozenset(), metadata={"internal": True})

    # -- derived views -------------------------------------------------------------------------
    @property
    def models_dir(self) -> Path:
        return Path(self.models.dir).expanduser() if self.models.dir else \
            Path("~/.cache/render/models").expanduser()

    @property
    def cache_path(self) -> Path:
        return Path(self.cache_dir).expanduser() if self.cache_dir else \
            Path("~/.cache/render").expanduser()

    @property
    def lock_path(self) -> Path:
        return Path(self.lock_dir).expanduser() if self.lock_dir else self.cache_path / "locks"

    @property
    def state_path(self) -> Path:
        return Path(self.state_dir).expanduser() if self.state_dir else self.cache_path / "web"

    @property
    def spool_path(self) -> Path:
        return Path(self.spool_dir).expanduser() if self.spool_dir else self.cache_path / "jobs"

    def get(self, key: str) -> Any:
        node: Any = self
        for part in key.split("."):
            node = getattr(node, part)
        return node


JOB_KEYS = ("profile",)  # keys a profile file may not set


@dataclass(frozen=True)
class Key:
    """One leaf of the schema."""

    name: str           # dotted
    type: Any
    default: Any
    meta: Mapping[str, Any]

    def in_job_key(self, value: Any) -> bool:
        """Whether ``value`` of this key enters the job key (see KEYED)."""
        keyed = self.meta.get("keyed", "bytes")
        if keyed == "unless-default":
            default = list(self.default) if isinstance(self.default, tuple) else self.default
            return value != default
        return keyed == "bytes"


def _walk(cls: type, prefix: str = "") -> list[Key]:
    hints = get_type_hints(cls)
    keys: list[Key] = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("internal"):
            continue
        t = hints[f.name]
        if dataclasses.is_dataclass(t):
            keys.extend(_walk(t, prefix + f.name + "."))
        else:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            keys.append(Key(prefix + f.name, t, default, f.metadata))
    return keys


SCHEMA: dict[str, Key] = {k.name: k for k in _walk(Config)}


def nearest_keys(name: str, n: int = 3) -> list[str]:
    names = list(SCHEMA)
    close = difflib.get_close_matches(name, names, n=n, cutoff=0.5)
    if not close:  # try the last component: "size" → detect.size
        tail = name.split(".")[-1]
        close = [k for k in names if k.split(".")[-1] == tail][:n]
    if not close:
        close = difflib.get_close_matches(name, names, n=n, cutoff=0.3)
    return close


def unknown_key_message(name: str, where: str) -> str:
    close = nearest_keys(name)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see render --help"
    return f"{where}: unknown key '{name}'{hint}"


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _describe(key: Key) -> str:
    t = key.type
    m = key.meta
    if get_origin(t) is tuple:
        base = "a list of " + ("|".join(m["choices"]) if m["choices"] else "strings")
        return base
    if m["choices"]:
        return "one of " + ", ".join(m["choices"])
    name = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}[t]
    parts = [name]
    if m["min"] is not None and m["max"] is not None:
        parts.append(f"between {m['min']:g} and {m['max']:g}")
    if m["multiple"]:
        parts.append(f"(a multiple of {m['multiple']})")
    return " ".join(parts)


def _coerce(key: Key, value: Any, where: str) -> Any:
    """Turn a YAML or command-line value into the key's type, or raise ConfigError."""
    t, m = key.type, key.meta

    def bad() -> ConfigError:
        return ConfigError(f"{where}: {key.name}: expected {_describe(key)}, got {value!r}")

    if get_origin(t) is tuple:
        if isinstance(value, str):
            items = [v.strip() for v in value.split(",") if v.strip()]
        elif isinstance(value, (list, tuple)):
            items = value
        else:
            raise bad()
        if not all(isinstance(i, str) for i in items):
            raise bad()
        if m["choices"] and any(i not in m["choices"] for i in items):
            raise bad()
        return tuple(items)
    if t is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise bad()
    if t is int:
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, str):
            try:
                value = int(value, 10)
            except ValueError:
                raise bad() from None
        if not isinstance(value, int):
            raise bad()
    elif t is float:
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise bad() from None
        if not isinstance(value, (int, float)):
            raise bad()
        value = float(value)
        if not math.isfinite(value):   # nan passes every comparison with min and max
            raise bad()
    elif t is str:
        if value is None:
            value = ""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise bad()
        if m["choices"] and value not in m["choices"]:
            raise bad()
        return value
    if m["min"] is not None and value < m["min"]:
        raise bad()
    if m["max"] is not None and value > m["max"]:
        raise bad()
    if m["multiple"] and value % m["multiple"]:
        raise bad()
    return value


def _flatten(data: Mapping[str, Any], where: str, prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for k, v in data.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping):
            if not any(s.startswith(name + ".") for s in SCHEMA):
                raise ConfigError(unknown_key_message(name, where))
            flat.update(_flatten(v, where, name + "."))
        else:
            flat[name] = v
    return flat


def profile_path(profile: str) -> Path:
    """A profile is a name in profiles/ or a path to a YAML file."""
    if profile.endswith((".yaml", ".yml")) or os.sep in profile:
        return Path(profile)
    return PROFILES_DIR / f"{profile}.yaml"


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))


def read_profile(profile: str) -> tuple[Path, dict[str, Any]]:
    """Read a profile file into flat, validated ``{dotted key: value}``."""
    path = profile_path(profile)
    if not path.is_file():
        names = ", ".join(profile_names())
        raise ConfigError(f"unknown profile '{profile}': no file {path} (profiles: {names})")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}:{line} is not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping of sections, got {type(data).__name__}")
    flat = _flatten(data, str(path))
    out = {}
    for name, value in flat.items():
        if name not in SCHEMA:
            raise ConfigError(unknown_key_message(name, str(path)))
        if name in JOB_KEYS:
            raise ConfigError(f"{path}: key '{name}' cannot be set in a profile")
        out[name] = _coerce(SCHEMA[name], value, str(path))
    return path, out


def parse_overrides(args: Sequence[str]) -> dict[str, str]:
    """``["a.b=1", "c=x"]`` → ``{"a.b": "1", "c": "x"}``; unknown keys are usage errors."""
    out: dict[str, str] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"argument '{arg}' is not key=value; see render --help")
        if key not in SCHEMA:
            raise UsageError(unknown_key_message(key, "command line"))
        out[key] = value
    return out


def _build(cls: type, flat: Mapping[str, Any], prefix: str = "") -> Any:
    hints = get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        if f.metadata.get("internal"):
            if prefix + f.name in flat:
                kwargs[f.name] = flat[prefix + f.name]
            continue
        if dataclasses.is_dataclass(t):
            kwargs[f.name] = _build(t, flat, prefix + f.name + ".")
        elif prefix + f.name in flat:
            kwargs[f.name] = flat[prefix + f.name]
    return cls(**kwargs)


def load_config(overrides: Mapping[str, str] | None = None,
                env: Mapping[str, str] | None = None, *,
                auto: Callable[[], tuple[str, bool, str]] | None = None) -> Config:
    """Schema defaults ← environment defaults ← profile file ← command-line overrides.

    ``profile=auto`` picks low/moderate/high from GPU 0's memory (``auto``: the chooser, default
    :func:`render.gpus.auto_profile`; a machine without a GPU gets low with the CPU provider)."""
    overrides = dict(overrides or {})
    env = os.environ if env is None else env
    flat: dict[str, Any] = {}
    for key in SCHEMA.values():
        var = key.meta.get("env")
        if var and env.get(var):
            flat[key.name] = _coerce(key, env[var], f"environment {var}")
    profile = overrides.get("profile", SCHEMA["profile"].default)
    if profile == "auto":
        from ..gpus import auto_profile

        profile, cpu_only, why = auto() if auto is not None else auto_profile()
        logging.getLogger(__name__).info("%s", why)
        if cpu_only and "execution.providers" not in overrides:
            overrides["execution.providers"] = "cpu"
    _, from_profile = read_profile(profile)
    flat.update(from_profile)
    for name, value in overrides.items():
        if name not in SCHEMA:
            raise UsageError(unknown_key_message(name, "command line"))
        flat[name] = _coerce(SCHEMA[name], value, "command line")
    flat["profile"] = profile
    flat["explicit"] = frozenset(overrides)
    cfg = _build(Config, flat)
    parse_trim(cfg.trim)  # validate early
    return cfg


def config_from_values(values: Mapping[str, Any], explicit: Sequence[str] = ()) -> Config:
    """The Config whose every key has the value in ``values`` (e.g. a report's ``config``), each
    validated as if it came from a profile; ``explicit``: the keys given on the command line then."""
    flat: dict[str, Any] = {}
    for name, value in values.items():
        if name not in SCHEMA:
            raise ConfigError(unknown_key_message(name, "report config"))
        if name == "profile":
            flat[name] = str(value)
            continue
        flat[name] = _coerce(SCHEMA[name], value, "report config")
    flat["explicit"] = frozenset(explicit)
    cfg = _build(Config, flat)
    parse_trim(cfg.trim)
    return cfg


# -- trims ----------------------------------------------------------------------------------------
_TRIM_PART = r"(\d+(?:\.\d+)?)(f|s)?"
_TRIM = re.compile(rf"^\s*{_TRIM_PART}\s*-\s*(?:{_TRIM_PART})?\s*$")


@dataclass(frozen=True)
class Trim:
    start: float
    end: float | None   # None = to the end
    unit: str           # "s" seconds or "f" frames

    def seconds(self, fps: Any) -> tuple[float, float | None]:
        if self.unit == "s":
            return self.start, self.end
        return self.start / float(fps), (None if self.end is None else self.end / float(fps))


def parse_trim(text: str) -> Trim | None:
    if not text:
        return None
    m = _TRIM.match(text)
    if not m:
        raise ConfigError(f"trim: expected START-END in seconds (12.5-20) or frames (300f-500f), "
                          f"got {text!r}")
    start, u1, end, u2 = m.groups()
    unit = u1 or u2 or "s"
    if u1 and u2 and u1 != u2:
        raise ConfigError(f"trim: START and END must use the same unit, got {text!r}")
    s = float(start)
    e = float(end) if end is not None else None
    if e is not None and e <= s:
        raise ConfigError(f"trim: END must be after START, got {text!r}")
    return Trim(s, e, unit)


# -- what a config needs ----------------------------------------------------------------------------
def required_models(cfg: Config) -> list[tuple[str, str]]:
    """(manifest name, precision) of every model a render with ``cfg`` loads."""
    from ..processors.steps import chain_steps

    return [(cfg.detect.model, "fp32"), (cfg.embed.model, "fp32"),
            *((s.model, s.precision) for s in chain_steps(cfg))]


def profile_models() -> dict[str, list[tuple[str, str]]]:
    """Profile name → the models it needs (for ``render models list`` and ``fetch profile=all``)."""
    return {name: required_models(load_config({"profile": name}, env={}))
            for name in profile_names()}


def help_text(cfg: Config | None = None) -> str:
    """Every key with its default (the profile's value when a profile is given) and meaning."""
    rows = []
    for key in SCHEMA.values():
        value = cfg.get(key.name) if cfg is not None else key.default
        if isinstance(value, (list, tuple)):
            value = ",".join(value)
        elif isinstance(value, bool):
            value = str(value).lower()
        rows.append((key.name, str(value), key.meta["help"]))
    width = max(len(r[0]) + len(r[1]) for r in rows) + 3
    return "\n".join(f"  {n}={v}".ljust(width + 2) + f"  {h}" for n, v, h in rows)
