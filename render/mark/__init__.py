"""Mark outputs as synthetic media (EU AI Act Art. 50): a metadata tag and a C2PA manifest.

Two independent, machine-readable marks, each in a module of its own:

- declaration.py: what both marks say (made by render, ``compositeWithTrainedAlgorithmicMedia``).
- tags.py (image_tags.py for PNG/JPEG/WebP): the metadata tag. A video gets it from ffmpeg at
  encode time (``metadata_pairs``), an image after the encode (``tag_image``); ``read_tag``.
- c2pa.py: the C2PA manifest (``sign``, ``read_manifest``), signed with the identity of
  identity.py (the user's certificate, or a local one made on first use) and made reproducible
  by reproducible.py (the same file, version, title, instance and key give the same bytes).

Order matters: the tag must be written before signing (the manifest hashes the file);
``tag_image`` refuses a file that already carries a manifest. ``Marker`` is the whole marking
step and the one place that order is decided: a render makes one with ``Marker.for_render`` and
calls it on its finished temp file; ``mark_output`` runs it on any finished file.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .c2pa import (UNTRUSTED_CODE, ManifestInfo, SignResult, c2pa_available, c2pa_supported,
                   c2pa_version, load_libraries, read_manifest, sign)
from .declaration import (DIGITAL_SOURCE_TYPE, IPTC, SOFTWARE, SYNTHETIC_SOURCE_TYPES, TAG_PREFIX,
                          tag_text)
from .errors import C2paUnavailable, MarkError, SigningKeyError
from .formats import mime_of, sniff_file
from .identity import (LOCAL_CERT, LOCAL_KEY, LOCAL_ORG, cert_fingerprint, create_signing_identity,
                       local_signing_identity)
from .tags import metadata_pairs, read_tag, tag_image

if TYPE_CHECKING:
    from ..config import Mark

__all__ = [
    "C2paUnavailable", "DIGITAL_SOURCE_TYPE", "IPTC", "LOCAL_CERT", "LOCAL_KEY", "LOCAL_ORG",
    "ManifestInfo", "MarkError", "Marker", "SOFTWARE", "SYNTHETIC_SOURCE_TYPES", "SignResult",
    "SigningKeyError", "TAG_PREFIX", "UNTRUSTED_CODE", "c2pa_available", "c2pa_supported",
    "c2pa_version", "cert_fingerprint", "create_signing_identity", "load_libraries",
    "local_signing_identity", "mark_output", "metadata_pairs", "read_manifest", "read_tag", "sign",
    "tag_image", "tag_text",
]

log = logging.getLogger(__name__)


@dataclass
class Marker:
    """The marking step of one output. Called with the finished file (a render's temp file,
    before it is verified and committed), it writes both marks in order: an image's tag (a
    video's went in at encode time), then the C2PA manifest where the format has one. ``record``
    is what the report says of them, filled as each mark is made: ``{"enabled", "tag", "c2pa"}``.
    """

    version: str
    key_dir: Path  # the local signing identity, when no cert/key is given
    cert: Path | None = None
    key: Path | None = None
    enabled: bool = True
    kind: str | None = None  # "image" or "video"; None: from the file's bytes
    output: Path | None = None  # the name the file will have (title, report); None: its own
    title: str | None = None  # the manifest's title; None: the output's name
    instance: str | None = None  # see ``sign``
    require_c2pa: bool = False  # without c2pa-python: raise, rather than warn and keep the tag
    record: dict = field(default_factory=dict)  # a render passes the report's ``marks``

    def __post_init__(self) -> None:
        self.record.update({"enabled": self.enabled, "tag": None, "c2pa": None})

    @classmethod
    def for_render(cls, cfg_mark: Mark, *, kind: str, output: Path, cache_dir: Path,
                   instance: str, version: str, record: dict | None = None,
                   enabled: bool | None = None) -> Marker:
        """The marking step of a render of ``output`` (plan kind ``image`` or ``video``), as the
        ``mark`` section of its config asks (``enabled`` overrides its switch: the Config's
        ``marked``); the local identity lives in ``cache_dir/c2pa``."""
        return cls(version=version, key_dir=Path(cache_dir) / "c2pa",
                   cert=Path(cfg_mark.cert) if cfg_mark.cert else None,
                   key=Path(cfg_mark.key) if cfg_mark.key else None,
                   enabled=cfg_mark.enabled if enabled is None else enabled,
                   kind=kind, output=Path(output), instance=instance,
                   record=record if record is not None else {})

    def __call__(self, path: Path) -> SignResult | None:
        """Mark ``path`` in place; what ``sign`` embedded, or None (off, or no C2PA for it)."""
        if not self.enabled:
            return None
        path = Path(path)
        output = self.output or path
        image = self.kind == "image" if self.kind else \
            (sniff_file(path) or "").startswith("image/")
        if image:
            tag_image(path, version=self.version)
        self.record["tag"] = tag_text(self.version)
        if mime_of(path) is None:
            log.debug("%s: format not covered by C2PA, marked by its metadata tag only",
                      output.name)
            self.record["c2pa"] = {"signed": False, "reason": f"C2PA cannot be embedded in "
                                   f"{output.suffix} files (no Matroska support in c2pa-rs)"}
            return None
        try:
            signed = sign(path, version=self.version, key_dir=self.key_dir, cert=self.cert,
                          key=self.key, title=self.title or output.name, instance=self.instance)
        except C2paUnavailable as exc:
            if self.require_c2pa:
                raise
            log.warning("%s: no C2PA manifest (%s); the metadata tag is there", output.name, exc)
            self.record["c2pa"] = {"signed": False, "reason": str(exc)}
            return None
        self.record["c2pa"] = {"signed": True, "mime": signed.mime,
                               "cert_sha256": signed.cert_sha256,
                               "local_certificate": signed.local_cert,
                               "deterministic": signed.deterministic}
        return signed


def mark_output(path: Path, *, version: str, key_dir: Path, cert: Path | None = None,
                key: Path | None = None, title: str | None = None,
                instance: str | None = None) -> SignResult | None:
    """Both marks on a finished output, in the right order: tag an image, then sign when C2PA
    covers the format (returns None when it does not: mkv/webm keep the tag alone). ``instance``:
    see ``sign``. Without c2pa-python, for a format C2PA covers: ``C2paUnavailable``.

    A video must already carry the tag (``metadata_pairs`` at encode time): ``MarkError`` if not.
    """
    path = Path(path)
    image = (sniff_file(path) or "").startswith("image/")
    if not image and read_tag(path) is None:
        raise MarkError(f"{path} has no synthetic-media tag: encode it with metadata_pairs()")
    return Marker(version=version, key_dir=key_dir, cert=cert, key=key,
                  kind="image" if image else "video", title=title, instance=instance,
                  require_c2pa=True)(path)
