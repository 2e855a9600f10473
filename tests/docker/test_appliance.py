"""The appliance end to end: the real Dockerfile built on a locally made base image (no registry is
reachable here), the CPU ONNX Runtime, the suite's stand-in models through the offline model path
(models/local/) and the Python wheels through the offline wheel path (requirements/wheels/); then
`docker compose run render-cpu profile=low` on generated media in ./in, as a person would run it.

Skips with the reason when no Docker engine is reachable, or when the base image is missing and
cannot be made here (debootstrap missing, not root). The base image is cached by tag across runs
(scripts/build-base-image.sh); the image build reuses the engine's layer cache.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

import dockerlib
from render import standins
from render.standins import media as mf

SERVICE = "render-cpu"


def _log(line: str) -> None:
    print(f"[appliance] {line}", flush=True)


class _Summary:
    """Prints build times and the image size at the end of the run, also under -q without -s.
    (Registered from the fixture: a conftest.py here would shadow the suite's own `conftest`.)"""

    def pytest_terminal_summary(self, terminalreporter):
        if dockerlib.REPORT:
            terminalreporter.section("render appliance")
            for line in dockerlib.REPORT:
                terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def image(tmp_path_factory, request) -> dict:
    """Build the CPU image from a temporary copy of the work tree; return facts about it."""
    if not request.config.pluginmanager.has_plugin("render-appliance-summary"):
        request.config.pluginmanager.register(_Summary(), "render-appliance-summary")
    for problem in (dockerlib.engine_problem, dockerlib.base_image_problem):
        reason = problem()
        if reason:
            pytest.skip(reason)
    t_base = dockerlib.ensure_base_image(_log)
    base_mb = dockerlib.image_size_mb(dockerlib.BASE_IMAGE)

    work = tmp_path_factory.mktemp("appliance")
    context = dockerlib.copy_work_tree(work / "context")
    standins.write_standins(context / "models" / "local")          # offline model path
    python = dockerlib.container_python(dockerlib.BASE_IMAGE)
    wheels = dockerlib.wheelhouse(dockerlib.ROOT / "requirements" / "onnxruntime.lock", python, _log)
    shutil.copytree(wheels, context / "requirements" / "wheels",   # offline wheel path
                    ignore=shutil.ignore_patterns(".complete"))

    api = dockerlib.client()
    try:
        old_id = api.images.get(dockerlib.TEST_IMAGE).id
    except Exception:  # noqa: BLE001 - no previous build
        old_id = None
    log_path = work / "build.log"
    args = {"BASE_IMAGE": dockerlib.BASE_IMAGE, "ORT_PACKAGE": "onnxruntime", "MODEL_SET": "low",
            "VERSION": "0.0.0-test", "SOURCE_URL": "https://example.invalid/render-test"}
    t_build = dockerlib.build_image(context, dockerlib.TEST_IMAGE, args, log_path)
    img = api.images.get(dockerlib.TEST_IMAGE)
    if old_id and old_id != img.id:    # don't pile up dangling images run after run
        try:
            api.images.remove(old_id)
        except Exception:  # noqa: BLE001 - still used by something: leave it
            pass
    dockerlib.prune_stale_stages(dockerlib.BASE_IMAGE, log_path)
    size_mb = img.attrs["Size"] / 1e6
    lines = [f"base image {dockerlib.BASE_IMAGE}: {base_mb:.0f} MB, ready in {t_base:.0f} s",
             f"image {dockerlib.TEST_IMAGE} (BASE_IMAGE={dockerlib.BASE_IMAGE}, ORT_PACKAGE=onnxruntime, "
             f"MODEL_SET=low, stand-in models): built in {t_build:.0f} s, size {size_mb:.0f} MB "
             f"({size_mb - base_mb:.0f} MB over the base)"]
    for line in lines:
        _log(line)
    dockerlib.REPORT.extend(lines)
    return {"attrs": img.attrs, "size_mb": size_mb, "build_log": log_path}


@pytest.fixture
def project(tmp_path, image):
    """A Compose project folder as a person has it: compose.yaml, ./in and ./out."""
    cmd = dockerlib.compose_command()
    if cmd is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    d = tmp_path / "project"
    (d / "in").mkdir(parents=True)
    (d / "out").mkdir()
    shutil.copy2(dockerlib.ROOT / "compose.yaml", d / "compose.yaml")
    # ./out must be writable by the container's user (uid 10001 unless RENDER_UID is set)
    if os.geteuid() == 0:
        os.chown(d / "out", dockerlib.CONTAINER_UID, dockerlib.CONTAINER_UID)
    else:
        os.chmod(d / "out", 0o777)
    (d / "jobs").mkdir()
    if os.geteuid() == 0:
        os.chown(d / "jobs", dockerlib.CONTAINER_UID, dockerlib.CONTAINER_UID)
    else:
        os.chmod(d / "jobs", 0o777)
    name = f"rdt{uuid.uuid4().hex[:10]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RENDER_", "COMPOSE_"))}
    env.update(COMPOSE_PROJECT_NAME=name, RENDER_CPU_IMAGE=dockerlib.TEST_IMAGE,
               RENDER_WEB_IMAGE=dockerlib.TEST_IMAGE, RENDER_LOCK_VOLUME=f"{name}-locks")
    containers: list[str] = []

    def compose(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([*cmd, "-f", str(d / "compose.yaml"), *args], cwd=d, env=env,
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def run(*args: str, entrypoint: str | None = None, keep: bool = False,
            timeout: float = 300, service: str = SERVICE) -> tuple[subprocess.CompletedProcess, str]:
        cname = f"{name}-{len(containers)}"
        opts = ["run", "-T", "--name", cname]
        if not keep:
            opts.append("--rm")
        if entrypoint:
            opts += ["--entrypoint", entrypoint]
        containers.append(cname)
        return compose(*opts, service, *args, timeout=timeout), cname

    yield {"dir": d, "run": run, "compose": compose, "name": name, "env": env}

    api = dockerlib.client(60)
    for cname in containers:
        try:
            api.containers.get(cname).remove(force=True)
        except Exception:  # noqa: BLE001 - already gone (--rm)
            pass
    compose("down", "--volumes", "--remove-orphans", timeout=120)
    for volume in (f"{name}_render-cache", f"{name}-locks"):
        try:
            api.volumes.get(volume).remove(force=True)
        except Exception:  # noqa: BLE001 - removed by `down`
            pass
    if os.geteuid() == 0:   # files the container wrote belong to uid 10001: hand them back
        for p in [d, *d.rglob("*")]:
            os.lchown(p, 0, 0)


def test_image_metadata(image):
    cfg = image["attrs"]["Config"]
    assert cfg["User"] == "10001:10001"
    assert cfg["Entrypoint"] == ["/opt/render/entrypoint"]
    env = dict(e.split("=", 1) for e in cfg["Env"])
    assert env["RENDER_MODELS_DIR"] == "/opt/render/models" and env["RENDER_CACHE_DIR"] == "/cache"
    assert env["RENDER_INPUT_DIR"] == "/data/in" and env["RENDER_OUTPUT_DIR"] == "/data/out"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    labels = cfg["Labels"]
    assert labels["org.opencontainers.image.version"] == "0.0.0-test"
    assert labels["org.opencontainers.image.source"] == "https://example.invalid/render-test"
    assert "non-commercial" in labels["io.render.model-licences"]
    assert labels["io.render.onnxruntime"] == "onnxruntime" and labels["io.render.model-set"] == "low"
    # MODEL_SET=low baked in exactly the low profile's models, verified (the stand-ins' hashes)
    listing = dockerlib.client(60).containers.run(
        dockerlib.TEST_IMAGE, ["/opt/render/models/MODELS.txt"], entrypoint=["cat"], remove=True,
        network_mode="none").decode()
    status = {ln.split()[0]: ln for ln in listing.splitlines() if ln and not ln.startswith(("NAME", "models"))}
    for name in ("scrfd_2.5g", "arcface_w600k_r50", "inswapper_128_fp16"):
        assert "verified" in status[name], listing
    assert "verified" not in status["inswapper_128"] and "verified" not in status["gfpgan_1.4"], listing


def test_the_cpu_image_has_what_int8_conversion_needs(image):
    """render models convert NAME int8 runs in the CPU image: ONNX Runtime's quantiser and the
    built-in calibration faces (scikit-image's data) are there."""
    probe = ("import onnxruntime.quantization as q; from render.models.calibration import "
             "builtin_frames; print(len(builtin_frames()), q.QuantFormat.QDQ.name)")
    said = dockerlib.client(60).containers.run(
        dockerlib.TEST_IMAGE, ["-c", probe], entrypoint=["/opt/render/venv/bin/python"],
        remove=True, network_mode="none").decode().split()
    assert said == ["12", "QDQ"], said


def _diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=2)


def _inside(shape, box, shrink=0.2) -> np.ndarray:
    m = np.zeros(shape[:2], bool)
    x1, y1, x2, y2 = box
    bw, bh = x2 - x1, y2 - y1
    m[int(y1 + shrink * bh):int(y2 - shrink * bh), int(x1 + shrink * bw):int(x2 - shrink * bw)] = True
    return m


def _outside(shape, boxes, grow=0.3) -> np.ndarray:
    near = np.zeros(shape[:2], bool)
    for x1, y1, x2, y2 in boxes:
        bw, bh = x2 - x1, y2 - y1
        near[max(0, int(y1 - grow * bh)):int(y2 + grow * bh), max(0, int(x1 - grow * bw)):int(x2 + grow * bw)] = True
    return ~near


def test_compose_run_renders_the_input_folder(project):
    d = project["dir"]
    clip = mf.make_clip(d / "in" / "clip.mp4", width=640, height=360, seconds=1.0, audio=True)
    mf.make_image_target(d / "in" / "photo.jpg", width=320, height=240)
    mf.make_source_image(d / "in" / "source.jpg")

    start = time.monotonic()
    r, cname = project["run"]("profile=low", keep=True)
    took = time.monotonic() - start
    assert r.returncode == 0, r.stdout + r.stderr
    dockerlib.REPORT.append(f"compose run {SERVICE} profile=low (1 s clip + 1 image): {took:.1f} s")
    assert "frame" in r.stderr and "fps" in r.stderr, r.stderr            # progress was printed
    assert sorted(p.name for p in (d / "out").iterdir()) == [
        "clip.mp4", "clip.mp4.report.json", "photo.jpg", "photo.jpg.report.json"]
    report = json.loads((d / "out" / "clip.mp4.report.json").read_text())
    assert report["installation"]["image"]["base"] == dockerlib.BASE_IMAGE
    assert report["lock"]["device"] == "cpu"       # the CPU service locks the cpu device
    assert report["marks"]["c2pa"]["signed"] is True
    mounts = {m["Destination"]: m for m in
              dockerlib.client(60).containers.get(cname).attrs["Mounts"]}
    assert mounts["/locks"]["Name"] == f"{project['name']}-locks"     # the shared lock volume

    # the output checks of the renderer itself
    src, dst = mf.probe_counts(clip.path), mf.probe_counts(d / "out" / "clip.mp4")
    assert dst.frames == src.frames == clip.frame_count
    assert dst.fps == src.fps and (dst.width, dst.height) == (src.width, src.height)
    assert dst.audio_codec is not None, "audio was dropped"
    assert abs(dst.audio_duration - src.audio_duration) <= 1 / float(src.fps) + 1e-3
    a, b = mf.read_frames(clip.path), mf.read_frames(d / "out" / "clip.mp4")
    assert a.shape == b.shape
    swapped = 0
    for i, boxes in enumerate(clip.boxes):
        diff = _diff(a[i], b[i])
        if not boxes:
            assert diff.mean() < 2.0, f"frame {i} has no face but changed"
            continue
        assert diff[_outside(a[i].shape, boxes)].mean() < 2.0, f"frame {i} changed outside its faces"
        # profile=low selects one face (the largest): its pixels must change
        largest = max(boxes, key=lambda bx: (bx[2] - bx[0]) * (bx[3] - bx[1]))
        assert diff[_inside(a[i].shape, largest)].mean() > 8, f"frame {i}: face {largest} not swapped"
        swapped += 1
    assert swapped == len(clip.frames_with_faces()) > 0

    # how the container ran: started as root with only SETUID/SETGID and no new privileges, the
    # render itself as the owner of ./out (its files are theirs); no network, read-only root and
    # input, cache on the volume
    info = dockerlib.client(60).containers.get(cname).attrs
    owner = (d / "out").stat().st_uid
    assert {p.stat().st_uid for p in (d / "out").iterdir()} == {owner}
    host = info["HostConfig"]
    assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == ["SETGID", "SETUID"]
    assert "no-new-privileges:true" in host["SecurityOpt"]
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert "/tmp" in (host.get("Tmpfs") or {})
    mounts = {m["Destination"]: m for m in info["Mounts"]}
    assert mounts["/data/in"]["RW"] is False
    assert mounts["/data/out"]["RW"] is True
    assert mounts["/cache"]["Type"] == "volume" and mounts["/cache"]["Name"].endswith("render-cache")
    assert not host.get("DeviceRequests"), "the CPU service must not ask for a GPU"


PROBE = r"""
import json, os
def writable(path):
    probe = os.path.join(path, ".probe-%d" % os.getpid())
    try:
        with open(probe, "w") as f:
            f.write("x")
        os.remove(probe)
        return "yes"
    except OSError as exc:
        return exc.strerror
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "euid": os.geteuid(),
    "interfaces": sorted(os.listdir("/sys/class/net")),
    "paths": {p: writable(p) for p in ("/", "/opt/render/models", "/opt/render/app", "/data/in",
                                       "/data/out", "/data/jobs", "/locks", "/cache",
                                       "/tmp")},
}))
"""


def test_container_is_locked_down(project):
    mf.make_source_image(project["dir"] / "in" / "source.jpg")
    r, _ = project["run"]("--exec", "/opt/render/venv/bin/python", "-c", PROBE,
                          entrypoint="/opt/render/entrypoint")
    assert r.returncode == 0, r.stdout + r.stderr
    facts = json.loads(r.stdout.strip().splitlines()[-1])
    owner = (project["dir"] / "out").stat().st_uid
    assert facts["uid"] == facts["euid"] == owner != 0
    assert facts["interfaces"] == ["lo"], "network_mode: none leaves only the loopback interface"
    paths = facts["paths"]
    for ro in ("/", "/opt/render/models", "/opt/render/app", "/data/in"):
        assert paths[ro] == "Read-only file system", (ro, paths[ro])
    for rw in ("/data/out", "/data/jobs", "/locks", "/cache", "/tmp"):
        assert paths[rw] == "yes", (rw, paths[rw])
    assert sorted(p.name for p in (project["dir"] / "in").iterdir()) == ["source.jpg"]


def test_the_readmes_command_works_whoever_made_out(project):
    """./out made by a user who is not the image's 10001 (uid 4321 here), no RENDER_UID: the
    README's command renders, as that user. ./out owned by root (Docker makes a missing one so):
    one line with the command that fixes it."""
    d = project["dir"]
    if os.geteuid() != 0:
        pytest.skip("giving ./out to another uid needs root")
    mf.make_source_image(d / "in" / "face.jpg")
    mf.make_clip(d / "in" / "clip.mp4", width=320, height=240, seconds=0.4, audio=True)
    os.chown(d / "out", 4321, 4321)
    r, _ = project["run"]("profile=low", "source=/data/in/face.jpg", "target=/data/in/clip.mp4",
                          "output=/data/out/clip.mp4")
    assert r.returncode == 0, r.stdout + r.stderr
    made = sorted(d.joinpath("out").iterdir())
    assert [p.name for p in made] == ["clip.mp4", "clip.mp4.report.json"]
    assert {(p.stat().st_uid, p.stat().st_gid) for p in made} == {(4321, 4321)}
    os.chown(d / "out", 0, 0)
    r, _ = project["run"]("profile=low", "source=/data/in/face.jpg", "target=/data/in/clip.mp4",
                          "output=/data/out/again.mp4")
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("render: error: ")]
    assert r.returncode == 2 and len(errors) == 1, r.stdout + r.stderr
    assert 'sudo chown -R "$(id -u):$(id -g)" ./out' in errors[0], errors


def test_missing_source_or_nothing_to_render_fails_with_one_clear_line(project):
    d = project["dir"]

    def error_line(r):
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("render: error: ")]
        assert r.returncode != 0 and len(errors) == 1, r.stdout + r.stderr
        assert "Traceback" not in r.stderr
        return errors[0]

    mf.make_clip(d / "in" / "clip.mp4", width=320, height=240, seconds=0.4, audio=False)
    line = error_line(project["run"]("profile=low")[0])              # no source face in ./in
    assert "source" in line and "/data/in" in line, line
    (d / "in" / "clip.mp4").unlink()
    mf.make_source_image(d / "in" / "source.jpg")
    line = error_line(project["run"]("profile=low")[0])              # a face but nothing to render
    assert "nothing to render" in line, line
    assert list((d / "out").iterdir()) == []


def test_queue_service_renders_submitted_jobs(project):
    """Two jobs submitted through the appliance, rendered by the queue service's worker."""
    d = project["dir"]
    mf.make_source_image(d / "in" / "source.jpg")
    for name in ("a.mp4", "b.mp4"):
        mf.make_clip(d / "in" / name, width=320, height=240, seconds=0.6, audio=True)
    ids = []
    for name in ("a.mp4", "b.mp4"):
        r, _ = project["run"]("submit", "profile=low", "source=/data/in/source.jpg",
                              f"target=/data/in/{name}", f"output=/data/out/{name}")
        assert r.returncode == 0, r.stdout + r.stderr
        ids.append(r.stdout.strip().splitlines()[-1])
    # the queue service's worker, once (no follow): it renders both jobs and exits
    r, _ = project["run"]("work", service="render-queue-cpu", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.stem for p in (d / "jobs" / "done").iterdir()) == sorted(ids)
    for name in ("a.mp4", "b.mp4"):
        assert mf.probe_counts(d / "out" / name).frames == 15
    r, _ = project["run"]("jobs")
    assert all(f"{i}  done" in r.stdout for i in ids), r.stdout


def test_classroom_services_render_a_students_upload(project):
    """render-web as compose starts it (its published port, read-only, not root) and the queue
    service's worker: a student's upload through the page's API comes back rendered."""
    import re
    import socket

    import requests

    d = project["dir"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    project["env"]["RENDER_WEB_PORT"] = str(port)
    r, _ = project["run"]("users", "add", "ann", service="render-web")
    assert r.returncode == 0, r.stdout + r.stderr
    one_time = re.search(r"one-time password: (\S+)", r.stdout).group(1)
    r = project["compose"]("up", "-d", "render-web")
    assert r.returncode == 0, r.stdout + r.stderr
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            if requests.get(url + "/signin", timeout=5).status_code == 200:
                break
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            logs = project["compose"]("logs", "render-web")
            raise AssertionError(f"render-web did not answer on {url}: {logs.stdout}{logs.stderr}")
        time.sleep(0.5)

    http = requests.Session()
    r = http.post(url + "/api/session", json={"name": "ann", "password": one_time})
    assert r.status_code == 200 and r.json()["must_change"], r.text
    csrf = {"X-CSRF-Token": r.json()["csrf"]}
    r = http.post(url + "/api/password", json={"current": one_time, "new": "ann's password"},
                  headers=csrf)
    assert r.status_code == 200, r.text
    face = mf.make_source_image(d / "face.jpg").path
    clip = mf.make_clip(d / "clip.mp4", width=320, height=240, seconds=0.6, audio=True).path
    with open(face, "rb") as f, open(clip, "rb") as c:
        r = http.post(url + "/api/jobs", headers=csrf, data={"profile": "low", "consent": "yes"},
                      files={"source": ("face.jpg", f), "target": ("clip.mp4", c)})
    assert r.status_code == 201, r.text
    job = r.json()["id"]
    assert (d / "jobs" / "queued" / f"{job}.yaml").exists()          # in the shared spool

    r, _ = project["run"]("work", service="render-queue-cpu", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    seen = http.get(f"{url}/api/jobs/{job}").json()
    assert seen["state"] == "done", seen
    out = d / "result.mp4"
    out.write_bytes(http.get(url + seen["output"]).content)
    assert mf.probe_counts(out).frames == 15
    report = http.get(url + seen["report"]).json()
    assert report["job"]["owner"] == "ann" and report["job"]["consent"]["given"] is True
    assert report["marks"]["c2pa"]["signed"] is True

    cid = project["compose"]("ps", "-q", "render-web").stdout.strip()
    info = dockerlib.client(60).containers.get(cid).attrs
    host = info["HostConfig"]
    assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == ["SETGID", "SETUID"]
    top = dockerlib.client(60).containers.get(cid).top(ps_args="-o pid,uid,args")
    uids = {int(p[top["Titles"].index("UID")]) for p in top["Processes"]}
    assert uids == {(d / "jobs").stat().st_uid} != {0}, top   # no root process in it
    assert host["ReadonlyRootfs"] is True and host["NetworkMode"] != "none"
    assert list(host["PortBindings"]) == ["8080/tcp"] and not host.get("DeviceRequests")
