"""The C2PA manifest, made and read with c2pa-python (checked with 0.38.1, c2pa-rs 0.91.3).

One ``c2pa.actions`` assertion, action ``c2pa.created`` with the IPTC digital source type of
declaration.py, ``softwareAgent`` and ``claim_generator_info`` naming render and its version.
The action is ``created``, not ``edited``: C2PA 2.x wants an edit to name its parent ingredient,
and render does not embed the target (its hash, thumbnail and any manifest) in the output.
Manifest thumbnails are off: one would be a full-size JPEG copy of the picture.

Formats. Signed and read back successfully here (files written by ffmpeg): mp4, m4v, mov, png,
jpeg, webp. Not supported (c2pa-rs has no Matroska support; ``Builder.sign`` answers
"NotSupported: type is unsupported"): mkv, webm. Those get the metadata tag only;
``c2pa_supported`` tells which is which.

Trust. A local certificate (identity.py) is on no trust list: the library reports the
validation state "Valid" with the failure code ``signingCredential.untrusted``. ``read_manifest``
maps that to ``valid=True, trusted=False`` (signature and hashes check out, the data is
untouched) and keeps the untrusted code out of ``errors``; a flipped byte in the media data gives
state "Invalid" (``assertion.bmffHash.mismatch`` / ``assertion.dataHash.mismatch``), so
``valid=False``.

Reproducible: with an Ed25519 or EC key the signed bytes are a function of (file, version,
title, instance, key) (reproducible.py).

Cost. Signing rewrites the whole file (a full copy beside it until the rename). The reproducible
rewrite adds a hash of the input (when no ``instance`` is given), a search for the manifest in the
signed file (mmap) and one read-back validation.

Without c2pa-python ``sign`` and ``read_manifest`` raise ``C2paUnavailable`` rather than skip
the mark silently; ``c2pa_available()`` lets a caller decide first; ``c2pa_supported`` does not
need it. c2pa-python and ``cryptography`` are imported when first used (``load_libraries``
imports them ahead).
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, RenderFailed
from ..files import fsync_dir
from .declaration import DIGITAL_SOURCE_TYPE, SOFTWARE, SYNTHETIC_SOURCE_TYPES
from .errors import C2paUnavailable, MarkError, SigningKeyError
from .formats import C2PA_MIME, ext, mime_of, open_file
from .identity import LOCAL_ORG, Credentials, load_credentials, local_signing_identity
from .reproducible import make_reproducible, manifest_ids

UNTRUSTED_CODE = "signingCredential.untrusted"


@dataclass(frozen=True)
class SignResult:
    """What ``sign`` embedded: the file, its MIME type and the signing certificate used."""

    path: Path
    mime: str
    cert_sha256: str  # of the end-entity certificate
    local_cert: bool  # True: the local identity in key_dir; False: the user's cert/key
    manifest_size: int  # bytes of the embedded manifest store
    manifest_label: str  # urn:c2pa:<uuid>, derived from ``instance``
    deterministic: bool  # the same input, parameters and key give the same bytes (not for RSA)


@dataclass(frozen=True)
class ManifestInfo:
    """What ``read_manifest`` found. ``valid``: signature and hashes check out (data untouched);
    ``trusted``: the signer is on the library's trust list (never for the local certificate)."""

    supported: bool  # C2PA covers this format
    present: bool
    valid: bool = False
    trusted: bool = False
    state: str | None = None  # the library's validation_state: Valid, Trusted, Invalid
    errors: tuple[str, ...] = ()  # "code: explanation", trust codes left out
    digital_source_type: str | None = None
    claim_generator: str | None = None  # "render 0.1.0"
    software_agent: str | None = None  # of the action that declares the source type
    title: str | None = None
    signer: str | None = None  # "common name (issuer)"
    issuer: str | None = None
    codes: tuple[str, ...] = ()  # every failure code, trust ones included

    @property
    def synthetic(self) -> bool:
        return self.digital_source_type in SYNTHETIC_SOURCE_TYPES

    def describe(self) -> str:
        """One line for ``render verify``, e.g. 'valid (untrusted local certificate)'."""
        if not self.supported:
            return "no C2PA manifest (format not supported by C2PA)"
        if not self.present:
            return "no C2PA manifest"
        if not self.valid:
            return "invalid: " + ("; ".join(self.errors) or f"validation state {self.state}")
        if self.trusted:
            return "valid (trusted certificate)"
        if self.issuer == LOCAL_ORG:
            return "valid (untrusted local certificate)"
        return "valid (untrusted certificate)"


def c2pa_available() -> bool:
    """True when c2pa-python can be imported."""
    try:
        _import_c2pa()
    except C2paUnavailable:
        return False
    return True


def load_libraries() -> None:
    """Import what :func:`sign` needs (c2pa-python's native library, ``cryptography``), so that
    the first signature does not pay for it at the end of a render. Missing ones are left for
    :func:`sign` to report."""
    try:
        import c2pa  # noqa: F401
        from cryptography import x509  # noqa: F401
        from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm  # noqa: F401
        from cryptography.hazmat.primitives import hashes, serialization  # noqa: F401
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: F401
    except Exception:  # noqa: BLE001 - best effort: sign() imports them again and reports
        pass


def c2pa_version() -> str | None:
    """The installed c2pa-python's version (it decides the manifest's bytes), None without it."""
    try:
        from importlib.metadata import version

        return version("c2pa-python")
    except Exception:  # noqa: BLE001 - not installed
        return None


def c2pa_supported(path_or_ext: str | os.PathLike) -> bool:
    """True when a C2PA manifest can be embedded in files of this extension (mp4, m4v, mov, png,
    jpg/jpeg, webp); False for mkv, webm and anything else. Takes ``"mp4"``, ``".mp4"`` or a path;
    does not need c2pa-python."""
    return ext(path_or_ext) in C2PA_MIME


def sign(path: Path, *, version: str, key_dir: Path, cert: Path | None = None,
         key: Path | None = None, title: str | None = None,
         instance: str | None = None) -> SignResult:
    """Embed a C2PA manifest declaring ``path`` synthetic (see the module docstring), in place.

    Signs with ``cert`` (PEM chain, end-entity first) + ``key`` (unencrypted PEM) when given, else
    with the local identity in ``key_dir`` (created on first use). The signed file is written
    beside ``path``, fsynced, then renamed over it, keeping its permissions. The format is taken
    from the file's bytes (so ``clip.mp4.part-3`` works), falling back to the extension.

    ``instance``: a stable string naming this output (e.g. job id + output name); the manifest
    label and ``instance_id`` are derived from it, so a re-run gets the same IDs. Default: the
    SHA-256 of the unsigned file, with ``title`` and ``version``. With an Ed25519 or EC key the
    signed bytes are then a function of (file, version, title, instance, key):
    ``SignResult.deterministic`` (False for RSA keys, see reproducible.py).

    Raises ``MarkError`` for a format C2PA does not cover or a failed signature,
    ``C2paUnavailable`` without c2pa-python, ``SigningKeyError`` for an unusable cert/key,
    ``MediaError`` when ``path`` cannot be read.
    """
    path = Path(path)
    mime = mime_of(path)
    if mime is None:
        raise MarkError(f"cannot embed a C2PA manifest in {path.name}: C2PA covers "
                        "mp4/m4v/mov/png/jpeg/webp, not this format (it keeps the metadata tag)")
    c2pa = _import_c2pa()
    if (cert is None) != (key is None):
        raise SigningKeyError("give both a C2PA certificate chain and its private key, or neither")
    local = cert is None
    if local:
        cert, key = local_signing_identity(Path(key_dir))
    creds = load_credentials(Path(cert), Path(key), local=local)
    title = title or path.name
    if instance is None:
        instance = f"sha256:{_file_sha256(path)}\0{title}\0{version}"
    label, instance_id = manifest_ids(instance)
    definition = {
        "claim_generator_info": [{"name": SOFTWARE, "version": version}],
        "title": title,
        "format": mime,
        "label": label,
        "instance_id": instance_id,
        "assertions": [{
            "label": "c2pa.actions",
            "data": {"actions": [{
                "action": "c2pa.created",
                "digitalSourceType": DIGITAL_SOURCE_TYPE,
                "softwareAgent": {"name": SOFTWARE, "version": version},
            }]},
        }],
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.c2pa.tmp")
    try:
        try:
            signer = c2pa.Signer.from_info(
                c2pa.C2paSignerInfo(creds.alg.encode(), creds.chain_pem, creds.key_pem, None))
        except c2pa.C2paError as exc:
            raise _key_error(creds, cert, exc) from None
        with signer, c2pa.Context.from_dict(_c2pa_settings()) as ctx, \
                c2pa.Builder(definition, ctx) as builder, \
                open_file(path) as src, open(tmp, "w+b") as dst:
            manifest = builder.sign(signer, mime, src, dst)
            dst.flush()
            os.fsync(dst.fileno())
        manifest = bytes(manifest or b"")
        deterministic = make_reproducible(tmp, mime, manifest, label, creds,
                                          read_back=_read_manifest)
        os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        os.replace(tmp, path)
    except c2pa.C2paError as exc:
        if isinstance(exc, c2pa.C2paError.Signature):
            raise _key_error(creds, cert, exc) from None
        if _out_of_space(tmp):     # c2pa-rs names a failed write only by its own terms
            raise MarkError(f"cannot write the signed {path}: {os.strerror(errno.ENOSPC)} "
                            f"(c2pa: {exc})") from None
        raise MarkError(f"C2PA signing of {path} failed: {exc}") from None
    except OSError as exc:
        raise MarkError(f"cannot write the signed {path}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return SignResult(path, mime, creds.fingerprint, local, len(manifest), label, deterministic)


def _out_of_space(path: Path) -> bool:
    """Whether the filesystem of ``path`` (the signed file being written) is full."""
    try:
        return shutil.disk_usage(path.parent).free < 1024 * 1024
    except OSError:
        return False


def read_manifest(path: Path) -> ManifestInfo:
    """Read and validate the C2PA manifest embedded in ``path`` (without network: no OCSP/TSA).

    A file of a format C2PA does not cover gives ``supported=False, present=False``. Raises
    ``C2paUnavailable`` without c2pa-python, ``MediaError`` when ``path`` cannot be read.
    """
    path = Path(path)
    mime = mime_of(path)
    if mime is None:
        open_file(path).close()  # a missing file is still an error
        return ManifestInfo(supported=False, present=False)
    return _read_manifest(path, mime)[0]


def _read_manifest(path: Path, mime: str) -> tuple[ManifestInfo, str | None]:
    """(what ``read_manifest`` reports, the active manifest's label) of ``path`` as ``mime``."""
    c2pa = _import_c2pa()
    try:
        with c2pa.Context.from_dict(_c2pa_settings()) as ctx, open_file(path) as f, \
                c2pa.Reader(mime, f, None, ctx) as reader:
            store = json.loads(reader.json())
    except c2pa.C2paError.ManifestNotFound:
        return ManifestInfo(supported=True, present=False), None
    except c2pa.C2paError as exc:  # a manifest store that cannot even be parsed
        return ManifestInfo(supported=True, present=True, errors=(str(exc),)), None
    return _manifest_info(store), store.get("active_manifest")


def _manifest_info(store: dict) -> ManifestInfo:
    manifests = store.get("manifests") or {}
    active = manifests.get(store.get("active_manifest") or "") or {}
    state = store.get("validation_state")
    statuses = store.get("validation_status")
    if statuses is None:
        statuses = ((store.get("validation_results") or {}).get("activeManifest") or {}) \
            .get("failure", [])
    codes = tuple(str(s.get("code")) for s in statuses)
    errors = tuple(f"{s.get('code')}: {s.get('explanation', '')}".rstrip(": ")
                   for s in statuses if s.get("code") != UNTRUSTED_CODE)
    valid = state in ("Valid", "Trusted") if state else not errors
    source_type = agent = None
    for assertion in active.get("assertions") or []:
        if not str(assertion.get("label", "")).startswith("c2pa.actions"):
            continue
        for action in (assertion.get("data") or {}).get("actions") or []:
            if action.get("digitalSourceType") and source_type is None:
                source_type = action["digitalSourceType"]
                agent = _name_version(action.get("softwareAgent"))
    generator = active.get("claim_generator")
    infos = active.get("claim_generator_info") or []
    if infos:
        generator = _name_version(infos[0])
    sig = active.get("signature_info") or {}
    signer = sig.get("common_name")
    if signer and sig.get("issuer"):
        signer = f"{signer} ({sig['issuer']})"
    return ManifestInfo(
        supported=True, present=bool(active), valid=bool(active) and valid,
        trusted=state == "Trusted", state=state, errors=errors,
        digital_source_type=source_type, claim_generator=generator, software_agent=agent,
        title=active.get("title"), signer=signer, issuer=sig.get("issuer"), codes=codes)


def _name_version(value) -> str | None:
    if isinstance(value, dict):
        return " ".join(str(value[k]) for k in ("name", "version") if value.get(k)) or None
    return str(value) if value else None


def _c2pa_settings() -> dict:
    # No thumbnail in the manifest (a full JPEG copy of the picture); nothing else changed.
    return {"builder": {"thumbnail": {"enabled": False}}}


def _key_error(creds: Credentials, cert: Path, exc: Exception) -> RenderFailed | ConfigError:
    if creds.local:
        return MarkError(f"C2PA signing with the local certificate failed: {exc}")
    return SigningKeyError(
        f"C2PA refused the certificate chain {cert}: {exc} (it needs a non-self-signed signing "
        "certificate with digitalSignature key usage and an emailProtection or documentSigning "
        "EKU, followed by its CA)")


def _import_c2pa():
    try:
        import c2pa
    except ImportError as exc:
        raise C2paUnavailable(f"C2PA manifests need c2pa-python ({exc}): pip install "
                              "c2pa-python") from None
    return c2pa



def _file_sha256(path: Path) -> str:
    with open_file(path) as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
