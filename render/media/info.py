"""What the renderer knows about a target once probed (:mod:`.probe` fills it in): below both
the probe and the frame times (:mod:`.timing`), which read it."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class AudioStream:
    """One audio stream of the target. ``index`` is the stream's index in the file (``-map 1:N``)."""

    index: int
    codec: str
    channels: int
    sample_rate: int
    duration: float | None = None


@dataclass(frozen=True)
class MediaInfo:
    """What the renderer needs to know about a target.

    - ``width``/``height``: display size (already swapped for rotation 90/270), i.e. the size of
      the frames the decoder produces.
    - ``fps``: ``avg_frame_rate`` (falling back to ``r_frame_rate``) as a Fraction, e.g. 30000/1001.
    - ``rotation``: 0/90/180/270, counterclockwise, ffprobe's display-matrix convention.
    - ``frame_count``: ``nb_frames`` when the container records it, else ``round(duration * fps)``:
      an ESTIMATE for variable-frame-rate files and for containers without a frame count
      (mkv/webm). Use it for progress bars, never to size or cut anything.
    - ``duration``: seconds of the video stream (container duration when the stream has none).
    - ``video_start``: seconds from the container's start to the first video timestamp (> 0 when
      the audio starts before the video; the encoder uses it to keep audio in sync).
    - ``color_*``: ffprobe's colour tags of the video stream (None when untagged).
    - ``video_index``: the video stream's index in the file (None: the first video stream).
    """

    path: str
    kind: str  # 'video' | 'image'
    width: int
    height: int
    fps: Fraction
    rotation: int
    pix_fmt: str | None
    frame_count: int
    duration: float
    audio: tuple[AudioStream, ...] = ()
    container: str = ""
    video_start: float = 0.0
    color_space: str | None = None
    color_primaries: str | None = None
    color_transfer: str | None = None
    color_range: str | None = None
    video_index: int | None = None

    @property
    def is_image(self) -> bool:
        return self.kind == "image"

    @property
    def has_audio(self) -> bool:
        return bool(self.audio)
