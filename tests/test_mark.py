"""render.mark: the synthetic-media metadata tag and the C2PA manifest, on files ffmpeg writes."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import stat
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from render import mark
from render.errors import RenderError
from render.mark import reproducible

VERSION = "9.8.7"
TAG = mark.tag_text(VERSION)
HAVE_C2PA = mark.c2pa_available()
needs_c2pa = pytest.mark.skipif(not HAVE_C2PA, reason="c2pa-python is not installed "
                                "(pip install c2pa-python): C2PA manifests cannot be tested")

BITEXACT = ["-map_metadata", "-1", "-fflags", "+bitexact", "-flags:v", "+bitexact",
            "-flags:a", "+bitexact"]
VIDEO = {  # extension: (muxer, video codec options, audio codec options, extra)
    "mp4": ("mp4", ["-c:v", "libx264", "-preset", "ultrafast"], ["-c:a", "aac"],
            ["-movflags", "+faststart"]),
    "mov": ("mov", ["-c:v", "libx264", "-preset", "ultrafast"], ["-c:a", "aac"],
            ["-movflags", "+faststart"]),
    "mkv": ("matroska", ["-c:v", "libx264", "-preset", "ultrafast"], ["-c:a", "aac"], []),
    "webm": ("webm", ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8"],
             ["-c:a", "libopus"], []),
}
IMAGES = ("png", "jpg", "webp")


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-y", *args], check=True, timeout=60)


def metadata_options(container: str) -> list[str]:
    """The ffmpeg output options of ``mark.metadata_pairs``, as the encoder's arguments get them."""
    return [a for key, value in mark.metadata_pairs(VERSION, container)
            for a in ("-metadata", f"{key}={value}")]


def format_tags(path: Path) -> dict[str, str]:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_format", "-of", "json", str(path)],
                         check=True, capture_output=True, text=True, timeout=30).stdout
    return {k.lower(): v for k, v in json.loads(out)["format"].get("tags", {}).items()}


def decodes(path: Path) -> bool:
    return subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-i", str(path), "-f", "null",
                           "-"], capture_output=True, timeout=30).returncode == 0


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, Path]:
    """Small files as render writes them: videos tagged through metadata_pairs, untagged images."""
    d = tmp_path_factory.mktemp("mark_media")
    src = ["-f", "lavfi", "-i", "testsrc=size=64x64:rate=10:duration=0.5",
           "-f", "lavfi", "-i", "sine=frequency=440:duration=0.5"]
    files = {}
    for ext, (muxer, vopts, aopts, extra) in VIDEO.items():
        files[ext] = d / f"clip.{ext}"
        ffmpeg(*src, "-map", "0:v", "-map", "1:a", *vopts, "-pix_fmt", "yuv420p", *aopts,
               *BITEXACT, *extra, *metadata_options(ext), "-f", muxer,
               str(files[ext]))
    for ext in IMAGES:
        files[ext] = d / f"still.{ext}"
        ffmpeg("-f", "lavfi", "-i", "testsrc=size=64x48", "-frames:v", "1",
               *metadata_options(ext), str(files[ext]))
    return files


@pytest.fixture
def copy(media, tmp_path):
    def _copy(ext: str) -> Path:
        dst = tmp_path / media[ext].name
        shutil.copy(media[ext], dst)
        return dst
    return _copy


@pytest.fixture(scope="module")
def key_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache") / "c2pa"


# ---------------------------------------------------------------------------- metadata tag

def test_metadata_pairs_per_container():
    assert mark.metadata_pairs(VERSION, "mp4") == [("comment", TAG), ("description", TAG)]
    assert mark.metadata_pairs(VERSION, "mov") == [("comment", TAG)]
    assert mark.metadata_pairs(VERSION, "matroska") == mark.metadata_pairs(VERSION, ".mkv")
    for image in ("png", "jpg", "jpeg", "webp", "image2"):
        assert mark.metadata_pairs(VERSION, image) == []
    with pytest.raises(ValueError):
        mark.metadata_pairs(VERSION, "avi")
    assert TAG.startswith(mark.TAG_PREFIX) and VERSION in TAG and "render" in TAG


@pytest.mark.parametrize("ext", sorted(VIDEO))
def test_video_tag_survives_bitexact_encode(media, ext):
    assert mark.read_tag(media[ext]) == TAG
    assert format_tags(media[ext])["comment"] == TAG


def test_ffmpeg_writes_no_image_metadata(media, tmp_path):
    """Why tag_image exists: ffmpeg 5.1 drops -metadata for png/jpg/webp."""
    png = tmp_path / "m.png"
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=16x16", "-frames:v", "1",
           "-metadata", f"comment={TAG}", str(png))
    assert mark.read_tag(png) is None
    for ext in IMAGES:
        assert mark.read_tag(media[ext]) is None


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    out, pos = [], 8
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        ctype, payload = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert crc == zlib.crc32(ctype + payload) & 0xFFFFFFFF, ctype
        out.append((ctype, payload))
        pos += 12 + n
    return out


@pytest.mark.parametrize("ext", IMAGES)
def test_tag_image_round_trip_and_idempotent(copy, ext):
    path = copy(ext)
    mark.tag_image(path, version=VERSION)
    assert mark.read_tag(path) == TAG
    assert decodes(path)
    once = path.read_bytes()
    mark.tag_image(path, version=VERSION)
    assert path.read_bytes() == once
    mark.tag_image(path, version="other")  # an earlier render tag is replaced, not duplicated
    assert mark.read_tag(path) == mark.tag_text("other")
    assert once.count(b"Synthetic media") == 1 == path.read_bytes().count(b"Synthetic media")
    if ext == "png":
        chunks = png_chunks(path.read_bytes())
        assert chunks[-1][0] == b"IEND" and chunks[-2] == (
            b"tEXt", b"Comment\0" + mark.tag_text("other").encode())
    if ext == "jpg":
        assert path.read_bytes()[2:4] == b"\xff\xe0"  # JFIF APP0 still first


def test_tag_image_refuses_video(media):
    with pytest.raises(mark.MarkError):
        mark.tag_image(media["mp4"], version=VERSION)


# ------------------------------------------------------------------------------------- C2PA

def test_c2pa_supported_formats():
    for ok in ("mp4", ".m4v", "mov", "png", "jpg", "JPEG", "webp", Path("out/a.clip.mp4")):
        assert mark.c2pa_supported(ok), ok
    for no in ("mkv", ".webm", "matroska", "avi", Path("out/a.mkv")):
        assert not mark.c2pa_supported(no), no


@needs_c2pa
@pytest.mark.parametrize("ext", ["mp4", "png", "jpg", "webp"])
def test_mark_output_tags_and_signs(copy, key_dir, ext):
    import c2pa

    path = copy(ext)
    result = mark.mark_output(path, version=VERSION, key_dir=key_dir, title="clip")
    assert result is not None and result.local_cert and result.path == path
    info = mark.read_manifest(path)
    assert info.present and info.valid and not info.trusted, info
    assert info.describe() == "valid (untrusted local certificate)"
    assert info.errors == () and mark.UNTRUSTED_CODE in info.codes
    assert info.digital_source_type == mark.DIGITAL_SOURCE_TYPE and info.synthetic
    assert info.claim_generator == f"render {VERSION}" == info.software_agent
    assert info.title == "clip"
    assert mark.read_tag(path) == TAG  # the tag survives the embedding
    assert decodes(path)

    with open(path, "rb") as f:  # the library's own reader, as another verifier would see it
        store = json.loads(c2pa.Reader(result.mime, f).json())
    active = store["manifests"][store["active_manifest"]]
    assert active["claim_generator_info"][0]["name"] == "render"
    actions = [a for s in active["assertions"] if s["label"].startswith("c2pa.actions")
               for a in s["data"]["actions"]]
    assert actions[0]["action"] == "c2pa.created"
    assert actions[0]["digitalSourceType"].endswith("/compositeWithTrainedAlgorithmicMedia")
    if ext == "mp4":
        assert format_tags(path)["comment"] == TAG


@needs_c2pa
def test_flipped_mdat_byte_is_invalid(copy, key_dir):
    path = copy("mp4")
    mark.sign(path, version=VERSION, key_dir=key_dir)
    data = bytearray(path.read_bytes())
    pos = 0
    while data[pos + 4:pos + 8] != b"mdat":
        pos += struct.unpack(">I", data[pos:pos + 4])[0]
    data[pos + 8 + 20] ^= 0x01
    path.write_bytes(bytes(data))
    info = mark.read_manifest(path)
    assert info.present and not info.valid
    assert any("bmffHash.mismatch" in e for e in info.errors), info.errors
    assert info.describe().startswith("invalid: ")


def flip_outside_manifest(path: Path) -> None:
    """Flip one byte of the media data, away from the embedded manifest."""
    data = bytearray(path.read_bytes())
    start = data.find(b"jumb") - 8
    pos = 40 if start > 200 else len(data) - 40
    if data[4:8] == b"ftyp":  # mp4/mov: a byte inside mdat
        pos = 0
        while data[pos + 4:pos + 8] != b"mdat":
            pos += struct.unpack(">I", data[pos:pos + 4])[0]
        pos += 8 + 20
    data[pos] ^= 0x01
    path.write_bytes(bytes(data))


@needs_c2pa
@pytest.mark.parametrize("ext", ["mp4", "mov", "png", "jpg", "webp"])
def test_signing_is_reproducible(media, tmp_path, key_dir, ext):
    """Same input, parameters and key: the same bytes, in another folder too; still valid, and
    a flipped media byte still makes it invalid."""
    digests, results = [], []
    for run in ("a", "b"):
        path = tmp_path / run / media[ext].name
        path.parent.mkdir()
        shutil.copy(media[ext], path)
        results.append(mark.sign(path, version=VERSION, key_dir=key_dir))
        digests.append(hashlib.sha256(path.read_bytes()).hexdigest())
        info = mark.read_manifest(path)
        assert info.valid and info.errors == () and info.synthetic, info
    assert digests[0] == digests[1]
    assert results[0].deterministic
    assert results[0] == dataclasses.replace(results[1], path=results[0].path)
    assert results[0].manifest_label.startswith("urn:c2pa:")
    flip_outside_manifest(results[0].path)
    info = mark.read_manifest(results[0].path)
    assert info.present and not info.valid, info


@needs_c2pa
def test_instance_sets_the_ids(media, copy, key_dir, tmp_path):
    import c2pa

    first = copy("png")
    one = mark.sign(first, version=VERSION, key_dir=key_dir, instance="job-1/out.png")
    other = tmp_path / "other" / "renamed.png"
    other.parent.mkdir()
    shutil.copy(media["png"], other)
    again = mark.sign(other, version=VERSION, key_dir=key_dir, instance="job-1/out.png",
                      title=first.name)
    assert one.manifest_label == again.manifest_label
    assert first.read_bytes() == other.read_bytes()  # the file name does not matter
    different = mark.sign(copy("jpg"), version=VERSION, key_dir=key_dir, instance="job-2/out.png")
    assert different.manifest_label != one.manifest_label
    label, instance_id = reproducible.manifest_ids("job-1/out.png")
    with open(first, "rb") as f:
        store = json.loads(c2pa.Reader("image/png", f).json())
    assert store["active_manifest"] == label == one.manifest_label
    assert store["manifests"][label]["instance_id"] == instance_id


@needs_c2pa
@pytest.mark.parametrize("key_type, deterministic", [("es256", True), ("ps256", False)])
def test_user_key_types(media, tmp_path, key_type, deterministic):
    """A user's P-256 key signs deterministically (RFC 6979); RSA-PSS cannot (random salt)."""
    cert, key = mark.create_signing_identity(tmp_path / "mine", key_type=key_type)
    outputs = []
    for name in ("a", "b"):
        path = tmp_path / name / "clip.mp4"
        path.parent.mkdir()
        shutil.copy(media["mp4"], path)
        result = mark.sign(path, version=VERSION, key_dir=tmp_path / "k", cert=cert, key=key)
        assert result.deterministic is deterministic
        assert mark.read_manifest(path).valid
        outputs.append(path.read_bytes())
    assert (outputs[0] == outputs[1]) is deterministic


@needs_c2pa
def test_unvalidated_rewrite_falls_back(copy, key_dir, monkeypatch, caplog):
    """A rewritten manifest that does not validate is not kept: the library's bytes are."""
    real = reproducible.rewrite_store

    def broken(store, label, creds):
        out = bytearray(real(store, label, creds))
        out[-1] ^= 0x01  # the last byte of the signature
        return bytes(out)

    monkeypatch.setattr(reproducible, "rewrite_store", broken)
    path = copy("png")
    result = mark.sign(path, version=VERSION, key_dir=key_dir)
    assert not result.deterministic
    assert mark.read_manifest(path).valid
    assert "does not validate" in caplog.text


@needs_c2pa
def test_unsigned_file_has_no_manifest(media):
    info = mark.read_manifest(media["mp4"])
    assert info.supported and not info.present and not info.valid
    assert info.describe() == "no C2PA manifest"


@needs_c2pa
def test_local_identity_created_once(copy, tmp_path):
    keys = tmp_path / "cache" / "c2pa"
    first = mark.sign(copy("png"), version=VERSION, key_dir=keys)
    cert, key = keys / mark.LOCAL_CERT, keys / mark.LOCAL_KEY
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert cert.read_bytes().count(b"BEGIN CERTIFICATE") == 2  # end-entity, then the CA
    assert b"BEGIN PRIVATE KEY" in key.read_bytes() and len(key.read_bytes()) < 200  # Ed25519
    before = (cert.read_bytes(), key.read_bytes())
    second = mark.sign(copy("jpg"), version=VERSION, key_dir=keys)
    assert first.cert_sha256 == second.cert_sha256 == mark.cert_fingerprint(cert)
    assert first.deterministic and second.deterministic
    assert (cert.read_bytes(), key.read_bytes()) == before


@needs_c2pa
def test_user_cert_and_key(copy, tmp_path):
    cert, key = mark.create_signing_identity(tmp_path / "mine")
    unused = tmp_path / "cache" / "c2pa"
    path = copy("mp4")
    result = mark.sign(path, version=VERSION, key_dir=unused, cert=cert, key=key)
    assert not result.local_cert and result.cert_sha256 == mark.cert_fingerprint(cert)
    assert not unused.exists()
    assert mark.read_manifest(path).valid


@needs_c2pa
def test_unusable_user_credentials(copy, tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    cert, key = mark.create_signing_identity(tmp_path / "a")
    _, other_key = mark.create_signing_identity(tmp_path / "b")
    path = copy("png")
    with pytest.raises(mark.SigningKeyError, match="does not belong"):
        mark.sign(path, version=VERSION, key_dir=tmp_path / "k", cert=cert, key=other_key)
    with pytest.raises(mark.SigningKeyError):
        mark.sign(path, version=VERSION, key_dir=tmp_path / "k", cert=cert)

    # A self-signed certificate: c2pa-rs refuses it; the error names the requirements.
    import datetime
    k = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "self")])
    now = datetime.datetime.now(datetime.timezone.utc)
    self_signed = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                   .public_key(k.public_key()).serial_number(1).not_valid_before(now)
                   .not_valid_after(now + datetime.timedelta(days=1)).sign(k, hashes.SHA256()))
    (tmp_path / "s.pem").write_bytes(self_signed.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "s.key").write_bytes(k.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    before = path.read_bytes()
    with pytest.raises(mark.SigningKeyError) as err:
        mark.sign(path, version=VERSION, key_dir=tmp_path / "k", cert=tmp_path / "s.pem",
                  key=tmp_path / "s.key")
    assert err.value.exit_code == 2 and "\n" not in str(err.value)
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []


@needs_c2pa
@pytest.mark.parametrize("ext", ["mkv", "webm"])
def test_unsupported_containers_keep_the_tag(copy, key_dir, ext):
    path = copy(ext)
    before = path.read_bytes()
    assert not mark.c2pa_supported(path)
    assert mark.mark_output(path, version=VERSION, key_dir=key_dir) is None
    assert path.read_bytes() == before and mark.read_tag(path) == TAG
    info = mark.read_manifest(path)
    assert not info.supported and not info.present
    with pytest.raises(mark.MarkError):
        mark.sign(path, version=VERSION, key_dir=key_dir)


@needs_c2pa
def test_tag_after_signing_is_refused(copy, key_dir):
    path = copy("png")
    mark.mark_output(path, version=VERSION, key_dir=key_dir)
    with pytest.raises(mark.MarkError, match="tag first"):
        mark.tag_image(path, version="other")
    assert mark.read_manifest(path).valid


def test_untagged_video_is_refused(tmp_path, key_dir):
    path = tmp_path / "plain.mp4"
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=32x32:rate=5:duration=0.2", "-c:v", "libx264",
           "-preset", "ultrafast", str(path))
    with pytest.raises(mark.MarkError, match="metadata_pairs"):
        mark.mark_output(path, version=VERSION, key_dir=key_dir)


def test_without_c2pa_python(copy, key_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "c2pa", None)  # import c2pa now raises ImportError
    assert not mark.c2pa_available()
    path = copy("png")
    with pytest.raises(mark.C2paUnavailable, match="pip install c2pa-python"):
        mark.sign(path, version=VERSION, key_dir=key_dir)
    with pytest.raises(mark.C2paUnavailable):
        mark.read_manifest(path)
    with pytest.raises(mark.C2paUnavailable):
        mark.mark_output(path, version=VERSION, key_dir=key_dir)
    assert mark.read_tag(path) == TAG  # the tag went on before the refusal
    assert isinstance(mark.C2paUnavailable("x"), RenderError)


# ------------------------------------------------------------------------- the marking step

def render_marker(cache: Path, output: Path, kind: str, **cfg) -> tuple[mark.Marker, dict]:
    """A render's marking step for ``output``, filling the report's ``marks`` as app.py does."""
    from render.config import Mark

    marks: dict = {}
    step = mark.Marker.for_render(Mark(**cfg), kind=kind, output=output, cache_dir=cache,
                                  instance=f"key:{output.name}", version=VERSION, record=marks)
    return step, marks


@needs_c2pa
@pytest.mark.parametrize("ext", ["png", "mp4"])
def test_render_step_is_mark_output(media, copy, tmp_path, ext):
    """A render's marking step and mark_output make the same bytes; the report gets its record.
    The render marks its temp file, named otherwise than the output."""
    output = tmp_path / "out" / f"result.{ext}"
    temp = tmp_path / f"result.{ext}.part-123"
    shutil.copy(media[ext], temp)
    step, marks = render_marker(tmp_path / "cache", output, "image" if ext == "png" else "video")
    assert marks == {"enabled": True, "tag": None, "c2pa": None}  # before the file is done
    signed = step(temp)
    assert list(marks) == ["enabled", "tag", "c2pa"] and marks["tag"] == TAG
    assert marks["c2pa"] == {"signed": True, "mime": signed.mime, "cert_sha256": signed.cert_sha256,
                             "local_certificate": True, "deterministic": True}
    assert mark.read_manifest(temp).title == output.name
    same = copy(ext)
    mark.mark_output(same, version=VERSION, key_dir=tmp_path / "cache" / "c2pa",
                     title=output.name, instance=f"key:{output.name}")
    assert temp.read_bytes() == same.read_bytes()


def test_render_step_records_what_it_could_not_do(media, tmp_path, monkeypatch):
    mkv = tmp_path / "clip.mkv"
    shutil.copy(media["mkv"], mkv)
    before = mkv.read_bytes()
    step, marks = render_marker(tmp_path / "cache", tmp_path / "out.mkv", "video")
    assert step(mkv) is None and mkv.read_bytes() == before
    assert marks == {"enabled": True, "tag": TAG, "c2pa": {
        "signed": False, "reason": "C2PA cannot be embedded in .mkv files (no Matroska support "
                                   "in c2pa-rs)"}}

    png = tmp_path / "still.png"
    shutil.copy(media["png"], png)
    before = png.read_bytes()
    step, marks = render_marker(tmp_path / "cache", tmp_path / "out.png", "image", enabled=False)
    assert step(png) is None and png.read_bytes() == before
    assert marks == {"enabled": False, "tag": None, "c2pa": None}

    monkeypatch.setitem(sys.modules, "c2pa", None)  # a render goes on with the tag alone
    step, marks = render_marker(tmp_path / "cache", tmp_path / "out.png", "image")
    assert step(png) is None and mark.read_tag(png) == TAG
    assert marks["tag"] == TAG and marks["c2pa"]["signed"] is False
    assert "pip install c2pa-python" in marks["c2pa"]["reason"]


@pytest.mark.skipif(not HAVE_C2PA, reason="c2pa-python is not installed")
def test_load_libraries_imports_what_signing_needs_ahead_of_it():
    """The Renderer loads these while the models load, so that the first signature at the end of
    a render does not wait for them; importing render.mark alone does not."""
    code = ("import sys\nfrom render import mark\n"
            "assert 'c2pa' not in sys.modules and 'cryptography.x509' not in sys.modules\n"
            "mark.load_libraries()\n"
            "assert 'c2pa' in sys.modules and 'cryptography.x509' in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(not HAVE_C2PA, reason="c2pa-python is not installed")
def test_a_renderer_exiting_at_once_waits_for_the_marking_libraries(standin_models, tmp_path):
    """The Renderer imports c2pa and cryptography on a thread; a process that ends right after
    (a quick `render verify`) must wait for it: a daemon thread still inside their Rust code at
    finalisation aborts the process ("FATAL: exception not rethrown", exit -6)."""
    code = ("import sys, threading\n"
            "from render.renderer import Renderer\nfrom render.config import load_config\n"
            f"cfg = load_config({{'profile': 'low', 'execution.providers': 'cpu', "
            f"'models.dir': {str(standin_models)!r}, 'cache_dir': {str(tmp_path)!r}}}, env={{}})\n"
            "Renderer(cfg)\n"
            "t = [t for t in threading.enumerate() if t.name == 'render-mark-libraries']\n"
            "assert not t or not t[0].daemon, 'a daemon thread'\n")
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert r.returncode == 0 and "FATAL" not in r.stderr, (r.returncode, r.stderr)
