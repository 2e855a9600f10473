"""Frames of a finished output, by number: one accurate seek per frame (ffmpeg decodes from the
keyframe before it and drops what comes first), at the midpoint between the frame's timestamp
and the one before (the output's own packet times: exact for variable frame rates too)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np

from ..errors import MediaError
from ..media import FrameReader, decoded_size, segment_decode_args
from ..media.info import MediaInfo
from ..media.timing import FrameTimes, frame_times


def seek_time(times: FrameTimes, n: int) -> float | None:
    """Seconds from the container's start where an accurate seek gives frame ``n`` first (None:
    from the start)."""
    if n <= 0 or not times.pts:
        return None
    n = min(n, len(times.pts) - 1)
    return times.first + (times.pts[n - 1] + times.pts[n]) / 2


def read_output_frames(info: MediaInfo, numbers: Iterable[int]) -> dict[int, np.ndarray]:
    """The frames ``numbers`` (from 0) of the video ``info`` describes, BGR; a number past the
    end gives the last frame."""
    times = frame_times(info)
    width, height = decoded_size(info)
    out: dict[int, np.ndarray] = {}
    for n in sorted(set(numbers)):
        argv = segment_decode_args(info, seek=seek_time(times, n), frames=1)
        with FrameReader(argv, width, height, name=Path(info.path).name) as reader:
            frame = reader.read()
            while reader.read() is not None:      # to its end: the decoder is reaped and checked
                pass
        if frame is None:
            raise MediaError(f"cannot read frame {n} of {info.path}")
        out[n] = frame
    return out
