"""The metadata tag inside image files, which ffmpeg's image writers leave without one.

- PNG: a ``tEXt`` "Comment" chunk before IEND (``iTXt`` if the text is not Latin-1).
- JPEG: a COM segment after SOI, the APPn segments that must stay first (JFIF/Exif) and any
  other COM.
- WebP (no comment chunk): an XMP chunk with ``dc:description`` and IPTC's
  ``Iptc4xmpExt:DigitalSourceType``, converting a simple WebP to the extended (VP8X) layout.

An earlier render tag is replaced; a file that already carries a C2PA manifest is refused (the
tag would invalidate it: tag first, then sign). ``WRITERS`` and ``READERS`` map a MIME type to
the functions for it.
"""
from __future__ import annotations

import html
import re
import struct
import zlib
from pathlib import Path

from ..errors import MediaError
from .declaration import DIGITAL_SOURCE_TYPE, TAG_PREFIX
from .errors import MarkError
from .formats import PNG_SIG

_PNG_TEXT_KEYS = (b"Comment", b"Description")
_XMP_LI = re.compile(r"<dc:description>\s*<rdf:Alt>\s*<rdf:li[^>]*>(.*?)</rdf:li>", re.S)


# PNG -----------------------------------------------------------------------------------------

def _png_chunks(data: bytes) -> list[tuple[bytes, bytes, int, int]]:
    """(type, payload, start, end) of every chunk; ValueError if the file is not a whole PNG."""
    if not data.startswith(PNG_SIG):
        raise ValueError("not a PNG")
    chunks, pos = [], len(PNG_SIG)
    while pos < len(data):
        if pos + 12 > len(data):
            raise ValueError("truncated PNG chunk")
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        ctype = data[pos + 4:pos + 8]
        end = pos + 12 + length
        if end > len(data):
            raise ValueError("truncated PNG chunk")
        chunks.append((ctype, data[pos + 8:pos + 8 + length], pos, end))
        pos = end
        if ctype == b"IEND":
            break
    if not chunks or chunks[-1][0] != b"IEND":
        raise ValueError("PNG without IEND")
    return chunks


def _png_text(ctype: bytes, payload: bytes) -> tuple[bytes, str] | None:
    """(keyword, text) of a tEXt/zTXt/iTXt chunk, None for other chunks or undecodable ones."""
    try:
        if ctype == b"tEXt":
            key, _, text = payload.partition(b"\0")
            return key, text.decode("latin-1")
        if ctype == b"zTXt":
            key, _, rest = payload.partition(b"\0")
            return key, zlib.decompress(rest[1:]).decode("latin-1")
        if ctype == b"iTXt":
            key, _, rest = payload.partition(b"\0")
            flag, rest = rest[0], rest[2:]
            _lang, _, rest = rest.partition(b"\0")
            _tkey, _, text = rest.partition(b"\0")
            return key, (zlib.decompress(text) if flag else text).decode("utf-8")
    except (IndexError, zlib.error, UnicodeDecodeError):
        return None
    return None


def _png_texts(data: bytes) -> list[str]:
    out = []
    for ctype, payload, _, _ in _png_chunks(data):
        kt = _png_text(ctype, payload)
        if kt and kt[0] in _PNG_TEXT_KEYS:
            out.append(kt[1])
    return out


def _png_chunk(ctype: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(ctype + payload) & 0xFFFFFFFF
    return struct.pack(">I", len(payload)) + ctype + payload + struct.pack(">I", crc)


def _png_with_tag(data: bytes, text: str, path: Path) -> bytes:
    try:
        chunks = _png_chunks(data)
    except ValueError as exc:
        raise MediaError(f"cannot tag {path}: damaged PNG ({exc})") from None
    if any(c[0] == b"caBX" for c in chunks):
        raise MarkError(f"cannot tag {path}: it already carries a C2PA manifest, which the tag "
                        "would invalidate (tag first, then sign)")
    try:
        chunk = _png_chunk(b"tEXt", b"Comment\0" + text.encode("latin-1"))
    except UnicodeEncodeError:
        chunk = _png_chunk(b"iTXt", b"Comment\0\0\0\0\0" + text.encode("utf-8"))
    out = bytearray(PNG_SIG)
    for ctype, payload, start, end in chunks:
        kt = _png_text(ctype, payload)
        if kt and kt[0] in _PNG_TEXT_KEYS and kt[1].startswith(TAG_PREFIX):
            continue  # an earlier render tag: replaced
        if ctype == b"IEND":
            out += chunk
        out += data[start:end]
    return bytes(out)


# JPEG ----------------------------------------------------------------------------------------

def _jpeg_segments(data: bytes) -> list[tuple[int, int, int]]:
    """(marker, start, end) of each marker segment from SOI up to, not including, SOS."""
    if not data.startswith(b"\xff\xd8"):
        raise ValueError("not a JPEG")
    segs, pos = [], 2
    while True:
        if pos + 4 > len(data) or data[pos] != 0xFF:
            raise ValueError("damaged JPEG header")
        while data[pos + 1] == 0xFF:  # fill bytes
            pos += 1
            if pos + 4 > len(data):
                raise ValueError("damaged JPEG header")
        marker = data[pos + 1]
        if marker in (0xDA, 0xD9):  # SOS / EOI: the header ends
            return segs
        (length,) = struct.unpack(">H", data[pos + 2:pos + 4])
        end = pos + 2 + length
        if length < 2 or end > len(data):
            raise ValueError("damaged JPEG segment")
        segs.append((marker, pos, end))
        pos = end


def _jpeg_texts(data: bytes) -> list[str]:
    return [data[s + 4:e].decode("utf-8", "replace") for m, s, e in _jpeg_segments(data)
            if m == 0xFE]


def _jpeg_with_tag(data: bytes, text: str, path: Path) -> bytes:
    try:
        segs = _jpeg_segments(data)
    except ValueError as exc:
        raise MediaError(f"cannot tag {path}: damaged JPEG ({exc})") from None
    if any(m == 0xEB and data[s + 4:s + 6] == b"JP" for m, s, e in segs):  # APP11 JUMBF
        raise MarkError(f"cannot tag {path}: it already carries a C2PA manifest, which the tag "
                        "would invalidate (tag first, then sign)")
    payload = text.encode("utf-8")
    com = b"\xff\xfe" + struct.pack(">H", len(payload) + 2) + payload
    # After SOI and the APPn run that must lead (JFIF APP0, Exif APP1), before the tables; after
    # any other COM (ffmpeg's "Lavc..."), since readers that show one comment show the last.
    insert_at = 2
    for m, s, e in segs:
        if 0xE0 <= m <= 0xEF and s == insert_at:
            insert_at = e
    for m, s, e in segs:
        if m == 0xFE and not data[s + 4:e].decode("utf-8", "replace").startswith(TAG_PREFIX):
            insert_at = max(insert_at, e)
    out = bytearray(data[:2])
    pos, inserted = 2, False
    for m, s, e in segs:
        if not inserted and s >= insert_at:
            out += com
            inserted = True
        out += data[pos:s]
        if not (m == 0xFE and data[s + 4:e].decode("utf-8", "replace").startswith(TAG_PREFIX)):
            out += data[s:e]
        pos = e
    if not inserted:
        out += com
    out += data[pos:]
    return bytes(out)


# WebP ----------------------------------------------------------------------------------------

def _webp_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        raise ValueError("not a WebP")
    chunks, pos = [], 12
    end_riff = min(len(data), 8 + struct.unpack("<I", data[4:8])[0])
    while pos + 8 <= end_riff:
        fourcc = data[pos:pos + 4]
        (length,) = struct.unpack("<I", data[pos + 4:pos + 8])
        if pos + 8 + length > len(data):
            raise ValueError("truncated WebP chunk")
        chunks.append((fourcc, data[pos + 8:pos + 8 + length]))
        pos += 8 + length + (length & 1)
    if not chunks:
        raise ValueError("empty WebP")
    return chunks


def _webp_texts(data: bytes) -> list[str]:
    out = []
    for fourcc, payload in _webp_chunks(data):
        if fourcc == b"XMP ":
            m = _XMP_LI.search(payload.decode("utf-8", "replace"))
            if m:
                out.append(html.unescape(m.group(1)))
    return out


def _xmp_packet(text: str) -> bytes:
    esc = html.escape(text, quote=False)
    return (
        '<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>'
        '<x:xmpmeta xmlns:x="adobe:ns:meta/">'
        '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        '<rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/"'
        ' xmlns:Iptc4xmpExt="http://iptc.org/std/Iptc4xmpExt/2008-02-29/">'
        f"<Iptc4xmpExt:DigitalSourceType>{DIGITAL_SOURCE_TYPE}</Iptc4xmpExt:DigitalSourceType>"
        f'<dc:description><rdf:Alt><rdf:li xml:lang="x-default">{esc}</rdf:li></rdf:Alt>'
        "</dc:description></rdf:Description></rdf:RDF></x:xmpmeta>"
        '<?xpacket end="w"?>'
    ).encode("utf-8")


def _webp_canvas(chunks: list[tuple[bytes, bytes]]) -> tuple[int, int, bool]:
    """(width, height, has_alpha) of a simple (VP8/VP8L) WebP."""
    fourcc, payload = chunks[0]
    if fourcc == b"VP8 " and len(payload) >= 10 and payload[3:6] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", payload[6:10])
        return w & 0x3FFF, h & 0x3FFF, False
    if fourcc == b"VP8L" and len(payload) >= 5 and payload[0] == 0x2F:
        (bits,) = struct.unpack("<I", payload[1:5])
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, bool((bits >> 28) & 1)
    raise ValueError("unknown WebP bitstream")


def _webp_with_tag(data: bytes, text: str, path: Path) -> bytes:
    try:
        chunks = _webp_chunks(data)
        if chunks[0][0] != b"VP8X":
            w, h, alpha = _webp_canvas(chunks)
            vp8x = struct.pack("<B3x", 0x10 if alpha else 0) + \
                (w - 1).to_bytes(3, "little") + (h - 1).to_bytes(3, "little")
            chunks = [(b"VP8X", vp8x)] + chunks
    except ValueError as exc:
        raise MediaError(f"cannot tag {path}: damaged WebP ({exc})") from None
    if any(c[0] == b"C2PA" for c in chunks):
        raise MarkError(f"cannot tag {path}: it already carries a C2PA manifest, which the tag "
                        "would invalidate (tag first, then sign)")
    kept = []
    for fourcc, payload in chunks:
        if fourcc == b"XMP ":
            m = _XMP_LI.search(payload.decode("utf-8", "replace"))
            if not (m and html.unescape(m.group(1)).startswith(TAG_PREFIX)):
                raise MarkError(f"cannot tag {path}: it already has XMP metadata of its own")
            continue  # an earlier render tag: replaced
        kept.append((fourcc, payload))
    vp8x = bytearray(kept[0][1])
    vp8x[0] |= 0x04  # XMP metadata present
    kept[0] = (b"VP8X", bytes(vp8x))
    kept.append((b"XMP ", _xmp_packet(text)))  # XMP is the last chunk of an extended WebP
    body = b"WEBP" + b"".join(f + struct.pack("<I", len(p)) + p + b"\0" * (len(p) & 1)
                              for f, p in kept)
    return b"RIFF" + struct.pack("<I", len(body)) + body


#: MIME type -> (bytes, tag text, path for messages) -> the bytes with the tag.
WRITERS = {"image/png": _png_with_tag, "image/jpeg": _jpeg_with_tag, "image/webp": _webp_with_tag}
#: MIME type -> bytes -> the texts a tag could be in (ValueError for a damaged file).
READERS = {"image/png": _png_texts, "image/jpeg": _jpeg_texts, "image/webp": _webp_texts}
