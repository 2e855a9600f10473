"""Plans: a pure function from (Config, job, probed media) to a :class:`RenderPlan`.

A plan says everything that decides the output's bytes before any work is done: the exact frame
range, the segments (frame-exact, boundaries on multiples of ``detect.every``), every ffmpeg
argument list that decodes and encodes each segment, and the assembly. Trim, preview, the output
container's codec and the encoder threads are resolved here, once (the frame arithmetic in
:mod:`render.segments`, the encoder in :mod:`render.encoder`). Executing the plan
(:mod:`render.execute`) is the only thing that differs between a render, a resumed render, a queue
worker and a shard of a cluster job, so the bytes never depend on how the work was scheduled.

Nothing here touches a file: the caller passes the probed media, the counted frames and the
identity of everything that goes into the job key (file hashes, model hashes, versions).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .config import SCHEMA, Config
from .encoder import encode_settings
from .errors import UsageError
from . import media as ffargs
from .media.probe import MediaInfo
from .media.timing import FrameTimes
from .segments import (INEXACT_SEEK, frame_range, frame_time, grid_rate, keyframe_seek, on_grid,
                       segment_bounds)

PLAN_SCHEMA = 2   # 2: a plan of one segment encodes the finished file (AssemblyPlan.mux empty)


@dataclass(frozen=True)
class Identity:
    """Everything outside the config that decides the bytes: the job key is a hash over it."""

    target_sha256: str
    source_sha256: str
    reference_sha256: str | None
    #: manifest name -> SHA-256 of every model the render loads; key -> SHA-256 of every file a
    #: processor's option names (``background.image``)
    models: Mapping[str, str]
    versions: Mapping[str, str]     # render, ffmpeg, onnxruntime, opencv, numpy, mkvmerge


@dataclass(frozen=True)
class SegmentPlan:
    index: int
    start: int            # first frame (index into the target's frames)
    end: int              # one past the last frame
    name: str             # seg-0003.mp4, in the work folder
    decode: tuple[str, ...]
    encode: tuple[str, ...]   # the LAST argument is the output file: the executor writes a temp name
    preroll: int = 0      # frames decoded before ``start`` to start tracks and filters, not encoded
    lookahead: int = 0    # frames decoded after ``end`` for the face stage's look-ahead, not encoded

    @property
    def frames(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class AssemblyPlan:
    """How the committed segments become the output. ``mux`` empty: the plan's only segment was
    encoded with the audio, the tags and the output's muxer (its encode arguments are the final
    mux); assembling it verifies, marks and moves it (a hard link of it, or a copy)."""

    concat: str                      # the concat demuxer's list file
    mux: tuple[str, ...]             # joins + muxes the audio once; LAST argument: the output file
    join: tuple[str, ...] = ()       # VFR only: segments → one Matroska file (video.mkv) ...
    retime: tuple[str, ...] = ()     # ... → mkvmerge with the target's timestamps (video-ts.mkv)
    timestamps: str = ""             # VFR only: mkvmerge's timestamp file


@dataclass(frozen=True)
class Expect:
    """What the assembled output must be before it may replace anything."""

    frames: int
    duration: float            # seconds of video
    frame_interval: float      # 1 / fps: the duration tolerance
    audio: int                 # audio streams
    audio_duration: float | None


@dataclass(frozen=True)
class RenderPlan:
    schema: int
    key: str
    kind: str                        # 'video' | 'image'
    target: str
    source: str
    output: str
    work_dir: str
    start: int                       # frames [start, end) of the target
    end: int
    total: int                       # the target's frame count
    partial: bool                    # allow_partial cut the plan at the last readable frame
    fps: str                         # a Fraction as text
    cfr: bool
    width: int                       # the decoded frames' size
    height: int
    scale_height: int | None
    encode: Mapping[str, Any]        # the resolved encoder settings
    segments: tuple[SegmentPlan, ...]
    assembly: AssemblyPlan | None    # None for images
    image_encode: tuple[str, ...] = ()
    expect: Expect | None = None
    config: Mapping[str, Any] = field(default_factory=dict)   # every key of the resolved config
    identity: Mapping[str, Any] = field(default_factory=dict)
    explicit: tuple[str, ...] = ()    # the keys given on the command line
    #: the encoded frames' size where the chain's frame steps change it (None: the decoded size)
    out_size: tuple[int, int] | None = None
    #: the output carries the chain's matte as its alpha channel (frames are encoded from bgra)
    alpha: bool = False
    #: seconds of the target's audio (from its container's start) at the output's first frame,
    #: as the output would carry it (0 where it is copied whole); None: the target has no audio
    audio_start: float | None = None

    @property
    def output_size(self) -> tuple[int, int]:
        """(width, height) of the output's frames."""
        return tuple(self.out_size) if self.out_size else (self.width, self.height)

    @property
    def frames(self) -> int:
        return self.end - self.start

    @property
    def final_mux(self) -> tuple[str, ...]:
        """The arguments of the ffmpeg that writes the output's audio: the assembly's mux, or the
        only segment's encoder where that one writes the finished file."""
        if self.assembly is None or not self.assembly.mux:
            return self.segments[0].encode if self.segments else ()
        return self.assembly.mux

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "RenderPlan":
        data = json.loads(text)
        if data.get("schema") != PLAN_SCHEMA:
            raise ValueError(f"plan schema {data.get('schema')} is not {PLAN_SCHEMA}")
        data["segments"] = tuple(SegmentPlan(**{**s, "decode": tuple(s["decode"]),
                                                "encode": tuple(s["encode"])})
                                 for s in data["segments"])
        if data.get("assembly") is not None:
            a = data["assembly"]
            data["assembly"] = AssemblyPlan(**{**a, **{k: tuple(a[k]) for k in ("mux", "join", "retime")}})
        if data.get("expect") is not None:
            data["expect"] = Expect(**data["expect"])
        data["image_encode"] = tuple(data.get("image_encode") or ())
        if data.get("out_size") is not None:
            data["out_size"] = tuple(data["out_size"])
        data["explicit"] = tuple(data.get("explicit") or ())
        return cls(**data)


# -- the config as data -------------------------------------------------------------------------------
def config_values(cfg: Config) -> dict[str, Any]:
    """Every key of the resolved config, as JSON values (lists for tuples)."""
    out: dict[str, Any] = {}
    for name in SCHEMA:
        value = cfg.get(name)
        out[name] = list(value) if isinstance(value, tuple) else value
    return out


def config_hash(values: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()


def job_key(cfg: Config, identity: Identity, encode: Mapping[str, Any] | None = None) -> str:
    """SHA-256 over everything that changes the output's bytes (and nothing that does not):
    the config's keyed values, the encoder settings resolved for the output's container, the
    identity of the inputs, models and versions."""
    keyed = {k: v for k, v in config_values(cfg).items()
             if SCHEMA[k].in_job_key(v, cfg.processors)}
    payload = {"schema": PLAN_SCHEMA, "config": keyed, "identity": asdict(identity),
               "encode": dict(encode or {})}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def work_dir_for(output: Path, key: str) -> Path:
    """The work folder: beside the output (same filesystem: renames are atomic), named by the key."""
    return output.parent / f".{output.name}.render-{key[:16]}"


def face_context(cfg: Config, a: int, b: int, readable: int) -> tuple[int, int]:
    """(pre-roll, look-ahead) of the segment of frames [a, b): with stabilize.enabled, its tracks
    and filters start ``stabilize.preroll`` frames before it (as many whole multiples of
    ``detect.every`` as there are frames before it, so the detector's schedule keeps its
    place) and the face stage sees its look-ahead, ``max(stabilize.fill, stabilize.window)``
    frames, past its end (where the target has them). Fixed by the plan, so a segment's faces do not depend on who renders it."""
    stab = cfg.stabilize
    if not stab.enabled:
        return 0, 0
    every = max(1, cfg.detect.every)
    preroll = min(-(-stab.preroll // every) * every, a // every * every)
    return preroll, max(0, min(max(stab.fill, stab.window), readable - b))


# -- the plan -----------------------------------------------------------------------------------------
def plan_render(cfg: Config, *, source: Path, target: Path, output: Path, info: MediaInfo,
                times: FrameTimes, identity: Identity, legacy_vsync: bool = False,
                metadata: Sequence[tuple[str, str]] = (),
                hw: Mapping[str, bool] | None = None,
                resize: Callable[[int, int], tuple[int, int]] | None = None,
                matte: str = "", soundtrack: ffargs.Soundtrack | None = None) -> RenderPlan:
    """The plan of rendering ``target`` with the face of ``source`` into ``output``; ``resize``:
    the size the chain's frames come out at for a decoded size (its frame steps'); ``matte``:
    where the chain's matte should go (``FrameProcessor.matte``; "" for a chain without one);
    ``soundtrack``: the audio the output carries instead of the target's (a lip syncer's voice,
    ``ChainProcessor.soundtrack``), cut or padded to the video's span."""
    values = config_values(cfg)
    ident = asdict(identity)
    alpha = carries_alpha(output, matte)
    if info.is_image:
        key = job_key(cfg, identity)
        work = work_dir_for(output, key)
        width, height = info.width, info.height
        out = _out_size(resize, width, height, image=True)
        decode = ffargs.decode_args(info, legacy_vsync=legacy_vsync)
        image = ffargs.image_encode_args(output, width=(out or (width, height))[0],
                                         height=(out or (width, height))[1], alpha=alpha)
        seg = SegmentPlan(0, 0, 1, output.name, tuple(decode), tuple(image))
        return RenderPlan(schema=PLAN_SCHEMA, key=key, kind="image", target=str(target),
                          source=str(source), output=str(output), work_dir=str(work), start=0, end=1,
                          total=1, partial=False, fps=str(info.fps), cfr=True, width=width,
                          height=height, scale_height=None, encode={}, segments=(seg,),
                          assembly=None, image_encode=tuple(image), config=values, identity=ident,
                          explicit=tuple(sorted(cfg.explicit)), out_size=out, alpha=alpha)

    start, end, partial = frame_range(cfg, info, times)
    scale_height = cfg.preview_height if cfg.preview and info.height > cfg.preview_height else None
    width, height = ffargs.decoded_size(info, scale_height)
    out = _out_size(resize, width, height)
    out_w, out_h = out or (width, height)
    video, family = encode_settings(cfg, output, hw, alpha=alpha)
    hwaccel = "cuda" if cfg.decode.hwaccel in ("cuda", "auto") and (hw or {}).get("cuda") else None
    enc = asdict(video)
    enc["extra"] = list(video.extra)
    key = job_key(cfg, identity, {**enc, "hwaccel": hwaccel})
    work = work_dir_for(output, key)
    fps = Fraction(info.fps)
    length = max(1, round(cfg.segment.seconds * float(fps)))
    bounds = segment_bounds(start, end, length, cfg.detect.every)

    # the audio span of frames [start, end), in seconds from the container's start
    n = end - start
    a_start = times.first + frame_time(times, fps, start)
    last_interval = (frame_time(times, fps, end - 1) - frame_time(times, fps, end - 2)) if end - 2 >= 0 \
        and not times.cfr else 1 / float(fps)
    if times.cfr:
        span = n / float(fps)
    else:
        span = frame_time(times, fps, end - 1) - frame_time(times, fps, start) + last_interval
    cut = (start > 0 or end < times.count)
    trim = (round(a_start, 6), round(a_start + span, 6)) if cut else None
    if trim is not None and start == 0:
        trim = (0.0, trim[1])
    audio_start = ffargs.audio_span(info, output, trim).start if info.audio else None
    if soundtrack is not None:
        soundtrack = dataclasses.replace(soundtrack, seconds=round(span, 6),
                                         target_start=audio_start or 0.0)

    # one segment of a constant frame rate is encoded with the audio, the tags and the final muxer
    # in one pass: the finished file, which the assembly only verifies, marks and moves
    whole = len(bounds) == 1 and times.cfr
    rate = grid_rate(times, fps) if times.cfr else None
    seg_ext = output.suffix if whole else ffargs.segment_muxer(family, video.codec)[1]
    segments = []
    inexact = info.container.split(",")[0] in INEXACT_SEEK
    readable = min(times.count, times.readable)
    for i, (a, b) in enumerate(bounds):
        preroll, lookahead = face_context(cfg, a, b, readable)
        da, db = a - preroll, b + lookahead          # the frames decoded
        # seek halfway between the frame before and the first frame: robust to timestamp rounding
        seek = None if da == 0 else \
            times.first + (frame_time(times, fps, da - 1) + frame_time(times, fps, da)) / 2
        skip = 0.0
        if seek is not None and inexact:
            seek, skip = keyframe_seek(times, fps, da, seek)
        name = f"seg-{i:04d}{seg_ext}"
        grid = None
        if rate is not None and on_grid(times, rate, da, db):
            grid = (rate, times.first + frame_time(times, fps, da) - (seek or 0.0))
        decode = ffargs.segment_decode_args(info, seek=seek, frames=db - da, scale_height=scale_height,
                                            legacy_vsync=legacy_vsync, hwaccel=hwaccel, grid=grid,
                                            skip=skip)
        if whole:
            encode = ffargs.encode_args(info, work / name, width=out_w, height=out_h, fps=fps,
                                        video=video, trim=trim, legacy_vsync=legacy_vsync,
                                        final_name=output.name, metadata=metadata,
                                        soundtrack=soundtrack)
        else:
            encode = ffargs.segment_encode_args(info, work / name, family=family, width=out_w,
                                                height=out_h, fps=fps, video=video,
                                                legacy_vsync=legacy_vsync)
        segments.append(SegmentPlan(i, a, b, name, tuple(decode), tuple(encode), preroll,
                                    lookahead))

    names = [s.name for s in segments]
    concat = ffargs.concat_list(names)
    concat_path = work / "concat.txt"
    if whole:
        assembly = AssemblyPlan(concat=concat, mux=())
    elif times.cfr:
        mux = ffargs.assemble_args(info, concat_path, output, final_name=output.name, concat=True,
                                   trim=trim, metadata=metadata, soundtrack=soundtrack)
        assembly = AssemblyPlan(concat=concat, mux=tuple(mux))
    else:
        joined, retimed = work / "video.mkv", work / "video-ts.mkv"
        stamps = ffargs.timestamps_file([frame_time(times, fps, i) - frame_time(times, fps, start)
                                         for i in range(start, end)])
        mux = ffargs.assemble_args(info, retimed, output, final_name=output.name, concat=False,
                                   trim=trim, metadata=metadata, soundtrack=soundtrack)
        assembly = AssemblyPlan(concat=concat, mux=tuple(mux),
                                join=tuple(ffargs.join_args(concat_path, joined)),
                                retime=tuple(ffargs.retime_args(joined, work / "timestamps.txt",
                                                                retimed)),
                                timestamps=stamps)
    audio_duration = None
    if soundtrack is not None:      # one stream, cut and padded to the video's span
        audio_duration = span
    elif info.audio:   # what the mux will make of the audio (the same decision as its arguments)
        audio = ffargs.audio_span(info, output, trim)
        if audio.copied:
            audio_duration = max((a.duration or 0.0) for a in info.audio) or None
        else:           # cut and padded to the video's span: as long as its frames
            audio_duration = span
    expect = Expect(frames=n, duration=round(span, 6), frame_interval=1 / float(fps),
                    audio=1 if soundtrack is not None else len(info.audio),
                    audio_duration=audio_duration)
    return RenderPlan(schema=PLAN_SCHEMA, key=key, kind="video", target=str(target),
                      source=str(source), output=str(output), work_dir=str(work), start=start,
                      end=end, total=times.count, partial=partial, fps=str(fps), cfr=times.cfr,
                      width=width, height=height, scale_height=scale_height, encode=enc,
                      segments=tuple(segments), assembly=assembly, expect=expect, config=values,
                      identity=ident, explicit=tuple(sorted(cfg.explicit)), out_size=out,
                      alpha=alpha, audio_start=audio_start)


def carries_alpha(output: Path, matte: str) -> bool:
    """Whether ``output`` gets the chain's matte as its alpha channel: where its format carries
    one (png, webp, webm, mov) and the matte may go there (``auto``, ``alpha``); ``alpha`` for
    a format without one is a usage error before any work."""
    if not matte or matte == "fill":
        return False
    final = Path(ffargs.final_path(output))
    if final.suffix.lower() in ffargs.ALPHA_FORMATS:
        return True
    if matte == "alpha":
        raise UsageError(f"background.output=alpha: {final.name} cannot carry an alpha "
                         f"channel: write .png, .webp, .webm or .mov, or set "
                         f"background.output=fill")
    return False


#: the largest frame a video render writes: H.264 level 6.2's, the highest level (MaxFS 139264
#: macroblocks of 16 × 16, 8192 × 4352), with no side over 8192 px (what H.265 and hardware
#: decoders take too); an image's sides: WebP's 16383 px, the least of the image encoders'
MAX_VIDEO_SIDE = 8192
MAX_VIDEO_MACROBLOCKS = 139264
MAX_IMAGE_SIDE = 16383


def frame_size_problem(width: int, height: int, *, image: bool = False) -> str | None:
    """Why frames of ``width`` × ``height`` cannot be encoded (the rule above); None when they
    can."""
    if image:
        if max(width, height) > MAX_IMAGE_SIDE:
            return f"an image is written at most {MAX_IMAGE_SIDE} px a side"
        return None
    blocks = -(-width // 16) * -(-height // 16)
    if max(width, height) > MAX_VIDEO_SIDE or blocks > MAX_VIDEO_MACROBLOCKS:
        return (f"a video is written at most {MAX_VIDEO_SIDE} px a side and "
                f"{MAX_VIDEO_MACROBLOCKS} macroblocks of 16 x 16 px (H.264 level 6.2: "
                f"8192x4352; this is {blocks})")
    return None


def _out_size(resize: Callable[[int, int], tuple[int, int]] | None, width: int, height: int,
              *, image: bool = False) -> tuple[int, int] | None:
    """The chain's output size for frames of ``width`` × ``height``; None where it is theirs.
    A size the chain's frame steps make that cannot be encoded is a usage error here, before
    any work folder or output exists."""
    if resize is None:
        return None
    out = tuple(int(v) for v in resize(width, height))
    if out == (width, height):
        return None
    why = frame_size_problem(*out, image=image)
    if why is not None:
        smaller = "a smaller scale (frame_enhance.model=real_esrgan_x2), or " \
            if out[0] > 2 * width else ""
        raise UsageError(f"the chain's frame steps make {width}x{height} frames "
                         f"{out[0]}x{out[1]}: {why}. Use {smaller}a smaller target (scale it "
                         f"down first, or preview=true)")
    return out
