"""The configuration's schema: every key, its type, default, help and constraints.

The schema is the frozen dataclasses below, one per section: every leaf field carries its type
(the annotation), its default and a :func:`spec` with help text, constraints and whether it enters
the job key. :data:`SCHEMA` flattens them into dotted keys (``detect.size``), the names that
profiles, the command line, reports and docs/configuration.md use.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence, get_type_hints

PROVIDERS = ("tensorrt", "cuda", "cpu")
MEMORY_STRATEGIES = ("low", "moderate", "high")
#: mask.regions: FaceFusion's region names and the pairs as one name (the face parser's classes)
FACE_REGIONS = ("skin", "eyebrows", "eyes", "glasses", "nose", "mouth", "lips", "left-eyebrow",
                "right-eyebrow", "left-eye", "right-eye", "upper-lip", "lower-lip")
PRECISIONS = ("fp32", "fp16")
#: swap.pixel_boost: off (the model's side), auto (per face), or a crop side in pixels
PIXEL_BOOST = ("off", "auto", "128", "256", "384", "512", "768", "1024")


#: how a key enters the job key (the hash over everything that decides an output's bytes):
#: "bytes" — always; "never" — it cannot change the bytes (paths, threads, progress, locks), so
#: resuming with another value still resumes; "unless-default" — a key added later whose default
#: reproduces the earlier behaviour: left out at its default, so earlier job keys (and their work
#: folders, reports and marks) stay valid
KEYED = ("bytes", "never", "unless-default")


def spec(help: str, *, choices: Sequence[str] | None = None, min: float | None = None,
         max: float | None = None, multiple: int | None = None, env: str | None = None,
         keyed: str = "bytes", auto: Any = None) -> dict:
    """Field metadata: help text, constraints checked by :func:`.validate.coerce`, ``keyed``
    (KEYED), and ``auto``: the value the word ``auto`` stands for (a number key that can also be
    chosen by the machine)."""
    assert keyed in KEYED, keyed
    return {"help": help, "choices": tuple(choices) if choices else None, "min": min, "max": max,
            "multiple": multiple, "env": env, "keyed": keyed, "auto": auto}


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
    model: str = _f("inswapper_128", "face swapper (a swapper contract: inswapper, hyperswap, "
                    "simswap, ghost, blendswap, uniface)")
    precision: str = _f("fp32", "swapper weights precision", choices=PRECISIONS)
    pixel_boost: str = _f("off", "swap at this crop side, in tiles of the model's own side (a "
                          "multiple of it), for faces larger than the model's crop; auto = the "
                          "smallest side at least the face's size in the frame",
                          choices=PIXEL_BOOST, keyed="unless-default")
    weight: float = _f(0.5, "identity weight: below 0.5 the result keeps more of the target "
                       "face's identity, above it more of the source's", min=0.0, max=1.0,
                       keyed="unless-default")
    color_match: str = _f("off", "lab: move the swapped face's colour (mean and spread per Lab "
                          "channel, inside the face) to the target face's, smoothed over each "
                          "face track, so the skin matches the neck and hands",
                          choices=("off", "lab"), keyed="unless-default")


@dataclass(frozen=True)
class Enhance:
    enabled: bool = _f(False, "run the face enhancer after swapping")
    model: str = _f("gfpgan_1.4", "face enhancer (GFPGAN, CodeFormer, GPEN or RestoreFormer++ contract)")
    precision: str = _f("fp32", "enhancer weights precision", choices=PRECISIONS)
    blend: float = _f(0.8, "share of the enhanced face over the frame (pasted at blend x its mask)",
                      min=0.0, max=1.0)
    weight: float = _f(0.5, "CodeFormer's fidelity weight: 0 restores the most, 1 keeps closest to "
                       "the input (other enhancers have no weight input)", min=0.0, max=1.0,
                       keyed="unless-default")


@dataclass(frozen=True)
class Mask:
    type: str = _f("box", "paste-back mask", choices=("box", "feather"))
    padding: float = _f(0.0, "share of the crop side cut from each edge of the mask", min=0.0, max=0.4)
    blur: float = _f(0.3, "feather width as a share of the crop side (feather mask only)",
                     min=0.0, max=1.0)
    # per-side box padding in percent of the crop side (FaceFusion's --face-mask-padding); each
    # side cuts the larger of its own value and mask.padding
    padding_top: float = _f(0.0, "percent of the crop side cut from the top edge of the box mask "
                            "(the larger of this and mask.padding)", min=0.0, max=100.0,
                            keyed="unless-default")
    padding_right: float = _f(0.0, "percent of the crop side cut from the right edge of the box "
                              "mask", min=0.0, max=100.0, keyed="unless-default")
    padding_bottom: float = _f(0.0, "percent of the crop side cut from the bottom edge of the box "
                               "mask", min=0.0, max=100.0, keyed="unless-default")
    padding_left: float = _f(0.0, "percent of the crop side cut from the left edge of the box mask",
                             min=0.0, max=100.0, keyed="unless-default")
    occluder: tuple[str, ...] = _f([], "occlusion mask models (manifest names: xseg_1, xseg_2, "
                                   "xseg_3; several give their minimum): what covers the face (a "
                                   "hand, a microphone) keeps the target's pixels; empty = off",
                                   keyed="unless-default")
    parser: str = _f("", "face parser for the region mask (manifest name: bisenet_resnet_18, "
                     "bisenet_resnet_34); empty = off", keyed="unless-default")
    regions: tuple[str, ...] = _f(list(FACE_REGIONS[:7]), "regions of the face the swap keeps "
                                  "with mask.parser (eyebrows, eyes and lips take both sides)",
                                  choices=FACE_REGIONS, keyed="unless-default")
    areas: tuple[str, ...] = _f([], "landmark area mask: the swap keeps only the convex hull of "
                                "these areas of the 68 landmarks; empty = off",
                                choices=("upper-face", "lower-face", "mouth"),
                                keyed="unless-default")


@dataclass(frozen=True)
class Landmark:
    model: str = _f("", "68-point landmarker (manifest name: 2dfan4); its points place the crops "
                    "when its score is above landmark.score; empty = off", keyed="unless-default")
    score: float = _f(0.5, "the landmarker's score above which its 68 points (not the detector's "
                      "5) place the crops", min=0.0, max=1.0, keyed="unless-default")
    estimator: str = _f("fan_68_5", "model estimating 68 points from the detector's 5, for "
                        "mask.areas when landmark.model is off (a manifest overlay names its "
                        "file: docs/models.md)", keyed="unless-default")


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
class Stabilize:
    enabled: bool = _f(False, "link faces into tracks, smooth each track's key points (a centred "
                       "line, then a One-Euro filter) before aligning, fill short misses; every "
                       "segment is decoded with a pre-roll and a look-ahead (docs/stabilize.md)",
                       keyed="unless-default")
    min_cutoff: float = _f(0.05, "the filter's cutoff for a still face, in cycles per frame "
                           "(lower = steadier)", min=0.001, max=0.5, keyed="unless-default")
    beta: float = _f(10.0, "how fast the cutoff opens with the face's speed (in face widths per "
                     "frame; higher = less lag while moving)", min=0.0, max=1000.0,
                     keyed="unless-default")
    d_cutoff: float = _f(0.15, "cutoff of the speed estimate, in cycles per frame", min=0.001,
                         max=0.5, keyed="unless-default")
    window: int = _f(3, "each frame's points are put on the line through the track's points N "
                     "frames either side (no lag on a steady movement)", min=0, max=16,
                     keyed="unless-default")
    fill: int = _f(3, "a face missed for up to N frames inside a track is filled in from the "
                   "frames around (the face stage looks max(fill, window) frames ahead)", min=0,
                   max=16, keyed="unless-default")
    preroll: int = _f(15, "frames before each segment decoded to start its tracks and filters "
                      "(not encoded)", min=0, max=300, keyed="unless-default")


@dataclass(frozen=True)
class Debug:
    faces: str = _f("", "append every frame's face tracks (boxes, raw and used key points, how "
                    "each was found, the crop transform) to this JSON Lines file", keyed="never")
    overlay: bool = _f(False, "draw boxes, key points and track ids into the output instead of "
                       "swapping", keyed="unless-default")


@dataclass(frozen=True)
class Execution:
    providers: tuple[str, ...] = _f(["tensorrt", "cuda", "cpu"], "execution providers, tried in order",
                              choices=PROVIDERS)
    memory_strategy: str = _f("moderate", "memory strategy (docs/operations.md)",
                              choices=MEMORY_STRATEGIES, keyed="never")
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
    parallel_segments: int = _f(0, "segments of one render encoded at once, each with its own "
                                "decoder and encoder, sharing the models and the frames in flight "
                                "(0 or auto = from the cores, the encoder's threads and the "
                                "frames in flight; 1 on a machine of fewer than 8 cores); the "
                                "bytes are the same for every value", min=0, max=64,
                                keyed="never", auto=0)


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
    landmark: Landmark = field(default_factory=Landmark)
    select: Select = field(default_factory=Select)
    stabilize: Stabilize = field(default_factory=Stabilize)
    debug: Debug = field(default_factory=Debug)
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
    def marked(self) -> bool:
        """Outputs carry the synthetic-media marks: ``mark.enabled``, unless ``debug.overlay``
        drew the faces instead of swapping them (nothing synthetic to declare)."""
        return self.mark.enabled and not self.debug.overlay

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
