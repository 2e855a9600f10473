"""Reproducible C2PA manifests: the signed bytes depend only on the input file, ``version``,
``title``, ``instance`` and the signing key.

What c2pa-rs would otherwise draw at random, and what is done about it:

- the manifest label ``urn:c2pa:<uuid>`` and ``instance_id``: given in the manifest definition,
  derived from ``instance`` by ``manifest_ids``. The label must be a version-4 UUID (c2pa-rs
  answers "invalid Claim GUID" for a UUID5), so it is a hash laid out as a v4 UUID;
  ``instance_id`` is ``xmp:iid:`` + a UUID5.
- a 16-byte salt (JUMBF ``c2sh`` box) per assertion (here ``c2pa.actions.v2`` and
  ``c2pa.hash.data`` / ``c2pa.hash.bmff.v3``): c2pa-rs takes it from the OS random generator
  (``DefaultSalt``) with no setting or definition field to fix it. After the library has signed,
  ``make_reproducible`` replaces each salt of its own manifest by HMAC-SHA256(key derived from
  the private key; manifest label, assertion label and content)[:16] - secret to anyone without
  the key, like a random salt, but reproducible - rewrites the assertion hashes in the claim
  (same length) and signs the claim again (COSE_Sign1, detached payload; the sizes do not change,
  so the file's hard binding, which excludes the manifest, stays correct).
- the signature: Ed25519 is deterministic (RFC 8032), ECDSA (a user's or an older local P-256
  key) is signed with RFC 6979 deterministic nonces. RSA-PSS (PS256) has a random salt of its
  own: such outputs keep the library's signature (not reproducible).

c2pa-rs 0.91.3 puts no clock time anywhere in the manifest (COSE header: alg, x5chain, pad), and
no time-stamp authority is asked (there is no network).

The rewritten file is validated with the library's reader before it is kept; if it does not
validate (a future c2pa-rs lays the manifest out differently), or the manifest is not found as one
run of bytes in the file (a JPEG manifest over 64 kB spans APP11 segments), the library's own
signed bytes are kept, with a warning.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import mmap
import os
import struct
import uuid
import zlib
from pathlib import Path
from typing import Callable

from .identity import Credentials

log = logging.getLogger(__name__)

_DETERMINISTIC_ALGS = frozenset({"ed25519", "es256", "es384", "es512"})


def manifest_ids(instance: str) -> tuple[str, str]:
    """(manifest label, instance_id) derived from ``instance``.

    c2pa-rs accepts only a version-4 UUID in a manifest label ("invalid Claim GUID" otherwise), so
    the label is a SHA-256 of ``instance`` laid out as one; ``instance_id`` takes a UUID5.
    """
    digest = hashlib.sha256(b"render c2pa manifest label\0" + instance.encode("utf-8")).digest()
    label = f"urn:c2pa:{uuid.UUID(bytes=digest[:16], version=4)}"
    return label, f"xmp:iid:{uuid.uuid5(uuid.NAMESPACE_URL, 'urn:render:c2pa:' + instance)}"


def make_reproducible(tmp: Path, mime: str, manifest: bytes, label: str, creds: Credentials,
                      *, read_back: Callable[[Path, str], tuple]) -> bool:
    """Make the manifest store ``manifest`` that the library embedded in ``tmp`` reproducible, in
    place (module docstring).

    ``read_back(path, mime)``: the library's reading of a file, as (an object with ``valid`` and
    ``describe()``, the active manifest's label). True when done and the file still validates;
    False, with the library's bytes left (or put back) as they were, for an RSA key or a layout
    this code does not know.
    """
    from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm

    if creds.alg not in _DETERMINISTIC_ALGS:
        return False
    try:
        new = rewrite_store(manifest, label, creds)
    except (ValueError, IndexError, KeyError, InvalidSignature, UnsupportedAlgorithm) as exc:
        log.warning("C2PA manifest of %s left as c2pa-rs wrote it, not reproducible: %s",
                    tmp.name, exc or type(exc).__name__)
        return False
    with open(tmp, "r+b") as f:
        at = _find_in_file(f, manifest)
        crc_at = None
        if at >= 0 and mime == "image/png":  # caBX chunk: length, type, manifest, CRC
            f.seek(at - 8)
            if f.read(8) != struct.pack(">I", len(manifest)) + b"caBX":
                at = -1
            crc_at = at + len(manifest)
        if at < 0:
            log.warning("C2PA manifest of %s left as c2pa-rs wrote it, not reproducible: it is "
                        "not one run of bytes in the file", tmp.name)
            return False
        _patch_manifest(f, at, new, crc_at)
    info, active = read_back(tmp, mime)
    if info.valid and active == label:
        return True
    log.warning("C2PA manifest of %s left as c2pa-rs wrote it, not reproducible: the rewritten "
                "manifest does not validate (%s)", tmp.name, info.describe())
    with open(tmp, "r+b") as f:
        _patch_manifest(f, at, manifest, crc_at)
    return False


def _find_in_file(f, needle: bytes) -> int:
    if os.fstat(f.fileno()).st_size < len(needle) or not needle:
        return -1
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return mm.find(needle)


def _patch_manifest(f, at: int, data: bytes, crc_at: int | None) -> None:
    f.seek(at)
    f.write(data)
    if crc_at is not None:
        f.seek(crc_at)
        f.write(struct.pack(">I", zlib.crc32(b"caBX" + data) & 0xFFFFFFFF))
    f.flush()
    os.fsync(f.fileno())


def rewrite_store(store: bytes, label: str, creds: Credentials) -> bytes:
    """``store`` (a JUMBF manifest store) with manifest ``label``'s assertion salts derived from
    the key and the content, the claim's hashes of those assertions rewritten and the claim
    signed again. Same length as ``store``. ValueError (or IndexError, KeyError,
    InvalidSignature) when the layout is not the one c2pa-rs 0.91.3 writes."""
    from cryptography.hazmat.primitives import serialization

    buf = bytearray(store)
    top = _jumbf_boxes(buf, 0, len(buf))
    if len(top) != 1 or top[0][0] != b"jumb":
        raise ValueError("not one JUMBF manifest store")
    kind, _, _, _, manifests = _jumbf_superbox(buf, top[0][1], top[0][2])
    ours = [(s, e) for t, s, e in manifests
            if kind == b"c2pa" and t == b"jumb" and _jumbf_superbox(buf, s, e)[1] == label]
    if len(ours) != 1:
        raise ValueError(f"manifest {label} not found in the store")
    parts: dict[bytes, list[tuple[int, int, list]]] = {}
    for t, s, e in _jumbf_superbox(buf, *ours[0])[4]:
        if t == b"jumb":
            k, _, _, _, kids = _jumbf_superbox(buf, s, e)
            parts.setdefault(k, []).append((s, e, kids))
    (assertions,), (claim_box,), (sig_box,) = parts[b"c2as"], parts[b"c2cl"], parts[b"c2cs"]
    claim_at, claim_end = _jumbf_content(claim_box[2])
    cose_at, cose_end = _jumbf_content(sig_box[2])
    old_claim = bytes(buf[claim_at:claim_end])

    private = serialization.load_pem_private_key(creds.key_pem, password=None)
    secret = hmac.new(b"render c2pa assertion salt", creds.key_pem, hashlib.sha256).digest()
    hashes_to_swap = []
    for t, s, e in assertions[2]:
        if t != b"jumb":
            continue
        _, alabel, salt, content_at, _ = _jumbf_superbox(buf, s, e)
        if salt is None:
            continue
        before = bytes(buf[s + 8:e])  # an assertion's hash covers its superbox minus the header
        algs = [a for a in ("sha256", "sha384", "sha512")
                if old_claim.count(hashlib.new(a, before).digest()) == 1]
        if len(algs) != 1:
            raise ValueError(f"hash of assertion {alabel} not found in the claim")
        old_hash = hashlib.new(algs[0], before).digest()
        if bytes(buf).count(old_hash) != 1:
            raise ValueError(f"hash of assertion {alabel} is referenced outside the claim")
        n = salt[1] - salt[0]
        if not 16 <= n <= 32:
            raise ValueError(f"salt of {n} bytes")
        msg = b"\0".join((label.encode(), (alabel or "").encode(), bytes(buf[content_at:e])))
        buf[salt[0]:salt[1]] = hmac.new(secret, msg, hashlib.sha256).digest()[:n]
        hashes_to_swap.append((old_hash, hashlib.new(algs[0], bytes(buf[s + 8:e])).digest()))
    new_claim = old_claim
    for old_hash, new_hash in hashes_to_swap:
        new_claim = new_claim.replace(old_hash, new_hash)
    buf[claim_at:claim_end] = new_claim

    cose = bytes(buf[cose_at:cose_end])
    sig_at, sig_len, protected = _cose_sign1_parts(cose)
    _cose_verify(private, creds.alg, _sig_structure(protected, old_claim),
                 cose[sig_at:sig_at + sig_len])  # the library signed what we think it did
    signature = _cose_sign(private, creds.alg, _sig_structure(protected, new_claim))
    if len(signature) != sig_len:
        raise ValueError("signature length changed")
    buf[cose_at + sig_at:cose_at + sig_at + sig_len] = signature
    if len(buf) != len(store):
        raise ValueError("manifest length changed")
    return bytes(buf)


def _jumbf_boxes(buf, start: int, end: int) -> list[tuple[bytes, int, int]]:
    """(type, start, end) of the boxes in buf[start:end] (32-bit sizes, as c2pa-rs writes)."""
    out, pos = [], start
    while pos < end:
        if pos + 8 > end:
            raise ValueError("truncated JUMBF box")
        (n,) = struct.unpack(">I", buf[pos:pos + 4])
        if n < 8 or pos + n > end:
            raise ValueError(f"unexpected JUMBF box size {n}")
        out.append((bytes(buf[pos + 4:pos + 8]), pos, pos + n))
        pos += n
    return out


def _jumbf_superbox(buf, start: int, end: int):
    """(type 4CC, label, salt range or None, where the content starts, content boxes) of the
    JUMBF superbox buf[start:end]."""
    kids = _jumbf_boxes(buf, start + 8, end)
    if buf[start + 4:start + 8] != b"jumb" or not kids or kids[0][0] != b"jumd":
        raise ValueError("JUMBF superbox without description box")
    _, d, d_end = kids[0]
    d += 8
    if d_end - d < 17:
        raise ValueError("short JUMBF description box")
    kind, toggles, pos = bytes(buf[d:d + 4]), buf[d + 16], d + 17
    label = None
    if toggles & 0x02:
        nul = bytes(buf[pos:d_end]).index(b"\0") + pos
        label = bytes(buf[pos:nul]).decode("utf-8")
        pos = nul + 1
    pos += (4 if toggles & 0x04 else 0) + (32 if toggles & 0x08 else 0)
    salt = None
    if toggles & 0x10:  # private box: c2pa's salt
        for t, s, e in _jumbf_boxes(buf, pos, d_end):
            if t == b"c2sh":
                salt = (s + 8, e)
    return kind, label, salt, d_end, kids[1:]


def _jumbf_content(kids: list) -> tuple[int, int]:
    if len(kids) != 1:
        raise ValueError("expected one content box")
    return kids[0][1] + 8, kids[0][2]


def _cbor_head(b: bytes, i: int) -> tuple[int, int, int]:
    """(major type, argument, position after the head) of the CBOR item at b[i]."""
    major, info = b[i] >> 5, b[i] & 31
    if info < 24:
        return major, info, i + 1
    size = {24: 1, 25: 2, 26: 4, 27: 8}.get(info)
    if size is None:
        raise ValueError("indefinite-length CBOR")
    return major, int.from_bytes(b[i + 1:i + 1 + size], "big"), i + 1 + size


def _cbor_skip(b: bytes, i: int) -> int:
    major, arg, i = _cbor_head(b, i)
    if major in (2, 3):
        return i + arg
    if major in (4, 5):
        for _ in range(arg * (2 if major == 5 else 1)):
            i = _cbor_skip(b, i)
        return i
    if major == 6:
        return _cbor_skip(b, i)
    return i


def _cbor_bytes_head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for info, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size):
            return bytes([major << 5 | info]) + n.to_bytes(size, "big")
    raise ValueError("CBOR item too long")


def _cose_sign1_parts(cose: bytes) -> tuple[int, int, bytes]:
    """(signature offset, signature length, protected header bytes) of a tagged COSE_Sign1 with
    a detached payload."""
    major, tag, i = _cbor_head(cose, 0)
    if (major, tag) != (6, 18):
        raise ValueError("not a COSE_Sign1")
    major, n, i = _cbor_head(cose, i)
    if (major, n) != (4, 4):
        raise ValueError("not a COSE_Sign1")
    major, n, j = _cbor_head(cose, i)
    if major != 2:
        raise ValueError("COSE protected header is not a byte string")
    protected, i = cose[j:j + n], j + n
    i = _cbor_skip(cose, i)  # unprotected header (c2pa-rs: only "pad")
    if cose[i] != 0xF6:
        raise ValueError("COSE payload is not detached")
    major, n, j = _cbor_head(cose, i + 1)
    if major != 2 or j + n != len(cose):
        raise ValueError("unexpected COSE signature field")
    return j, n, protected


def _sig_structure(protected: bytes, payload: bytes) -> bytes:
    """COSE Sig_structure ["Signature1", protected, external_aad = h'', payload] (RFC 9052)."""
    return (b"\x84" + _cbor_bytes_head(3, 10) + b"Signature1"
            + _cbor_bytes_head(2, len(protected)) + protected + _cbor_bytes_head(2, 0)
            + _cbor_bytes_head(2, len(payload)) + payload)


def _ecdsa_hash(alg: str):
    from cryptography.hazmat.primitives import hashes

    return {"es256": hashes.SHA256, "es384": hashes.SHA384, "es512": hashes.SHA512}[alg]()


def _cose_sign(private, alg: str, data: bytes) -> bytes:
    """A COSE signature of ``data``: Ed25519 (deterministic by design) or ECDSA with RFC 6979
    nonces, as raw r || s."""
    from cryptography.hazmat.primitives.asymmetric import ec, utils

    if alg == "ed25519":
        return private.sign(data)
    der = private.sign(data, ec.ECDSA(_ecdsa_hash(alg), deterministic_signing=True))
    r, s = utils.decode_dss_signature(der)
    n = (private.curve.key_size + 7) // 8
    return r.to_bytes(n, "big") + s.to_bytes(n, "big")


def _cose_verify(private, alg: str, data: bytes, signature: bytes) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec, utils

    public = private.public_key()
    if alg == "ed25519":
        public.verify(signature, data)
        return
    n = len(signature) // 2
    der = utils.encode_dss_signature(int.from_bytes(signature[:n], "big"),
                                     int.from_bytes(signature[n:], "big"))
    public.verify(der, data, ec.ECDSA(_ecdsa_hash(alg)))
