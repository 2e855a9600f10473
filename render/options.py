"""The options: how a configuration key is declared (its type — the field's annotation —,
default, help, constraints and how it enters the job key), and the core sections, every key that
is not a processor's own.

The core sections here and every processor's own section (``render.processors.*``) declare
their keys with :func:`option` on frozen dataclasses; the schema (``render.config.schema``)
composes them into one :class:`~render.config.Config`. Nothing here imports the rest of render,
so the parts that read a section (sessions, the memory strategy, the masks) import it downward.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

#: how a key enters the job key (the hash over everything that decides an output's bytes):
#: "bytes" — always; "never" — it cannot change the bytes (paths, threads, progress, locks), so
#: resuming with another value still resumes; "unless-default" — a key added later whose default
#: reproduces the earlier behaviour: left out at its default, so earlier job keys (and their work
#: folders, reports and marks) stay valid
KEYED = ("bytes", "never", "unless-default")

#: a model's weights: as pinned (fp32, or a pinned or converted fp16 file), a gated int8 conversion
#: (``render models convert NAME int8``), or auto: int8 where the CPU provider runs on a CPU with
#: VNNI and a gated int8 file exists, else fp32
PRECISIONS = ("fp32", "fp16", "int8", "auto")
PRECISION_HELP = ("weights precision: fp32, fp16, int8 (a gated conversion: render models "
                  "convert NAME int8) or auto (int8 on a CPU with VNNI where a gated int8 file "
                  "exists, else fp32)")


def spec(help: str, *, choices: Sequence[str] | None = None, min: float | None = None,
         max: float | None = None, multiple: int | None = None, env: str | None = None,
         keyed: str = "bytes", auto: Any = None) -> dict:
    """A key's metadata: help text, constraints checked by ``render.config.validate.coerce``,
    ``keyed`` (KEYED), and ``auto``: the value the word ``auto`` stands for (a number key that
    can also be chosen by the machine)."""
    assert keyed in KEYED, keyed
    return {"help": help, "choices": tuple(choices) if choices else None, "min": min, "max": max,
            "multiple": multiple, "env": env, "keyed": keyed, "auto": auto}


def precision_option(whose: str, keyed: str = "unless-default") -> Any:
    """A ``precision`` key (:data:`PRECISIONS`, fp32 by default) of ``whose`` weights."""
    return option("fp32", f"{whose} {PRECISION_HELP}", choices=PRECISIONS, keyed=keyed)


def option(default: Any, help: str, **kw: Any) -> Any:
    """A dataclass field for one key: its default (a list default becomes a tuple) and
    :func:`spec`."""
    if isinstance(default, list):
        return field(default_factory=lambda d=tuple(default): d, metadata=spec(help, **kw))
    return field(default=default, metadata=spec(help, **kw))


PROVIDERS = ("tensorrt", "cuda", "cpu")
MEMORY_STRATEGIES = ("low", "moderate", "high")
#: mask.regions: FaceFusion's region names and the pairs as one name (the face parser's classes)
FACE_REGIONS = ("skin", "eyebrows", "eyes", "glasses", "nose", "mouth", "lips", "left-eyebrow",
                "right-eyebrow", "left-eye", "right-eye", "upper-lip", "lower-lip")


@dataclass(frozen=True)
class Models:
    dir: str = option("", "folder holding the model files (default: $RENDER_MODELS_DIR or "
                      "~/.cache/render/models)", env="RENDER_MODELS_DIR", keyed="never")
    manifest: tuple[str, ...] = option([], "extra manifest files layered over the shipped one "
                                       "(comma separated)", keyed="never")


@dataclass(frozen=True)
class Detect:
    model: str = option("scrfd_2.5g", "face detector (manifest name; SCRFD/RetinaFace or YuNet "
                        "contract)")
    precision: str = precision_option("the detector's")
    size: int = option(640, "detector input size in px; frames are downscaled to fit", min=128,
                       max=1280, multiple=32)
    score: float = option(0.5, "minimum detection score", min=0.0, max=1.0)
    nms: float = option(0.4, "NMS IoU threshold", min=0.05, max=0.95)
    every: int = option(1, "run the detector every N frames and track faces in between (1 = every "
                        "frame)", min=1, max=30)


@dataclass(frozen=True)
class Embed:
    model: str = option("arcface_w600k_r50", "face embedder (ArcFace contract)")
    precision: str = precision_option("the embedder's")


@dataclass(frozen=True)
class Mask:
    type: str = option("box", "paste-back mask", choices=("box", "feather"))
    padding: float = option(0.0, "share of the crop side cut from each edge of the mask", min=0.0,
                            max=0.4)
    blur: float = option(0.3, "feather width as a share of the crop side (feather mask only)",
                         min=0.0, max=1.0)
    # per-side box padding in percent of the crop side (FaceFusion's --face-mask-padding); each
    # side cuts the larger of its own value and mask.padding
    padding_top: float = option(0.0, "percent of the crop side cut from the top edge of the box "
                                "mask (the larger of this and mask.padding)", min=0.0, max=100.0,
                                keyed="unless-default")
    padding_right: float = option(0.0, "percent of the crop side cut from the right edge of the "
                                  "box mask", min=0.0, max=100.0, keyed="unless-default")
    padding_bottom: float = option(0.0, "percent of the crop side cut from the bottom edge of the "
                                   "box mask", min=0.0, max=100.0, keyed="unless-default")
    padding_left: float = option(0.0, "percent of the crop side cut from the left edge of the box "
                                 "mask", min=0.0, max=100.0, keyed="unless-default")
    occluder: tuple[str, ...] = option([], "occlusion mask models (manifest names: xseg_1, "
                                       "xseg_2, xseg_3; several give their minimum): what covers "
                                       "the face (a hand, a microphone) keeps the target's "
                                       "pixels; empty = off", keyed="unless-default")
    parser: str = option("", "face parser for the region mask (manifest name: bisenet_resnet_18, "
                         "bisenet_resnet_34); empty = off", keyed="unless-default")
    regions: tuple[str, ...] = option(list(FACE_REGIONS[:7]), "regions of the face the swap keeps "
                                      "with mask.parser (eyebrows, eyes and lips take both sides)",
                                      choices=FACE_REGIONS, keyed="unless-default")
    precision: str = precision_option("the mask models'")
    areas: tuple[str, ...] = option([], "landmark area mask: the swap keeps only the convex hull "
                                    "of these areas of the 68 landmarks; empty = off",
                                    choices=("upper-face", "lower-face", "mouth"),
                                    keyed="unless-default")
    keep: tuple[str, ...] = option([], "areas where the swap keeps the target's own pixels: "
                                   "mouth = the target's lips, teeth and tongue (mask.parser's "
                                   "mouth and lip classes when it is on, else the hull of 68 "
                                   "landmarks 48-67), grown by 2.5 percent of the crop side, "
                                   "feathered over 5 percent; swappers only; empty = off",
                                   choices=("mouth",), keyed="unless-default")


@dataclass(frozen=True)
class Landmark:
    model: str = option("", "68-point landmarker (manifest name: 2dfan4); its points place the "
                        "crops when its score is above landmark.score; empty = off",
                        keyed="unless-default")
    score: float = option(0.5, "the landmarker's score above which its 68 points (not the "
                          "detector's 5) place the crops", min=0.0, max=1.0, keyed="unless-default")
    precision: str = precision_option("the landmark models'")
    estimator: str = option("fan_68_5", "model estimating 68 points from the detector's 5, for "
                            "mask.areas and mask.keep when landmark.model is off (a manifest "
                            "overlay names its file: docs/models.md)", keyed="unless-default")


@dataclass(frozen=True)
class Select:
    mode: str = option("one", "which faces to swap: one (largest), many (all), reference (like "
                       "the reference face), map (each person of select.map gets their own "
                       "source; other faces are left as they are)",
                       choices=("one", "many", "reference", "map"))
    reference: str = option("", "reference face image for mode=reference (default: the source "
                            "image)")
    map: str = option("", "mode=map: a YAML file of reference: / source: entries, or inline "
                      "REF=SRC[+SRC...],REF=SRC (docs/sources.md); its images' bytes enter "
                      "the job key, not their paths", keyed="never")
    distance: float = option(0.6, "max identity distance (1 - cosine) for mode=reference and "
                             "mode=map", min=0.0, max=2.0)
    embed_every: int = option(25, "mode=reference and map: a face followed from detection to "
                              "detection is embedded again every N detections (1 = every "
                              "frame)", min=1, max=1000)
    margin: float = option(0.1, "mode=reference and map: a face whose distance was within this "
                           "of select.distance is embedded again at every detection", min=0.0,
                           max=2.0)


@dataclass(frozen=True)
class Stabilize:
    enabled: bool = option(False, "link faces into tracks, smooth each track's key points (a "
                           "centred line, then a One-Euro filter) before aligning, fill short "
                           "misses; every segment is decoded with a pre-roll and a look-ahead "
                           "(docs/stabilize.md)", keyed="unless-default")
    min_cutoff: float = option(0.05, "the filter's cutoff for a still face, in cycles per frame "
                               "(lower = steadier)", min=0.001, max=0.5, keyed="unless-default")
    beta: float = option(10.0, "how fast the cutoff opens with the face's speed (in face widths "
                         "per frame; higher = less lag while moving)", min=0.0, max=1000.0,
                         keyed="unless-default")
    d_cutoff: float = option(0.15, "cutoff of the speed estimate, in cycles per frame", min=0.001,
                             max=0.5, keyed="unless-default")
    window: int = option(3, "each frame's points are put on the line through the track's points N "
                         "frames either side (no lag on a steady movement)", min=0, max=16,
                         keyed="unless-default")
    fill: int = option(3, "a face missed for up to N frames inside a track is filled in from the "
                       "frames around (the face stage looks max(fill, window) frames ahead)", min=0,
                       max=16, keyed="unless-default")
    preroll: int = option(15, "frames before each segment decoded to start its tracks and filters "
                          "(not encoded)", min=0, max=300, keyed="unless-default")


@dataclass(frozen=True)
class Debug:
    faces: str = option("", "append every frame's face tracks (boxes, raw and used key points, "
                        "how each was found, the crop transform) to this JSON Lines file",
                        keyed="never")
    overlay: bool = option(False, "draw boxes, key points and track ids into the output instead "
                           "of swapping", keyed="unless-default")


@dataclass(frozen=True)
class Execution:
    providers: tuple[str, ...] = option(["tensorrt", "cuda", "cpu"], "execution providers, tried "
                                        "in order", choices=PROVIDERS)
    memory_strategy: str = option("moderate", "memory strategy (docs/operations.md)",
                                  choices=MEMORY_STRATEGIES, keyed="never")
    frames_in_flight: int = option(0, "frames decoded but not yet encoded (0 = from "
                                   "memory_strategy)", min=0, max=256, keyed="never")
    batch_size: int = option(0, "face crops per swapper/enhancer call when the model allows (0 = "
                             "from memory_strategy)", min=0, max=64, keyed="never")
    threads: int = option(0, "ONNX Runtime intra-op threads per model call (0 = the cores shared "
                          "out over the lanes; ffmpeg at nice 19 while the models are the busier "
                          "side, half the cores for the models when ffmpeg is)", min=0, max=256,
                          keyed="never")
    lanes: int = option(0, "batches of frames swapped and enhanced at once, each on its own "
                        "thread (0 = 2 on the CPU provider when execution.threads=0, else 1)",
                        min=0, max=64, keyed="never")
    graph_optimization: str = option("all", "ONNX Runtime graph optimisation level",
                                     choices=("disable", "basic", "extended", "all"))
    graph_cache: bool = option(True, "on the CPU provider, keep ONNX Runtime's optimised graph of "
                               "each large model in cache_dir/onnxruntime: later renders load it "
                               "without optimising again (same outputs; disk about the model's "
                               "fp32 size)", keyed="never")
    graph_cache_min_mb: int = option(32, "models smaller than this (MiB) are optimised at every "
                                     "load, not cached", min=0, max=1 << 20, keyed="never")
    gpu_mem_limit_mb: int = option(0, "CUDA arena limit in MiB (0 = from memory_strategy)", min=0,
                                   max=1 << 20, keyed="never")
    trt_workspace_mb: int = option(0, "TensorRT workspace cap in MiB (0 = from memory_strategy)",
                                   min=0, max=1 << 20, keyed="never")
    parallel_segments: int = option(0, "segments of one render encoded at once, each with its own "
                                    "decoder and encoder, sharing the models and the frames in "
                                    "flight (0 or auto = from the cores, the encoder's threads "
                                    "and the frames in flight; 1 on a machine of fewer than 8 "
                                    "cores); the bytes are the same for every value", min=0, max=64,
                                    keyed="never", auto=0)


@dataclass(frozen=True)
class Encode:
    codec: str = option("libx264", "video encoder (ffmpeg name; h264_nvenc / hevc_nvenc fall back "
                        "to libx264 / libx265 with one log line where NVENC is missing)")
    crf: int = option(18, "constant rate factor (lower = better)", min=0, max=63)
    preset: str = option("medium", "encoder preset")
    pix_fmt: str = option("yuv420p", "output pixel format")
    threads: int = option(0, "encoder threads (0 = ffmpeg's choice; pin it for bit-identical "
                          "output across machines with different core counts)", min=0, max=64)


@dataclass(frozen=True)
class Decode:
    hwaccel: str = option("none", "decode on the GPU: cuda (NVDEC), auto (cuda where it works), "
                          "none; without a working NVDEC it falls back to software with one log "
                          "line", choices=("none", "cuda", "auto"))


@dataclass(frozen=True)
class Segment:
    seconds: float = option(10.0, "length of a committed segment in seconds (a crash loses at "
                            "most one; boundaries are also multiples of detect.every)", min=0.5,
                            max=3600.0)


@dataclass(frozen=True)
class Mark:
    enabled: bool = option(True, "mark outputs as synthetic media: a metadata tag and a signed "
                           "C2PA manifest (the report records when this is off)")
    cert: str = option("", "C2PA signing certificate chain (PEM, signing certificate first; "
                       "default: a local certificate created in cache_dir/c2pa)", keyed="never")
    key: str = option("", "private key (PEM) of mark.cert", keyed="never")


@dataclass(frozen=True)
class Lock:
    slots: int = option(1, "renders one device may run at once (one lock file per slot)", min=1,
                        max=64, keyed="never")
    timeout: float = option(0.0, "seconds to wait for the device lock before giving up (0 = wait "
                            "as long as it takes)", min=0.0, keyed="never")
    device: str = option("", "lock this device name instead of the detected GPU (or cpu); 'none' "
                         "takes no lock", keyed="never")


@dataclass(frozen=True)
class Shard:
    index: int = option(-1, "which shard this process renders (0-based; -1 = from "
                        "SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX); `shard=I/N` sets index and "
                        "count", min=-1, keyed="never")
    count: int = option(0, "render only this shard's segments of N, into the shared work folder "
                        "(0 = a whole render); `render assemble` joins them", min=0, max=100000,
                        keyed="never")


@dataclass(frozen=True)
class Review:
    """What the render measures of its own swaps for the report's ``quality`` section and
    ``render review`` (docs/review.md). It reads frames and writes the report only: no key of it
    changes an output's bytes."""

    enabled: bool = option(True, "measure each selected face track while rendering (how each face "
                           "was found, misses, crop jumps; identity distance and colour shift on "
                           "sampled frames) into the report's quality section", keyed="never")
    every: int = option(10, "measure identity distance and colour shift on every Nth frame, by "
                        "its number in the target (the same frames on any schedule)", min=1,
                        max=100000, keyed="never")
    distance: float = option(0.7, "flag a sampled face further than this from the source (1 - "
                             "cosine of the embeddings; a swapped face is usually 0.2-0.5 from "
                             "it, an unswapped other person 0.8-1.1)", min=0.0, max=2.0,
                             keyed="never")
    misses: int = option(3, "flag a track that loses its face for this many frames in a row "
                         "(frames a fill did not bridge)", min=1, max=100000, keyed="never")
    jump: float = option(0.25, "flag a crop that moves more than this many face widths from one "
                         "frame to the next", min=0.0, max=100.0, keyed="never")
    colour: float = option(12.0, "flag a sampled face whose mean colour moved more than this (CIE "
                           "Lab ΔE) from the target's", min=0.0, max=300.0, keyed="never")
