"""Media I/O: probe a target, build ffmpeg argv, stream raw bgr24 frames in and out."""
from __future__ import annotations

from .args import EncodeSettings, audio_plan, decode_args, decoded_size, encode_args, image_encode_args
from .formats import final_path, is_image_path, output_format
from .probe import AudioStream, MediaInfo, probe
from .reader import FrameReader, reap
from .stderr import last_meaningful_line
from .tools import ffmpeg_version
from .writer import AtomicOutput, FrameWriter, ensure_output_dir

__all__ = [
    "AtomicOutput",
    "AudioStream",
    "EncodeSettings",
    "FrameReader",
    "FrameWriter",
    "MediaInfo",
    "audio_plan",
    "decode_args",
    "decoded_size",
    "encode_args",
    "ensure_output_dir",
    "ffmpeg_version",
    "final_path",
    "image_encode_args",
    "is_image_path",
    "last_meaningful_line",
    "output_format",
    "probe",
    "reap",
]
