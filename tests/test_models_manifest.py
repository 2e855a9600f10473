"""The shipped manifest, overlays, validation, the verified store and `render models list`."""
from __future__ import annotations

import dataclasses
import hashlib
import io
import os
from pathlib import Path

import pytest
import yaml

from render.errors import ModelError, UsageError
from render.models import commands, store as store_mod
from render.models.manifest import SHIPPED_MANIFEST, load_manifest, read_manifest_file, \
    write_local_entries
from render.models.store import ModelStore, default_stamp_dir

PINNED = {
    "inswapper_128", "inswapper_128_fp16", "arcface_w600k_r50", "scrfd_2.5g", "retinaface_10g",
    "yoloface_8n", "yunet", "gfpgan_1.4", "codeformer", "gpen_bfr_256", "gpen_bfr_512", "xseg_1",
    "xseg_2", "xseg_3", "bisenet_resnet_18", "bisenet_resnet_34", "2dfan4",
} | (SWAPPERS := {"hyperswap_1a_256", "hyperswap_1b_256", "hyperswap_1c_256",
                  "simswap_unofficial_512", "crossface_simswap", "uniface_256"}) \
    | (ENHANCERS := {"gpen_bfr_1024", "gpen_bfr_2048", "restoreformer_plus_plus"})
#: the whole-frame processors' models: FaceFusion publishes a CRC32 only, so no pin ships
FRAME_MODELS = {n for n, e in yaml.safe_load(SHIPPED_MANIFEST.read_text())["models"].items()
                if e["contract"].startswith(("frame-", "colourizer-", "matting"))}
#: every model FaceFusion publishes with a CRC32 only (the frame models, the face processors'
#: of issue 40): no pin ships, the first fetch takes it
FIRST_FETCH = {n for n, e in yaml.safe_load(SHIPPED_MANIFEST.read_text())["models"].items()
               if e.get("sha256") is None}
NON_COMMERCIAL = {"inswapper_128", "inswapper_128_fp16", "arcface_w600k_r50", "scrfd_2.5g",
                  "retinaface_10g", "codeformer", "gpen_bfr_256", "gpen_bfr_512",
                  *(SWAPPERS - {"crossface_simswap"}), "gpen_bfr_1024", "gpen_bfr_2048"}
UNCONFIRMED = {"inswapper_128_fp16", "retinaface_10g", "codeformer", "gpen_bfr_256", "gpen_bfr_512",
               "xseg_2", "xseg_3", "bisenet_resnet_18", *SWAPPERS, *ENHANCERS}


def entry_doc(data: bytes, **kw) -> dict:
    doc = {"file": "own.onnx", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
           "urls": [], "licence": "MIT", "commercial_use": True, "contract": "detector-yunet",
           "template": None, "input_size": 640}
    doc.update(kw)
    return doc


def write_manifest(path: Path, models: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"version": 1, "models": models}))
    return path


# ----------------------------------------------------------------------------- shipped manifest
def test_shipped_manifest_pins_every_model(tmp_path):
    m = load_manifest(tmp_path)
    assert SHIPPED_MANIFEST.is_file() and set(m.names()) == PINNED | FIRST_FETCH
    assert len(FRAME_MODELS) == 19 + 5 + 15 and FRAME_MODELS <= FIRST_FETCH
    for e in m:
        assert e.licence and e.urls
        if e.name in FIRST_FETCH:       # pinned at the first fetch, from FaceFusion's hosts
            assert e.sha256 == "" and e.size is None and not e.confirmed
            assert all(u.startswith(("https://github.com/facefusion/facefusion-assets/",
                                     "https://huggingface.co/facefusion/")) for u in e.urls)
            if e.name in FRAME_MODELS:
                assert len(e.urls) == 2
                assert e.commercial_use == ("non-commercial" not in e.licence), e.name
                assert e.urls[0].endswith(f"/{e.file}") and "facefusion-assets" in e.urls[0]
            continue
        assert len(e.urls) == 2
        assert len(e.sha256) == 64 and e.size
        assert all(u.startswith("https://") for u in e.urls)
        assert e.commercial_use == (e.name not in NON_COMMERCIAL), e.name
        assert e.confirmed == (e.name not in UNCONFIRMED), e.name
        if e.name != "yunet":
            assert e.urls[0].endswith(f"/{e.file}") and "facefusion-assets" in e.urls[0]
            assert "huggingface.co/facefusion/" in e.urls[1]
    assert m.get("xseg_1").urls[0].split("/")[-2] == "models-3.1.0"
    assert m.get("yunet").file == "face_detection_yunet_2023mar.onnx"
    assert "opencv_zoo" in m.get("yunet").urls[0]
    ins = m.get("inswapper_128")
    assert ins.sha256.startswith("a290273e") and ins.size == 555303150
    assert (ins.contract, ins.template, ins.input_size) == ("swapper-inswapper", "arcface_128", 128)
    assert m.resolve("inswapper_128", "fp16").name == "inswapper_128_fp16"
    assert m.resolve("inswapper_128", "fp32") is ins


def test_resolve_unknown_and_missing_precision(tmp_path):
    m = load_manifest(tmp_path)
    with pytest.raises(ModelError, match=r"model gfpgan_1.4 has no fp16 file: run `render models "
                                         r"convert gfpgan_1.4 fp16`"):
        m.resolve("gfpgan_1.4", "fp16")
    with pytest.raises(ModelError, match="did you mean inswapper_128"):
        m.get("inswaper_128")


# ----------------------------------------------------------------------------- layering
def test_overlays_replace_entries_whole_in_order(tmp_path):
    models = tmp_path / "models"
    write_manifest(models / "manifest.yaml", {
        "own": entry_doc(b"one"),
        "yunet": entry_doc(b"mine", file="yunet_mine.onnx"),  # replaces the shipped one whole
    })
    extra = write_manifest(tmp_path / "extra.yaml", {"own": entry_doc(b"two", file="own2.onnx")})
    m = load_manifest(models, [extra])
    assert m.get("yunet").file == "yunet_mine.onnx" and m.get("yunet").urls == ()
    assert m.get("yunet").origin == models / "manifest.yaml"
    own = m.get("own")
    assert own.file == "own2.onnx" and own.sha256 == hashlib.sha256(b"two").hexdigest()
    assert own.origin == extra
    assert m.get("inswapper_128").origin == SHIPPED_MANIFEST


def test_converted_entry_resolves_by_source(tmp_path):
    models = tmp_path / "models"
    write_manifest(models / "manifest.yaml", {"gfpgan_1.4_fp16": entry_doc(
        b"x", file="gfpgan_1.4_fp16.onnx", contract="enhancer-gfpgan", template="ffhq_512",
        input_size=512, precision="fp16", source="gfpgan_1.4",
        source_sha256="a" * 64, converter="onnxconverter-common 1.16.0")})
    m = load_manifest(models)
    assert m.resolve("gfpgan_1.4", "fp16").name == "gfpgan_1.4_fp16"


@pytest.mark.parametrize("change, key", [
    ({"sha256": "abc"}, "sha256"),
    ({"licence": None}, "licence"),
    ({"contract": "detector-scrfdd"}, "contract"),
    ({"file": "../x.onnx"}, "file"),
    ({"size": -3}, "size"),
    ({"precision": "int4"}, "precision"),
    ({"urls": ["ftp://x"]}, "urls"),
    ({"licnece": "MIT"}, "licnece"),
    ({"variants": {"fp16": "nowhere"}}, "variants.fp16"),
    ({"template": "ffhq"}, "template"),
])
def test_validation_names_file_and_key(tmp_path, change, key):
    doc = entry_doc(b"x")
    doc.update(change)
    doc = {k: v for k, v in doc.items() if v is not None or k != "licence"}
    path = write_manifest(tmp_path / "bad.yaml", {"own": doc})
    with pytest.raises(ModelError) as info:
        load_manifest(tmp_path / "models", [path])
    msg = str(info.value)
    assert str(path) in msg and f"models.own.{key}" in msg and "\n" not in msg


def test_broken_yaml_and_missing_overlay(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  own: [unclosed\n")
    with pytest.raises(ModelError, match=r"bad.yaml line \d+: not valid YAML"):
        read_manifest_file(bad)
    with pytest.raises(ModelError, match="not found"):
        load_manifest(tmp_path, [tmp_path / "nope.yaml"])


# ----------------------------------------------------------------------------- the store
@pytest.fixture
def counted(monkeypatch):
    calls = []
    real = store_mod._hash_file

    def counting(path):
        calls.append(Path(path))
        return real(path)

    monkeypatch.setattr(store_mod, "_hash_file", counting)
    return calls


def own_store(tmp_path, data: bytes, name="own"):
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    (models / "own.onnx").write_bytes(data)
    write_manifest(models / "manifest.yaml", {name: entry_doc(data)})
    m = load_manifest(models)
    return ModelStore(models, m, default_stamp_dir(tmp_path / "cache")), m.get(name)


def test_verified_stamp_avoids_rehashing_a_large_file(tmp_path, counted):
    data = os.urandom(1 << 20) * 50  # 50 MiB
    st, e = own_store(tmp_path, data)
    assert st.status(e) == "present" and counted == []  # list never hashes
    st.verify(e)
    assert len(counted) == 1 and st.status(e) == "verified"
    for _ in range(5):
        st.verify(e)
    assert st.sha256(e) == e.sha256
    assert len(counted) == 1  # the stamp was trusted
    st.verify(e, force=True)
    assert len(counted) == 2
    path = st.path(e)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # touched
    assert st.status(e) == "present"
    st.verify(e)
    assert len(counted) == 3
    st.verify(e)
    assert len(counted) == 3


def test_verify_detects_a_flipped_byte(tmp_path):
    data = os.urandom(200_000)
    st, e = own_store(tmp_path, data)
    st.verify(e)
    path = st.path(e)
    raw = bytearray(path.read_bytes())
    raw[12345] ^= 0x80
    with open(path, "r+b") as fh:  # same inode, same size
        fh.write(raw)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    with pytest.raises(ModelError) as info:
        st.verify(e)
    msg = str(info.value)
    assert f"model own at {path} is corrupt (sha256 {hashlib.sha256(raw).hexdigest()}, " \
           f"expected {e.sha256}): " in msg
    assert st.status(e) == "present"  # the stamp is gone: list no longer says verified
    assert st.status(e, deep=True) == "corrupt"


def test_flipped_byte_with_mtime_restored_is_caught_by_force(tmp_path):
    data = os.urandom(100_000)
    st, e = own_store(tmp_path, data)
    st.verify(e)
    path = st.path(e)
    before = path.stat()
    raw = bytearray(data)
    raw[7] ^= 0x01
    with open(path, "r+b") as fh:
        fh.write(raw)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(ModelError, match="is corrupt"):
        st.verify(e, force=True)


def test_missing_and_wrong_size(tmp_path):
    st, e = own_store(tmp_path, b"abcdef")
    st.path(e).unlink()
    with pytest.raises(ModelError, match=rf"model own is missing from {st.models_dir}: "):
        st.verify(e)
    assert st.status(e) == "missing"
    st.path(e).write_bytes(b"abc")
    assert st.status(e) == "corrupt"
    with pytest.raises(ModelError, match=r"3 bytes, expected 6"):
        st.verify(e)


def test_shipped_model_missing_names_the_fetch_command(tmp_path):
    m = load_manifest(tmp_path)
    st = ModelStore(tmp_path, m, tmp_path / "stamps")
    with pytest.raises(ModelError, match=r"model scrfd_2.5g is missing from .*: run `render models "
                                         r"fetch scrfd_2.5g`"):
        st.verify_required([("scrfd_2.5g", "fp32"), ("inswapper_128", "fp16")])


# ----------------------------------------------------------------------------- list and usage
def run(argv, tmp_path, profiles=None, manifest_paths=()):
    out = io.StringIO()
    rc = commands.main(argv, models_dir=tmp_path / "models", cache_dir=tmp_path / "cache",
                       manifest_paths=list(manifest_paths), profiles=profiles or {}, out=out)
    return rc, out.getvalue()


def test_list_shows_every_pinned_model_with_its_licence(tmp_path):
    profiles = {"default": [("scrfd_2.5g", "fp32"), ("arcface_w600k_r50", "fp32"),
                            ("inswapper_128", "fp32")],
                "fast": [("yunet", "fp32"), ("inswapper_128", "fp16"), ("gfpgan_1.4", "fp16")]}
    rc, out = run(["list"], tmp_path, profiles)
    assert rc == 0
    lines = {ln.split()[0]: ln for ln in out.splitlines()[2:-1]}
    assert set(lines) == PINNED | FIRST_FETCH
    m = load_manifest(tmp_path)
    not_pinned = "(not pinned yet: taken at the first fetch (FaceFusion publishes a CRC32 only))"
    for name, line in lines.items():
        e = m.get(name)
        assert e.licence in line and "missing" in line
        assert ("[NON-COMMERCIAL]" in line) == (not e.commercial_use)
        assert ("[NON-COMMERCIAL]" in line) == (name in NON_COMMERCIAL) or name in FIRST_FETCH
        assert ("unconfirmed" in line) == (name in UNCONFIRMED)
        assert (not_pinned in line) == (name in FIRST_FETCH)
        assert "pinned at first fetch" not in line
        if name in FIRST_FETCH:
            assert line.split()[1] == "?"             # no size until the first fetch
    assert "555.3 MB" in lines["inswapper_128"]
    assert lines["inswapper_128"].rstrip().endswith("default")
    assert lines["inswapper_128_fp16"].rstrip().endswith("fast")
    assert "fast (needs fp16: convert)" in lines["gfpgan_1.4"]
    assert lines["codeformer"].rstrip().endswith("-")
    assert "NON-COMMERCIAL" in out.splitlines()[-1] and "commercially" in out.splitlines()[-1]

    # a pin the first fetch took (tests/test_models_first_fetch.py) sits in the local layer
    ddcolor = m.get("ddcolor")
    pinned = dataclasses.replace(ddcolor, sha256="ab" * 32, size=2_000_000, note=(
        "pinned at first fetch after FaceFusion's CRC32 0badc0de (from github.com) matched"))
    write_local_entries(tmp_path / "models", [pinned])
    rc, out = run(["list"], tmp_path, profiles)
    lines = {ln.split()[0]: ln for ln in out.splitlines()[2:-1]}
    assert "missing (pinned at first fetch)" in lines["ddcolor"] and "2.0 MB" in lines["ddcolor"]
    assert "not pinned" not in lines["ddcolor"] and "unconfirmed" not in lines["ddcolor"]
    assert ddcolor.licence in lines["ddcolor"]
    assert "not pinned yet" in lines["ddcolor_artistic"]


def test_list_reports_stamp_status(tmp_path):
    data = b"own model bytes"
    st, e = own_store(tmp_path, data)
    rc, out = run(["list"], tmp_path)
    assert "present" in next(ln for ln in out.splitlines() if ln.startswith("own "))
    st.verify(e)
    rc, out = run(["list"], tmp_path)
    assert "verified" in next(ln for ln in out.splitlines() if ln.startswith("own "))


@pytest.mark.parametrize("argv, match", [
    (["lsit"], "did you mean `render models list`"),
    (["list", "x"], "takes no model names"),
    (["fetch", "speed=1"], "does not take speed="),
    (["fetch"], "name the models to fetch or a profile"),
    (["fetch", "profile=fsat"], "unknown profile 'fsat'"),
    (["convert"], "one model name and a precision"),
    (["convert", "gfpgan_1.4", "int4"], "`render models convert gfpgan_1.4 fp16` or `... int8`"),
    (["convert", "inswapper_128", "fp16"], "pinned fp16 file"),
])
def test_usage_errors(tmp_path, argv, match):
    profiles = {"fast": []} if argv[:1] == ["fetch"] and len(argv) > 1 else {}
    with pytest.raises(UsageError, match=match):
        run(argv, tmp_path, profiles)


def test_help(tmp_path):
    rc, out = run([], tmp_path)
    assert rc == 0 and out.startswith("usage: render models")


def test_local_readme_documents_the_offline_path():
    text = (SHIPPED_MANIFEST.parent / "local" / "README.md").read_text()
    assert "manifest.yaml" in text and "sha256" in text


def test_a_model_is_verified_and_fetched_with_the_models_it_needs(tmp_path):
    """simswap_unofficial_512 needs its crossface converter: verify_required checks both (and
    names the converter when it is missing), and a manifest naming an unknown need is refused."""
    from render.files import sha256_file

    m = load_manifest(tmp_path)
    assert m.get("simswap_unofficial_512").needs == ("crossface_simswap",)
    swapper, conv = tmp_path / "s.onnx", tmp_path / "c.onnx"
    swapper.write_bytes(b"swapper")
    conv.write_bytes(b"converter")
    overlay = tmp_path / "overlay.yaml"
    entry = {"licence": "t", "contract": "swapper-simswap", "template": "arcface_112_v1",
             "input_size": 256}
    overlay.write_text(yaml.safe_dump({"version": 1, "models": {
        "s": {**entry, "file": "s.onnx", "sha256": sha256_file(swapper), "needs": ["c"]},
        "c": {"licence": "t", "contract": "converter-crossface", "file": "c.onnx",
              "sha256": sha256_file(conv)}}}))
    store = ModelStore(tmp_path, load_manifest(tmp_path, [overlay]), default_stamp_dir(tmp_path))
    assert set(store.verify_required([("s", "fp32")])) == {("s", "fp32"), ("c", "fp32")}
    conv.unlink()
    with pytest.raises(ModelError, match="model c"):
        store.verify_required([("s", "fp32")])
    overlay.write_text(yaml.safe_dump({"version": 1, "models": {
        "s": {**entry, "file": "s.onnx", "sha256": sha256_file(swapper), "needs": ["nope"]}}}))
    with pytest.raises(ModelError, match="needs names 'nope', which no manifest defines"):
        load_manifest(tmp_path, [overlay])


def test_fetching_a_swapper_brings_its_converter(tmp_path):
    from render.files import sha256_file

    folder = tmp_path / "usb"
    folder.mkdir()
    (folder / "s.onnx").write_bytes(b"swapper")
    (folder / "c.onnx").write_bytes(b"converter")
    entry = {"licence": "t", "contract": "swapper-simswap", "template": "arcface_112_v1",
             "input_size": 256}
    (folder / "manifest.yaml").write_text(yaml.safe_dump({"version": 1, "models": {
        "s": {**entry, "file": "s.onnx", "sha256": sha256_file(folder / "s.onnx"), "needs": ["c"]},
        "c": {"licence": "t", "contract": "converter-crossface", "file": "c.onnx",
              "sha256": sha256_file(folder / "c.onnx")}}}))
    rc, out = run(["fetch", "s", f"from={folder}"], tmp_path)
    assert rc == 0
    assert "s: verified" in out and "c: verified" in out
    assert (tmp_path / "models" / "c.onnx").read_bytes() == b"converter"
