"""Frames of an MP4's video track counted from its index, in-process.

A committed segment must hold exactly the frames the renderer wrote. For the MP4/MOV segments our
own encoder writes (one video track, the audio tracks of a one-segment plan, ``moov`` + one
``mdat``), the index says how many samples there are and where each lies; checking that every
sample lies inside the ``mdat`` that is really on disk is what ``ffprobe -count_packets`` checks by
reading the packets, without starting a process for each segment. Anything this reader does not
know (fragmented MP4, no or several video tracks, 64-bit sizes it cannot trust) returns None, and
the caller asks ffprobe.
"""
from __future__ import annotations

import os
import struct
from typing import BinaryIO



def _boxes(fh: BinaryIO, start: int, end: int):
    """(type, payload offset, payload end) of each box between ``start`` and ``end``."""
    pos = start
    while pos + 8 <= end:
        fh.seek(pos)
        size, kind = struct.unpack(">I4s", fh.read(8))
        header = 8
        if size == 1:
            size = struct.unpack(">Q", fh.read(8))[0]
            header = 16
        elif size == 0:
            size = end - pos
        if size < header:
            raise ValueError("box smaller than its header")
        yield kind, pos + header, pos + size
        pos += size


def _full_box(fh: BinaryIO, start: int, fmt: str) -> tuple:
    fh.seek(start + 4)                                # version + flags
    return struct.unpack(fmt, fh.read(struct.calcsize(fmt)))


def _table(fh: BinaryIO, start: int, end: int, count: int, fmt: str) -> list:
    size = struct.calcsize(fmt)
    if start + count * size > end:
        raise ValueError("table longer than its box")
    fh.seek(start)
    data = fh.read(count * size)
    return list(struct.iter_unpack(fmt, data)) if count else []


def sample_count(path: str | os.PathLike) -> int | None:
    """Samples of the only video track of ``path`` whose bytes lie inside the file's ``mdat``;
    None when the file is not an MP4 this reader understands (ask ffprobe then)."""
    try:
        with open(path, "rb") as fh:
            file_end = os.fstat(fh.fileno()).st_size
            top = {}
            for kind, a, b in _boxes(fh, 0, file_end):
                if kind in (b"moov", b"mdat", b"moof"):
                    if kind in top:
                        return None                   # several mdat/moov: not ours
                    top[kind] = (a, min(b, file_end))
            if b"moof" in top or b"moov" not in top or b"mdat" not in top:
                return None
            traks = [(a, b) for kind, a, b in _boxes(fh, *top[b"moov"]) if kind == b"trak"]
            video = [t for t in traks if _handler(fh, t) == b"vide"]
            if len(video) != 1:
                return None
            stbl = _find(fh, video[0], (b"mdia", b"minf", b"stbl"))
            if stbl is None:
                return None
            boxes = {kind: (a, b) for kind, a, b in _boxes(fh, *stbl)}
            if b"stsz" not in boxes or b"stsc" not in boxes or \
                    (b"stco" not in boxes and b"co64" not in boxes):
                return None
            a, b = boxes[b"stsz"]
            fixed, count = _full_box(fh, a, ">II")
            sizes = [fixed] * count if fixed else [s for (s,) in _table(fh, a + 12, b, count, ">I")]
            a, b = boxes[b"stsc"]
            (n,) = _full_box(fh, a, ">I")
            runs = _table(fh, a + 8, b, n, ">III")      # first chunk (1-based), samples per chunk, desc
            if b"co64" in boxes:
                a, b = boxes[b"co64"]
                (n,) = _full_box(fh, a, ">I")
                offsets = [o for (o,) in _table(fh, a + 8, b, n, ">Q")]
            else:
                a, b = boxes[b"stco"]
                (n,) = _full_box(fh, a, ">I")
                offsets = [o for (o,) in _table(fh, a + 8, b, n, ">I")]
    except (OSError, ValueError, struct.error):
        return None
    data_start, data_end = top[b"mdat"]
    inside, sample = 0, 0
    for chunk, offset in enumerate(offsets, start=1):
        per_chunk = 0
        for first, samples, _ in runs:
            if first <= chunk:
                per_chunk = samples
        pos = offset
        for _ in range(per_chunk):
            if sample >= len(sizes):
                break
            pos += sizes[sample]
            sample += 1
            if offset < data_start or pos > data_end:
                return inside                         # a sample outside the data on disk
            inside += 1
    return inside if sample == len(sizes) else None


def _find(fh: BinaryIO, box: tuple[int, int], path: tuple[bytes, ...]) -> tuple[int, int] | None:
    a, b = box
    for name in path:
        found = next(((x, y) for kind, x, y in _boxes(fh, a, b) if kind == name), None)
        if found is None:
            return None
        a, b = found
    return a, b


def _handler(fh: BinaryIO, trak: tuple[int, int]) -> bytes | None:
    """The handler type of a track (``vide``, ``soun`` ...): mdia/hdlr, after version, flags and
    pre_defined."""
    hdlr = _find(fh, trak, (b"mdia", b"hdlr"))
    if hdlr is None or hdlr[1] - hdlr[0] < 12:
        return None
    fh.seek(hdlr[0] + 8)
    return fh.read(4)
