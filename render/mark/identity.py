"""The signing identity: the certificate chain and private key a C2PA manifest is signed with.

c2pa-rs refuses a self-signed signing certificate ("Signature: the certificate is invalid"), so
on first use ``local_signing_identity(key_dir)`` creates a local Ed25519 CA and an Ed25519
end-entity certificate issued by it (v3, basicConstraints CA:false, keyUsage digitalSignature,
EKU emailProtection + documentSigning, SKI/AKI); the chain PEM is the end-entity then the CA (an
identity made by an earlier version, P-256, is kept). The CA's private key is never written: no
one can issue more certificates under it. A user may give their own chain (end-entity first) and
unencrypted PEM private key instead (EC, Ed25519 or RSA): ``load_credentials`` checks that they
belong together and tells the signature algorithm. Only ``cryptography`` is needed here.

A local certificate is on no trust list: a manifest it signed validates, untrusted.
"""
from __future__ import annotations

import datetime
import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ..files import write_atomic
from .errors import MarkError, SigningKeyError
from .formats import make_private_dir

try:
    import fcntl
except ImportError:  # not on Windows: key creation is then not guarded against a concurrent render
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

LOCAL_CERT = "signer-chain.pem"
LOCAL_KEY = "signer-key.pem"
LOCAL_ORG = "render (local, untrusted)"


def create_signing_identity(folder: Path, *, key_type: str = "ed25519") -> tuple[Path, Path]:
    """Create a local CA and a C2PA signing certificate issued by it in ``folder``.

    Returns (chain PEM path, private key PEM path): ``signer-chain.pem`` (end-entity then CA,
    mode 0644) and ``signer-key.pem`` (PKCS#8, unencrypted, mode 0600), each written atomically.
    Overwrites an identity already there; ``local_signing_identity`` reuses one instead.
    ``key_type``: ``ed25519`` (the default: deterministic signatures), ``es256`` (P-256) or
    ``ps256`` (RSA 2048, whose PSS signatures are randomised), for both CA and end-entity.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if key_type == "ed25519":
        new_key, digest = ed25519.Ed25519PrivateKey.generate, None  # Ed25519 takes no digest
    elif key_type == "es256":
        new_key, digest = (lambda: ec.generate_private_key(ec.SECP256R1())), hashes.SHA256()
    elif key_type == "ps256":
        new_key, digest = (lambda: rsa.generate_private_key(65537, 2048)), hashes.SHA256()
    else:
        raise ValueError(f"unknown key type {key_type!r}: use ed25519, es256 or ps256")
    folder = Path(folder)
    make_private_dir(folder)
    now = datetime.datetime.now(datetime.timezone.utc)
    start = now - datetime.timedelta(hours=1)  # a little clock skew between machines

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                          x509.NameAttribute(NameOID.ORGANIZATION_NAME, LOCAL_ORG)])

    def usage(**on: bool) -> x509.KeyUsage:
        flags = dict.fromkeys(("digital_signature", "content_commitment", "key_encipherment",
                               "data_encipherment", "key_agreement", "key_cert_sign", "crl_sign",
                               "encipher_only", "decipher_only"), False)
        flags.update(on)
        return x509.KeyUsage(**flags)

    ca_key = new_key()
    ca = (x509.CertificateBuilder()
          .subject_name(name("render local CA")).issuer_name(name("render local CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(now + datetime.timedelta(days=20 * 365))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(usage(key_cert_sign=True, crl_sign=True), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, digest))
    ee_key = new_key()
    ee = (x509.CertificateBuilder()
          .subject_name(name("render local signer")).issuer_name(ca.subject)
          .public_key(ee_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(now + datetime.timedelta(days=10 * 365))
          .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
          .add_extension(usage(digital_signature=True), critical=True)
          .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION,
                                                x509.ObjectIdentifier("1.3.6.1.5.5.7.3.36")]),
                         critical=False)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ee_key.public_key()),
                         critical=False)
          .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, digest))
    key_path, cert_path = folder / LOCAL_KEY, folder / LOCAL_CERT
    write_atomic(key_path, ee_key.private_bytes(serialization.Encoding.PEM,
                                                 serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()), 0o600)
    write_atomic(cert_path, ee.public_bytes(serialization.Encoding.PEM)
                  + ca.public_bytes(serialization.Encoding.PEM), 0o644)
    log.info("created a local C2PA signing certificate in %s", folder)
    return cert_path, key_path


def local_signing_identity(key_dir: Path) -> tuple[Path, Path]:
    """(chain, key) paths of the local signing identity in ``key_dir``, created on first use.

    An identity that is damaged, mismatched or expires within a day is replaced (with a warning).
    Creation is serialised with a lock file, so two renders starting at once share one identity.
    """
    key_dir = Path(key_dir)
    try:
        make_private_dir(key_dir)
        fd = os.open(key_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise MarkError(f"cannot create the C2PA signing key in {key_dir}: {exc.strerror} (make "
                        "it writable or give your own certificate chain and key)") from None
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        cert_path, key_path = key_dir / LOCAL_CERT, key_dir / LOCAL_KEY
        if cert_path.exists() or key_path.exists():
            try:
                creds = load_credentials(cert_path, key_path, local=True)
                if creds.expires > datetime.datetime.now(datetime.timezone.utc) \
                        + datetime.timedelta(days=1):
                    return cert_path, key_path
                log.warning("local C2PA certificate in %s expires %s: creating a new one",
                            key_dir, creds.expires)
            except SigningKeyError as exc:
                log.warning("replacing damaged local C2PA signing identity in %s: %s",
                            key_dir, exc)
        try:
            return create_signing_identity(key_dir)
        except OSError as exc:
            raise MarkError(f"cannot write the C2PA signing key in {key_dir}: {exc.strerror}") \
                from None
    finally:
        os.close(fd)  # releases the lock


def cert_fingerprint(cert: Path) -> str:
    """SHA-256 (hex) of the first (end-entity) certificate in the PEM chain ``cert``."""
    return _load_chain(Path(cert))[0]


@dataclass(frozen=True)
class Credentials:
    """A signing identity, loaded and checked: what c2pa-python and the reproducible rewrite
    sign with."""

    chain_pem: bytes
    key_pem: bytes
    alg: str
    fingerprint: str
    expires: datetime.datetime
    local: bool  # the local identity in key_dir, not the user's


def _load_chain(cert: Path):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        certs = x509.load_pem_x509_certificates(cert.read_bytes())
    except OSError as exc:
        raise SigningKeyError(f"cannot read C2PA certificate chain {cert}: {exc.strerror}") \
            from None
    except ValueError:
        raise SigningKeyError(f"{cert} is not a PEM certificate chain") from None
    der = certs[0].public_bytes(serialization.Encoding.DER)
    return hashlib.sha256(der).hexdigest(), certs


def load_credentials(cert: Path, key: Path, *, local: bool) -> Credentials:
    """The chain ``cert`` and private key ``key``, checked to belong together, with the COSE
    algorithm of the key; ``SigningKeyError`` when either is unreadable or unusable."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    fingerprint, certs = _load_chain(cert)
    try:
        private = serialization.load_pem_private_key(key.read_bytes(), password=None)
    except OSError as exc:
        raise SigningKeyError(f"cannot read C2PA private key {key}: {exc.strerror}") from None
    except TypeError:
        raise SigningKeyError(f"C2PA private key {key} is encrypted: give an unencrypted PEM "
                              "key") from None
    except (ValueError, UnsupportedAlgorithm):
        raise SigningKeyError(f"{key} is not a PEM private key") from None
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    if private.public_key().public_bytes(serialization.Encoding.PEM, spki) != \
            certs[0].public_key().public_bytes(serialization.Encoding.PEM, spki):
        raise SigningKeyError(f"C2PA private key {key} does not belong to the first certificate "
                              f"in {cert} (the chain must start with the signing certificate)")
    if isinstance(private, ec.EllipticCurvePrivateKey):
        alg = {256: "es256", 384: "es384", 521: "es512"}.get(private.curve.key_size)
    elif isinstance(private, ed25519.Ed25519PrivateKey):
        alg = "ed25519"
    elif isinstance(private, rsa.RSAPrivateKey):
        alg = "ps256"
    else:
        alg = None
    if alg is None:
        raise SigningKeyError(f"C2PA private key {key}: use an EC P-256/P-384/P-521, Ed25519 or "
                              "RSA key")
    key_pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    chain_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    return Credentials(chain_pem, key_pem, alg, fingerprint, certs[0].not_valid_after_utc, local)
