"""Media I/O: probe a target, build ffmpeg argv, stream raw bgr24 frames in and out."""
from __future__ import annotations

from .audio_args import Soundtrack, audio_plan, audio_span, pcm_decode_args
from .formats import (ALPHA_FORMATS, SEGMENT_MUXERS, final_path, is_image_path, output_format,
                      segment_muxer)
from .probe import AudioStream, MediaInfo, probe
from .reader import FrameReader, reap
from .segment_args import (
    assemble_args,
    concat_list,
    join_args,
    retime_args,
    segment_decode_args,
    segment_encode_args,
    timestamps_file,
)
from .stderr import last_meaningful_line
from .tools import ffmpeg_version
from .video_args import EncodeSettings, decode_args, decoded_size, encode_args, image_encode_args
from .writer import AtomicOutput, FrameWriter, ensure_output_dir

__all__ = [
    "ALPHA_FORMATS",
    "AtomicOutput",
    "AudioStream",
    "EncodeSettings",
    "FrameReader",
    "FrameWriter",
    "MediaInfo",
    "SEGMENT_MUXERS",
    "Soundtrack",
    "assemble_args",
    "audio_plan",
    "audio_span",
    "concat_list",
    "decode_args",
    "decoded_size",
    "encode_args",
    "ensure_output_dir",
    "ffmpeg_version",
    "final_path",
    "image_encode_args",
    "is_image_path",
    "join_args",
    "last_meaningful_line",
    "output_format",
    "pcm_decode_args",
    "probe",
    "reap",
    "retime_args",
    "segment_muxer",
    "segment_decode_args",
    "segment_encode_args",
    "timestamps_file",
]
