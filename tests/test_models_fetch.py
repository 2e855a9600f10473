"""`render models fetch`: downloads from a local HTTP server with controllable misbehaviour."""
from __future__ import annotations

import hashlib
import io
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from render.errors import ModelError
from render.models import commands
from render.models.fetch import copy_from, fetch
from render.models.manifest import Manifest, ModelEntry, load_manifest
from render.models.store import ModelStore

FAST = dict(timeout=0.5, retries=3, backoff=0.01, progress=False)


# ----------------------------------------------------------------------------- the server
@dataclass
class Route:
    data: bytes
    modes: list[str] = field(default_factory=lambda: ["ok"])  # one per request, last repeats
    hits: int = 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:  # noqa: N802
        server: "Server" = self.server.owner  # type: ignore[attr-defined]
        rng = self.headers.get("Range")
        with server.lock:
            route = server.routes.get(self.path)
            server.requests.append((self.path, rng))
            if route is not None:
                route.hits += 1
                mode = route.modes[min(route.hits, len(route.modes)) - 1]
        if route is None or mode == "404":
            return self._plain(404, b"not found")
        if mode == "500":
            return self._plain(500, b"boom")
        if mode == "stall":
            server.release.wait(10)
            self.close_connection = True
            return
        data = route.data
        start = 0
        if rng and mode != "norange":
            start = int(rng.split("=", 1)[1].split("-", 1)[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        if mode == "nolength":  # body delimited by closing the connection
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
            return
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if mode == "cut":
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if mode == "stall_body":
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            server.release.wait(10)
            self.close_connection = True
            return
        self.wfile.write(body)

    def _plain(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def serve(self, path: str, data: bytes, *modes: str) -> str:
        self.routes[path] = Route(data, list(modes) or ["ok"])
        return self.url(path)

    def hits(self, path: str) -> list[str | None]:
        return [r for p, r in self.requests if p == path]

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def blob(n: int = 300_000, seed: int = 1) -> bytes:
    import numpy as np

    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def entry_for(data: bytes, urls, *, name: str = "m", size: bool = True) -> ModelEntry:
    return ModelEntry(name=name, file=f"{name}.onnx", sha256=hashlib.sha256(data).hexdigest(),
                      size=len(data) if size else None, urls=tuple(urls), licence="MIT",
                      commercial_use=True, contract="detector-yunet", template=None,
                      input_size=640)


def range_start(header: str | None) -> int:
    assert header is not None and header.startswith("bytes=") and header.endswith("-")
    return int(header[len("bytes="):-1])


def leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


# ----------------------------------------------------------------------------- fetch
def test_happy_path_writes_file_and_stamp(server, tmp_path):
    data = blob()
    e = entry_for(data, [server.serve("/m.onnx", data)])
    models, stamps = tmp_path / "models", tmp_path / "stamps"
    path = fetch(e, models, stamp_dir=stamps, **FAST)
    assert path == models / "m.onnx" and path.read_bytes() == data
    assert leftovers(models) == ["m.onnx"]
    assert ModelStore(models, Manifest({}), stamps).status(e) == "verified"


@pytest.mark.parametrize("wrong", ["same-size", "longer"])
def test_hash_mismatch_deletes_download_and_names_both_hashes(server, tmp_path, wrong):
    data = blob()
    bad = blob(seed=2) if wrong == "same-size" else data + b"extra"
    e = entry_for(data, [server.serve("/m.onnx", bad)])
    with pytest.raises(ModelError) as info:
        fetch(e, tmp_path, **FAST)
    msg = str(info.value)
    assert "\n" not in msg and e.name in msg
    if wrong == "same-size":
        assert e.sha256 in msg and hashlib.sha256(bad).hexdigest() in msg
    else:
        assert f"is {len(bad)} bytes but its pin says {len(data)}" in msg
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("extra", [b"", b"surplus"])
def test_body_without_content_length(server, tmp_path, extra):
    data = blob()
    e = entry_for(data, [server.serve("/m.onnx", data + extra, "nolength")])
    if not extra:
        assert fetch(e, tmp_path, **FAST).read_bytes() == data
        return
    with pytest.raises(ModelError, match="larger than its pin"):
        fetch(e, tmp_path, **FAST)
    assert leftovers(tmp_path) == []


def test_transfer_cut_half_way_is_resumed_with_range(server, tmp_path):
    data = blob()
    e = entry_for(data, [server.serve("/m.onnx", data, "cut", "ok")])
    fetch(e, tmp_path, **FAST)
    assert (tmp_path / "m.onnx").read_bytes() == data
    first, second = server.hits("/m.onnx")
    assert first is None and 0 < range_start(second) <= len(data) // 2
    assert leftovers(tmp_path) == ["m.onnx"]


def test_partial_file_survives_a_failed_run_and_is_resumed_next_time(server, tmp_path):
    data = blob()
    url = server.serve("/m.onnx", data, "cut", "500")
    e = entry_for(data, [url])
    with pytest.raises(ModelError, match="kept to resume"):
        fetch(e, tmp_path, timeout=0.5, retries=1, backoff=0.01, progress=False)
    partial = tmp_path / "m.onnx.partial"
    kept = partial.stat().st_size
    assert 0 < kept <= len(data) // 2
    server.serve("/m.onnx", data, "ok")
    fetch(e, tmp_path, **FAST)
    assert server.hits("/m.onnx")[-1] == f"bytes={kept}-"
    assert (tmp_path / "m.onnx").read_bytes() == data and not partial.exists()


def test_server_that_ignores_range_restarts_from_zero(server, tmp_path):
    data = blob()
    (tmp_path / "m.onnx.partial").write_bytes(data[:1000])
    e = entry_for(data, [server.serve("/m.onnx", data, "norange")])
    fetch(e, tmp_path, **FAST)
    assert (tmp_path / "m.onnx").read_bytes() == data


def test_whole_partial_answered_416_is_kept(server, tmp_path):
    data = blob()
    (tmp_path / "m.onnx.partial").write_bytes(data)
    e = entry_for(data, [server.serve("/m.onnx", data)], size=False)  # user model: size unknown
    fetch(e, tmp_path, **FAST)
    assert server.hits("/m.onnx") == [f"bytes={len(data)}-"]
    assert (tmp_path / "m.onnx").read_bytes() == data


def test_404_moves_to_the_mirror_without_retrying(server, tmp_path):
    data = blob()
    e = entry_for(data, [server.serve("/gone.onnx", b"", "404"), server.serve("/m.onnx", data)])
    fetch(e, tmp_path, **FAST)
    assert len(server.hits("/gone.onnx")) == 1
    assert (tmp_path / "m.onnx").read_bytes() == data


def test_404_everywhere_fails_with_one_line_naming_the_model(server, tmp_path):
    e = entry_for(b"x", [server.url("/a"), server.url("/b")])
    with pytest.raises(ModelError) as info:
        fetch(e, tmp_path, **FAST)
    msg = str(info.value)
    assert "HTTP 404" in msg and "render models fetch m" in msg and "\n" not in msg
    assert len(server.requests) == 2


def test_500_is_retried_with_backoff_then_succeeds(server, tmp_path):
    data = blob()
    e = entry_for(data, [server.serve("/m.onnx", data, "500", "500", "ok")])
    fetch(e, tmp_path, **FAST)
    assert len(server.hits("/m.onnx")) == 3
    assert (tmp_path / "m.onnx").read_bytes() == data


def test_500_forever_gives_up_after_the_retries(server, tmp_path):
    e = entry_for(b"abc", [server.serve("/m.onnx", b"abc", "500")])
    with pytest.raises(ModelError, match="HTTP 500"):
        fetch(e, tmp_path, timeout=0.5, retries=2, backoff=0.01, progress=False)
    assert len(server.hits("/m.onnx")) == 3
    assert leftovers(tmp_path) == []


def test_stalled_server_times_out_and_the_mirror_is_used(server, tmp_path):
    data = blob()
    e = entry_for(data, [server.serve("/slow.onnx", data, "stall"), server.serve("/m.onnx", data)])
    t0 = time.monotonic()
    fetch(e, tmp_path, timeout=0.3, retries=1, backoff=0.01, progress=False)
    assert time.monotonic() - t0 < 5
    assert len(server.hits("/slow.onnx")) == 2
    assert (tmp_path / "m.onnx").read_bytes() == data


def test_stall_in_the_middle_of_the_body_times_out_and_resumes(server, tmp_path):
    data = blob()
    e = entry_for(data, [server.serve("/m.onnx", data, "stall_body", "ok")])
    fetch(e, tmp_path, timeout=0.3, retries=1, backoff=0.01, progress=False)
    assert 0 < range_start(server.hits("/m.onnx")[1]) <= len(data) // 2
    assert (tmp_path / "m.onnx").read_bytes() == data


def test_stall_everywhere_fails(server, tmp_path):
    e = entry_for(b"abc", [server.serve("/slow.onnx", b"abc", "stall")])
    with pytest.raises(ModelError, match="could not download model m"):
        fetch(e, tmp_path, timeout=0.2, retries=1, backoff=0.01, progress=False)


@pytest.mark.parametrize("with_stamps", [True, False])
def test_fetch_is_idempotent(server, tmp_path, with_stamps):
    data = blob()
    e = entry_for(data, [server.serve("/m.onnx", data)])
    stamps = tmp_path / "stamps" if with_stamps else None
    path = fetch(e, tmp_path / "models", stamp_dir=stamps, **FAST)
    before = path.stat()
    fetch(e, tmp_path / "models", stamp_dir=stamps, **FAST)
    assert len(server.requests) == 1
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_present_but_corrupt_file_is_downloaded_again(server, tmp_path):
    data = blob()
    e = entry_for(data, [server.serve("/m.onnx", data)])
    broken = bytearray(data)
    broken[100] ^= 0xFF
    (tmp_path / "m.onnx").write_bytes(bytes(broken))
    fetch(e, tmp_path, **FAST)
    assert (tmp_path / "m.onnx").read_bytes() == data


def test_entry_without_urls_says_where_to_put_the_file(tmp_path):
    e = entry_for(b"abc", [])
    with pytest.raises(ModelError, match="no download URL.*from=FOLDER"):
        fetch(e, tmp_path, **FAST)


# ----------------------------------------------------------------------------- offline copy
def test_copy_from_folder_verifies(tmp_path):
    data = blob()
    src = tmp_path / "ctx"
    src.mkdir()
    (src / "m.onnx").write_bytes(data)
    e = entry_for(data, [])
    out = copy_from(e, src, tmp_path / "models", stamp_dir=tmp_path / "stamps")
    assert out.read_bytes() == data and leftovers(tmp_path / "models") == ["m.onnx"]

    (src / "m.onnx").write_bytes(blob(seed=3))
    other = tmp_path / "models2"
    with pytest.raises(ModelError, match="does not match its pin"):
        copy_from(e, src, other)
    assert leftovers(other) == []
    with pytest.raises(ModelError, match="not in"):
        copy_from(entry_for(data, [], name="absent"), src, other)


# ----------------------------------------------------------------------------- the commands
@pytest.fixture
def overlay(server, tmp_path):
    """An overlay manifest with two small models served by the local server."""
    a, b = blob(seed=10, n=50_000), blob(seed=11, n=70_000)
    doc = {"version": 1, "models": {
        "tiny_det": {"file": "tiny_det.onnx", "sha256": hashlib.sha256(a).hexdigest(),
                     "size": len(a), "urls": [server.serve("/missing", b"", "404"),
                                              server.serve("/tiny_det.onnx", a)],
                     "licence": "MIT", "commercial_use": True, "contract": "detector-yunet",
                     "template": None, "input_size": 640},
        "tiny_swap": {"file": "tiny_swap.onnx", "sha256": hashlib.sha256(b).hexdigest(),
                      "size": len(b), "urls": [server.serve("/tiny_swap.onnx", b)],
                      "licence": "InsightFace, non-commercial", "commercial_use": False,
                      "contract": "swapper-inswapper", "template": "arcface_128",
                      "input_size": 128},
    }}
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path, {"tiny_det": a, "tiny_swap": b}


def run(argv, tmp_path, overlay_path, profiles=None):
    out = io.StringIO()
    rc = commands.main(argv, models_dir=tmp_path / "models", cache_dir=tmp_path / "cache",
                       manifest_paths=[overlay_path],
                       profiles=profiles or {"p": [("tiny_det", "fp32"), ("tiny_swap", "fp32")],
                                             "q": [("tiny_det", "fp32")]},
                       out=out, fetch_options=FAST)
    return rc, out.getvalue()


def test_fetch_profile_then_list_and_verify(server, tmp_path, overlay):
    path, files = overlay
    rc, out = run(["fetch", "profile=q"], tmp_path, path)
    assert rc == 0 and "tiny_det: verified" in out
    assert not (tmp_path / "models" / "tiny_swap.onnx").exists()
    rc, out = run(["fetch", "profile=all"], tmp_path, path)
    assert (tmp_path / "models" / "tiny_swap.onnx").read_bytes() == files["tiny_swap"]

    rc, out = run(["list"], tmp_path, path)
    line = next(ln for ln in out.splitlines() if ln.startswith("tiny_swap "))
    assert "verified" in line and "NON-COMMERCIAL" in line and line.rstrip().endswith("p")
    line = next(ln for ln in out.splitlines() if ln.startswith("tiny_det "))
    assert "verified" in line and "p, q" in line
    assert "may not be used commercially" in out.splitlines()[-1]

    requests_before = len(server.requests)
    rc, out = run(["fetch", "tiny_det", "tiny_swap"], tmp_path, path)
    assert rc == 0 and len(server.requests) == requests_before  # idempotent

    rc, out = run(["verify"], tmp_path, path)
    rows = {ln.split()[0]: ln.split()[1] for ln in out.splitlines()[1:]}
    assert rc == 0 and rows["tiny_swap"] == rows["tiny_det"] == "verified"
    assert rows["inswapper_128"] == "missing"  # listed, not a failure without names

    target = tmp_path / "models" / "tiny_swap.onnx"
    raw = bytearray(target.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    target.write_bytes(bytes(raw))
    with pytest.raises(ModelError, match=r"tiny_swap .*is corrupt \(sha256 [0-9a-f]{64}, "
                                         r"expected [0-9a-f]{64}\): run `render models fetch "
                                         r"tiny_swap`"):
        run(["verify", "tiny_swap"], tmp_path, path)


def test_fetch_dir_and_from_folder(server, tmp_path, overlay):
    path, files = overlay
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "tiny_det.onnx").write_bytes(files["tiny_det"])
    rc, out = run(["fetch", "tiny_det", "tiny_swap", f"dir={tmp_path / 'elsewhere'}",
                   f"from={ctx}"], tmp_path, path)
    assert rc == 0
    assert server.hits("/tiny_det.onnx") == []  # copied, not downloaded
    assert len(server.hits("/tiny_swap.onnx")) == 1  # not in the folder: downloaded
    assert sorted(leftovers(tmp_path / "elsewhere")) == ["tiny_det.onnx", "tiny_swap.onnx"]


def test_fetch_failure_is_reported_after_trying_the_rest(server, tmp_path, overlay):
    path, files = overlay
    server.serve("/tiny_det.onnx", b"wrong", "ok")
    with pytest.raises(ModelError, match="tiny_det"):
        run(["fetch", "profile=p"], tmp_path, path)
    assert (tmp_path / "models" / "tiny_swap.onnx").exists()
    assert not (tmp_path / "models" / "tiny_det.onnx").exists()
