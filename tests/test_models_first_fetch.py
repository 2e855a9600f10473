"""Pins taken at the first fetch: FaceFusion's whole-frame models come with a CRC32 ``.hash``
only; `render models fetch` checks it and writes the SHA-256 and size to the local manifest."""
from __future__ import annotations

import hashlib
import io
import zlib

import pytest
import yaml

from conftest import model_args, run_cli
from render.errors import ModelError
from render.models import commands, manifest as manifest_mod
from render.models.manifest import load_manifest
from render.models.store import ModelStore
from test_models_fetch import FAST, blob, leftovers, server  # noqa: F401 - the fixture

NAME = "tiny_frame"
NOT_PINNED_LINE = (f"model {NAME} is not pinned yet: FaceFusion publishes a CRC32 only, so its "
                   f"SHA-256 is taken at the first fetch: run `render models fetch {NAME}`")


def crc32(data: bytes) -> bytes:
    return b"%08x" % zlib.crc32(data)


@pytest.fixture
def model(server, tmp_path, monkeypatch):
    """A shipped manifest whose one entry has no pin, its file and ``.hash`` served on two
    release paths (primary and mirror) of the local server."""
    data = blob(n=40_000, seed=20)
    for base in ("/rel", "/mirror"):
        server.serve(f"{base}/{NAME}.onnx", data)
        server.serve(f"{base}/{NAME}.hash", crc32(data))
    shipped = tmp_path / "shipped.yaml"
    shipped.write_text(yaml.safe_dump({"version": 1, "models": {NAME: {
        "file": f"{NAME}.onnx", "sha256": None,
        "urls": [server.url(f"/rel/{NAME}.onnx"), server.url(f"/mirror/{NAME}.onnx")],
        "licence": "BSD-3-Clause", "commercial_use": True, "contract": "frame-enhancer",
        "template": None, "input_size": 64, "precision": "fp32",
        "params": {"scale": 2, "tile": 64, "pad": 8, "context": 4}, "confirmed": False}}}))
    monkeypatch.setattr(manifest_mod, "SHIPPED_MANIFEST", shipped)
    return data


def run(argv, tmp_path):
    out = io.StringIO()
    rc = commands.main(argv, models_dir=tmp_path / "models", cache_dir=tmp_path / "cache",
                       manifest_paths=[], profiles={}, out=out, fetch_options=FAST)
    return rc, out.getvalue()


def local_entry(tmp_path) -> dict:
    """The pin the first fetch wrote in the local manifest's ``pins:``."""
    return yaml.safe_load((tmp_path / "models" / "manifest.yaml").read_text())["pins"][NAME]


def store(tmp_path) -> ModelStore:
    models = tmp_path / "models"
    return ModelStore(models, load_manifest(models), tmp_path / "cache" / "model-stamps")


def list_row(tmp_path) -> str:
    rc, out = run(["list"], tmp_path)
    return next(ln for ln in out.splitlines() if ln.startswith(f"{NAME} "))


def one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


# ----------------------------------------------------------------------------- the first fetch
def test_first_fetch_pins_the_file_in_the_local_manifest(server, model, tmp_path):
    assert "(not pinned yet: taken at the first fetch (FaceFusion publishes a CRC32 only))" \
        in list_row(tmp_path)
    rc, out = run(["fetch", NAME], tmp_path)
    sha = hashlib.sha256(model).hexdigest()
    assert rc == 0 and f"pinned at first fetch (sha256 {sha}, {len(model)} bytes)" in out
    models = tmp_path / "models"
    assert (models / f"{NAME}.onnx").read_bytes() == model
    assert leftovers(models) == ["manifest.yaml", f"{NAME}.onnx"]   # no partial, no lock
    pin = local_entry(tmp_path)
    assert (pin["file"], pin["sha256"], pin["size"]) == (f"{NAME}.onnx", sha, len(model))
    assert pin["note"].startswith("pinned at first fetch after FaceFusion's CRC32 "
                                  f"{crc32(model).decode()}")
    assert set(pin) == {"file", "sha256", "size", "note"}      # the pin only: the rest ships
    resolved = load_manifest(models).get(NAME)
    assert (resolved.sha256, resolved.size, resolved.confirmed) == (sha, len(model), False)
    assert resolved.params == {"scale": 2, "tile": 64, "pad": 8, "context": 4}
    # the .hash first, then the file, both from the primary
    assert [p for p, _ in server.requests] == [f"/rel/{NAME}.hash", f"/rel/{NAME}.onnx"]
    st = store(tmp_path)
    assert st.verify_required([(NAME, "fp32")])[(NAME, "fp32")].sha256 == sha
    row = list_row(tmp_path)
    assert "verified (pinned at first fetch)" in row and "not pinned" not in row
    assert "unconfirmed" not in row and "40.0 kB" in row


def test_a_pin_gives_only_its_hash_and_a_pin_shipped_later_wins(server, model, tmp_path):
    """The pin keeps the rest of the entry shipped: a later release's params reach a machine that
    pinned the file before; once a release ships the SHA-256, the local pin is stale and left
    aside (as is a pin for another file)."""
    run(["fetch", NAME], tmp_path)
    models = tmp_path / "models"
    shipped = yaml.safe_load(manifest_mod.SHIPPED_MANIFEST.read_text())
    shipped["models"][NAME]["params"]["tile"] = 128
    manifest_mod.SHIPPED_MANIFEST.write_text(yaml.safe_dump(shipped))
    entry = load_manifest(models).get(NAME)
    assert entry.params["tile"] == 128 and entry.sha256 == hashlib.sha256(model).hexdigest()
    shipped["models"][NAME].update(sha256="ab" * 32, size=7, confirmed=True)
    manifest_mod.SHIPPED_MANIFEST.write_text(yaml.safe_dump(shipped))
    entry = load_manifest(models).get(NAME)
    assert (entry.sha256, entry.size, entry.confirmed) == ("ab" * 32, 7, True)


def test_later_fetches_verify_against_the_pin(server, model, tmp_path):
    run(["fetch", NAME], tmp_path)
    before = len(server.requests)
    rc, out = run(["fetch", NAME], tmp_path)
    assert rc == 0 and out.startswith(f"{NAME}: verified ")
    assert len(server.requests) == before                 # in place and stamped: no network

    target = tmp_path / "models" / f"{NAME}.onnx"
    raw = bytearray(model)
    raw[1000] ^= 0xFF
    target.write_bytes(bytes(raw))                        # tampered in the models folder
    with pytest.raises(ModelError) as info:
        run(["verify", NAME], tmp_path)
    assert f"model {NAME} at {target} is corrupt" in one_line(info)
    with pytest.raises(ModelError, match="is corrupt"):
        store(tmp_path).verify_required([(NAME, "fp32")])
    rc, out = run(["fetch", NAME], tmp_path)              # downloaded again, checked by the pin
    assert rc == 0 and target.read_bytes() == model
    assert [p for p, _ in server.requests[before:]] == [f"/rel/{NAME}.onnx"]   # no .hash


def test_a_changed_upstream_file_is_held_to_the_pin(server, model, tmp_path):
    """Once pinned, a new file with a .hash that matches it is refused like any pin mismatch."""
    run(["fetch", NAME], tmp_path)
    pin = local_entry(tmp_path)
    other = blob(n=40_000, seed=21)
    for base in ("/rel", "/mirror"):
        server.serve(f"{base}/{NAME}.onnx", other)
        server.serve(f"{base}/{NAME}.hash", crc32(other))
    (tmp_path / "models" / f"{NAME}.onnx").unlink()
    with pytest.raises(ModelError) as info:
        run(["fetch", NAME], tmp_path)
    msg = one_line(info)
    assert "does not match its pin" in msg and hashlib.sha256(other).hexdigest() in msg
    assert "taken at the first fetch" in msg and "to pin it again" in msg
    assert leftovers(tmp_path / "models") == ["manifest.yaml"] and local_entry(tmp_path) == pin


# ----------------------------------------------------------------------------- refusals
def test_a_tampered_download_is_rejected_and_nothing_is_kept(server, model, tmp_path):
    raw = bytearray(model)
    raw[len(raw) // 2] ^= 0x01
    for base in ("/rel", "/mirror"):
        server.serve(f"{base}/{NAME}.onnx", bytes(raw))
    with pytest.raises(ModelError) as info:
        run(["fetch", NAME], tmp_path)
    msg = one_line(info)
    assert f"crc32 {crc32(bytes(raw)).decode()}, expected {crc32(model).decode()}" in msg
    assert "nothing was pinned" in msg and f"render models fetch {NAME}" in msg
    assert leftovers(tmp_path / "models") == []
    assert "not pinned yet" in list_row(tmp_path)


@pytest.mark.parametrize("hash_text", [b"0badc0de", b"0BADC0DE", crc32(b"x") + b"\n"])
def test_a_wrong_hash_is_rejected_with_nothing_written(server, model, tmp_path, hash_text):
    """A well-formed CRC32 that is not the file's, or one FaceFusion's exact comparison would
    not accept either (upper case, a trailing newline), on both release paths."""
    for base in ("/rel", "/mirror"):
        server.serve(f"{base}/{NAME}.hash", hash_text)
    with pytest.raises(ModelError) as info:
        run(["fetch", NAME], tmp_path)
    msg = one_line(info)
    if hash_text == b"0badc0de":
        assert "does not match FaceFusion's CRC32" in msg and "expected 0badc0de" in msg
    else:
        assert "is not a CRC32" in msg and "nothing was downloaded" in msg
        assert not server.hits(f"/rel/{NAME}.onnx")
    assert leftovers(tmp_path / "models") == []


def test_a_missing_hash_means_no_download(server, model, tmp_path):
    for base in ("/rel", "/mirror"):
        server.serve(f"{base}/{NAME}.hash", b"", "404")
    with pytest.raises(ModelError) as info:
        run(["fetch", NAME], tmp_path)
    msg = one_line(info)
    assert f"FaceFusion's CRC32 of it ({NAME}.hash) could not be had" in msg
    assert "HTTP 404" in msg and "nothing was downloaded" in msg
    assert not server.hits(f"/rel/{NAME}.onnx") and not server.hits(f"/mirror/{NAME}.onnx")
    assert leftovers(tmp_path / "models") == []


def test_the_hash_falls_back_to_the_mirror(server, model, tmp_path):
    server.serve(f"/rel/{NAME}.hash", b"", "500")
    rc, _ = run(["fetch", NAME], tmp_path)
    assert rc == 0 and local_entry(tmp_path)["sha256"] == hashlib.sha256(model).hexdigest()
    assert len(server.hits(f"/rel/{NAME}.hash")) == FAST["retries"] + 1
    assert len(server.hits(f"/mirror/{NAME}.hash")) == 1


def test_a_file_in_place_that_matches_the_crc_is_pinned_without_downloading(server, model,
                                                                            tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / f"{NAME}.onnx").write_bytes(model)
    assert "present (not pinned yet" in list_row(tmp_path)
    rc, _ = run(["fetch", NAME], tmp_path)
    assert rc == 0 and local_entry(tmp_path)["sha256"] == hashlib.sha256(model).hexdigest()
    assert [p for p, _ in server.requests] == [f"/rel/{NAME}.hash"]


def test_from_folder_takes_the_hash_beside_the_file(server, model, tmp_path):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / f"{NAME}.onnx").write_bytes(model)
    with pytest.raises(ModelError) as info:
        run(["fetch", NAME, f"from={ctx}"], tmp_path)
    assert f"{ctx} has no {NAME}.hash beside {NAME}.onnx" in one_line(info)
    assert leftovers(tmp_path / "models") == []
    (ctx / f"{NAME}.hash").write_bytes(crc32(model))
    rc, _ = run(["fetch", NAME, f"from={ctx}"], tmp_path)
    assert rc == 0 and (tmp_path / "models" / f"{NAME}.onnx").read_bytes() == model
    assert local_entry(tmp_path)["size"] == len(model) and server.requests == []


def test_a_broken_local_manifest_stops_the_fetch_before_any_download(server, model, tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "manifest.yaml").write_text("models: [")
    with pytest.raises(ModelError, match="not valid YAML"):
        run(["fetch", NAME], tmp_path)
    assert server.requests == []


# ----------------------------------------------------------------------------- before the fetch
def test_verify_and_render_before_the_first_fetch_say_run_fetch(model, tmp_path):
    with pytest.raises(ModelError) as info:
        store(tmp_path).verify_required([(NAME, "fp32")])      # what a render checks first
    assert one_line(info) == NOT_PINNED_LINE
    with pytest.raises(ModelError) as info:
        run(["verify", NAME], tmp_path)
    assert one_line(info) == NOT_PINNED_LINE
    rc, out = run(["verify"], tmp_path)                          # missing: listed, no failure
    assert rc == 0 and out.splitlines()[1].split()[:2] == [NAME, "missing"]

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / f"{NAME}.onnx").write_bytes(model)  # a file, but nothing to check by
    out = io.StringIO()
    with pytest.raises(ModelError) as info:
        commands.main(["verify"], models_dir=tmp_path / "models", cache_dir=tmp_path / "cache",
                      manifest_paths=[], profiles={}, out=out)
    assert one_line(info) == NOT_PINNED_LINE
    assert out.getvalue().splitlines()[1].split()[:3] == [NAME, "NOT", "PINNED"]
    assert store(tmp_path).status(store(tmp_path).manifest.get(NAME), deep=True) == "present"


def test_a_render_with_a_model_not_pinned_yet_stops_with_one_line(standin_models, tmp_path):
    """The shipped real_esrgan_x4 has no pin until it is fetched: the render stops before it
    decodes a frame and writes nothing."""
    import cv2
    import numpy as np

    (tmp_path / "out").mkdir()
    for name in ("source.jpg", "target.jpg"):
        cv2.imwrite(str(tmp_path / name), np.full((64, 64, 3), 128, np.uint8))
    r = run_cli("profile=low", f"source={tmp_path / 'source.jpg'}",
                f"target={tmp_path / 'target.jpg'}", f"output={tmp_path / 'out' / 'x.jpg'}",
                "processors=swap,frame_enhance", "frame_enhance.model=real_esrgan_x4",
                *model_args(standin_models, tmp_path / "cache"))
    assert r.returncode == 4, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "render: error: model real_esrgan_x4 is not pinned yet: FaceFusion publishes a CRC32 "
        "only, so its SHA-256 is taken at the first fetch: run `render models fetch "
        "real_esrgan_x4`")
    assert list((tmp_path / "out").iterdir()) == []
