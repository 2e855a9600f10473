"""How the target's audio goes into an output: copied whole where the container takes it and
nothing cuts it, else re-encoded once and cut to the video's span; and the ffmpeg arguments that
do so (pure, see :mod:`.argv`)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from .argv import BASE, check_trim, fmt_time, trim_input_opts
from .formats import AUDIO_COPY, AUDIO_ENCODER, output_format
from .probe import MediaInfo

#: audio sync offsets below this are left alone (well under a frame)
SYNC_TOLERANCE = 0.010


def audio_plan(info: MediaInfo, out_path: str | os.PathLike, *, trim=None, shift: bool = False) -> list[str]:
    """Per audio stream of ``info``: 'copy' or the encoder to re-encode it with.

    Copy when the output container takes the codec and nothing cuts the audio (no trim, no sync
    shift); otherwise re-encode (aac for mp4/mov/mkv, libopus for webm). Never drops a stream.
    """
    _, family = output_format(out_path)
    allowed = AUDIO_COPY[family]
    cut = shift or check_trim(info, trim) is not None
    plan = []
    for a in info.audio:
        if not cut and (allowed is None or a.codec in allowed):
            plan.append("copy")
        else:
            plan.append(AUDIO_ENCODER[family])
    return plan


def _audio_bitrate(encoder: str, channels: int) -> str:
    ch = max(channels, 2)
    if encoder == "libopus":
        return f"{min(64 * ch, 510)}k"
    return f"{min(96 * ch, 512)}k"


@dataclass(frozen=True)
class AudioArgs:
    """How the target's audio goes into an output: input options, maps, output options."""

    inputs: list[str]
    maps: list[str]
    outputs: list[str]


@dataclass(frozen=True)
class AudioSpan:
    """How the target's audio goes into an output, decided once for the mux and for the plan's
    expectations: ``plan`` per stream ('copy' or an encoder, :func:`audio_plan`); when nothing is
    copied, the span cut from the target (``start``, ``end``; seconds from the container's start)
    and ``duration``, the length every audio stream of the output will have (None: unknown, the
    audio is padded without end and ``-shortest`` ends it at the video's last frame)."""

    plan: list[str]
    start: float
    end: float | None
    duration: float | None

    @property
    def copied(self) -> bool:
        return "copy" in self.plan


def audio_span(info: MediaInfo, out_path: str | os.PathLike,
               trim: tuple[float, float | None] | None = None) -> AudioSpan:
    """The target's audio in an output: copied whole when the container takes it and nothing cuts
    it; otherwise re-encoded and cut to the video's span (from where the video starts when the
    audio starts before it, to keep them in sync)."""
    t = check_trim(info, trim)
    start, end = t if t is not None else (0.0, None)
    # keep audio in sync when it starts before the video: start it where the video starts
    shift = info.video_start > SYNC_TOLERANCE and start < info.video_start
    plan = audio_plan(info, out_path, trim=trim, shift=shift)
    if "copy" in plan:  # nothing cuts the audio (see audio_plan): the target's audio, whole
        return AudioSpan(plan, 0.0, None, None)
    # the audio span that matches the video: positions relative to the container start
    a_start = info.video_start if shift else start
    a_end = end
    if info.duration > 0:
        v_end = info.video_start + info.duration
        a_end = v_end if a_end is None else min(a_end, v_end)
    duration = a_end - a_start if a_end is not None and a_end > a_start else None
    return AudioSpan(plan, a_start, a_end if duration else None, duration)


def audio_args(info: MediaInfo, out_path: str | os.PathLike,
               trim: tuple[float, float | None] | None, input_index: int) -> AudioArgs:
    """Every audio stream of the target, copied when the container takes it and nothing cuts it;
    otherwise re-encoded, cut (input ``-t``) and padded (``apad=whole_dur``) to the video's span."""
    if not info.audio:
        return AudioArgs([], [], [])
    span = audio_span(info, out_path, trim)
    plan, audio_dur = span.plan, span.duration
    inputs: list[str] = []
    if span.copied:
        inputs += ["-i", info.path]
    else:
        inputs += trim_input_opts(span.start, span.end) + ["-i", info.path]
    maps: list[str] = []
    for a in info.audio:
        maps += ["-map", f"{input_index}:{a.index}"]
    outputs: list[str] = []
    for i, (a, how) in enumerate(zip(info.audio, plan)):
        if how == "copy":
            outputs += [f"-c:a:{i}", "copy"]
        else:
            outputs += [f"-c:a:{i}", how, f"-b:a:{i}", _audio_bitrate(how, a.channels)]
    if "copy" not in plan:
        # when the span is unknown, pad without end and let -shortest end the file at the last
        # video frame
        pad = f"apad=whole_dur={fmt_time(audio_dur)}" if audio_dur else "apad"
        for i in range(len(plan)):
            outputs += [f"-filter:a:{i}", pad]
        if not audio_dur:
            outputs += ["-shortest"]
    return AudioArgs(inputs, maps, outputs)


# -- a soundtrack of the chain's (a lip syncer's voice) -----------------------------------------
@dataclass(frozen=True)
class Soundtrack:
    """An audio file the output carries instead of the target's audio (``mix`` False) or summed
    with the target's first audio stream (``mix``): a lip syncer's voice. ``seconds`` (the
    video's span, what the track is cut or padded to) and ``target_start`` (where in the
    target's audio the output's first frame is) are the plan's."""

    path: str
    channels: int
    mix: bool = False
    seconds: float = 0.0
    target_start: float = 0.0


def soundtrack_args(info: MediaInfo, track: Soundtrack, out_path: str | os.PathLike,
                    input_index: int) -> AudioArgs:
    """The output's one audio stream from ``track``: its first audio stream from its start, cut
    (input ``-t``) and padded (``apad=whole_dur``) to the video's span, encoded once (aac; opus
    for webm). With ``mix`` and a target with audio, summed with the target's first audio stream
    cut to the same span from ``target_start`` (``amix``: each at half level)."""
    _, family = output_format(out_path)
    encoder = AUDIO_ENCODER[family]
    span = fmt_time(track.seconds)
    pad = f"apad=whole_dur={span}"
    inputs = ["-t", span, "-i", track.path]
    outputs = ["-c:a:0", encoder, "-b:a:0", _audio_bitrate(encoder, track.channels)]
    if not (track.mix and info.audio):
        return AudioArgs(inputs, ["-map", f"{input_index}:a:0"], ["-filter:a:0", pad] + outputs)
    inputs += trim_input_opts(track.target_start, track.target_start + track.seconds)
    inputs += ["-i", info.path]
    target = info.audio[0].index
    graph = (f"[{input_index}:a:0]{pad}[voice];[{input_index + 1}:{target}]{pad}[target];"
             f"[target][voice]amix=inputs=2:duration=first:dropout_transition=0[mixed]")
    return AudioArgs(inputs, ["-map", "[mixed]"], ["-filter_complex", graph] + outputs)


def pcm_decode_args(path: str | os.PathLike, *, start: float = 0.0, rate: int = 48000,
                    channels: int = 2) -> list[str]:
    """ffmpeg argv: the first audio stream of ``path`` from ``start`` seconds, as interleaved
    signed 16-bit little-endian samples of ``channels`` channels at ``rate`` Hz on stdout
    (FaceFusion's ``read_audio_buffer``: ``-vn -f s16le -acodec pcm_s16le -ar -ac``)."""
    argv = list(BASE)
    if start > 0:
        argv += ["-ss", fmt_time(start)]
    return argv + ["-i", os.fspath(path), "-map", "0:a:0", "-vn", "-sn", "-dn",
                   "-acodec", "pcm_s16le", "-ar", str(rate), "-ac", str(channels),
                   "-f", "s16le", "pipe:1"]
