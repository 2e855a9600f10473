"""Helpers for the appliance tests: engine and Compose discovery, the local base image, an offline
build context (a copy of the work tree plus wheels and stand-in models), and the image build.

Nothing here writes into the work tree: build contexts are temporary copies, the wheel cache lives
under ~/.cache/render/docker-test.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable, Optional

ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = os.environ.get("RENDER_TEST_BASE_IMAGE", "render-base:bookworm-2")
TEST_IMAGE = os.environ.get("RENDER_TEST_IMAGE", "render:cpu-dockertest")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "render" / "docker-test"
CONTAINER_UID = 10001
REPORT: list[str] = []          # lines for the closing summary (conftest.py prints them)

# Paths of the work tree that never go into a build context copy.
_SKIP = {".git", ".pytest_cache", ".venv", "in", "out", "build", "dist", "__pycache__"}


def engine_problem() -> Optional[str]:
    """None when a Docker engine answers, else why not (the skip reason)."""
    try:
        import docker  # noqa: F401
    except ImportError:
        return "the docker Python SDK is not installed (pip install docker)"
    try:
        client = docker.from_env(timeout=10)
        client.ping()
        client.close()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine here"
        return f"no Docker engine reachable ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
    return None


def client(timeout: int = 1800):
    import docker

    return docker.from_env(timeout=timeout)


def compose_command() -> Optional[list[str]]:
    """`docker compose` (plugin) when present, else the standalone `docker-compose`."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def image_exists(name: str) -> bool:
    import docker

    try:
        client(30).images.get(name)
        return True
    except docker.errors.ImageNotFound:
        return False


def base_image_problem() -> Optional[str]:
    """None when the base image exists or can be built here, else the skip reason."""
    if image_exists(BASE_IMAGE):
        return None
    if not shutil.which("debootstrap"):
        return f"base image {BASE_IMAGE} is missing and debootstrap is not installed to build it"
    if os.geteuid() != 0:
        return f"base image {BASE_IMAGE} is missing and debootstrap needs root to build it"
    return None


def ensure_base_image(log) -> float:
    """Build BASE_IMAGE with scripts/build-base-image.sh unless the tag exists; return seconds."""
    start = time.monotonic()
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "build-base-image.sh"), BASE_IMAGE],
                          capture_output=True, text=True, timeout=1200)
    log(proc.stdout.strip())
    if proc.returncode != 0:
        raise RuntimeError(f"build-base-image.sh failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return time.monotonic() - start


def container_python(image: str) -> str:
    """'3.11' for the image's python3."""
    out = client(120).containers.run(
        image, ["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        remove=True, network_mode="none", entrypoint=[])
    return out.decode().strip()


def _work_tree_files() -> list[Path]:
    """Tracked and untracked-but-not-ignored files, as a commit of the work tree would hold them."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True).stdout
        names = [n for n in out.decode().split("\0") if n]
        return [Path(n) for n in names if (ROOT / n).is_file()]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirnames, filenames in os.walk(ROOT):
            dirnames[:] = [d for d in dirnames if d not in _SKIP and not d.endswith(".egg-info")]
            files += [Path(dirpath, f).relative_to(ROOT) for f in filenames if not f.endswith(".pyc")]
        return files


def copy_work_tree(dst: Path) -> Path:
    """Copy the work tree (without .git, ignored files, in/, out/) to dst."""
    dst.mkdir(parents=True, exist_ok=True)
    for rel in _work_tree_files():
        if rel.parts[0] in _SKIP or "__pycache__" in rel.parts:
            continue
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    return dst


def wheelhouse(lock: Path, python: str, log) -> Path:
    """Wheels for every pin of `lock` for CPython `python` on manylinux x86_64, cached by the
    lock's content. Downloaded on the host, which reaches the package index."""
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    folder = CACHE / f"wheels-{lock.stem}-{digest}-py{python}"
    done = folder / ".complete"
    if done.exists():
        return folder
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    platforms: Iterable[str] = ("manylinux_2_36_x86_64", "manylinux_2_28_x86_64", "manylinux_2_17_x86_64",
                                "manylinux2014_x86_64", "manylinux1_x86_64", "linux_x86_64")
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
           "--no-deps", "--require-hashes", "--only-binary=:all:", "--implementation", "cp",
           "--python-version", python, "-d", str(tmp), "-r", str(lock)]
    for p in platforms:
        cmd += ["--platform", p]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        raise RuntimeError(f"pip download for {lock.name} failed: {proc.stderr.strip()[-2000:]}")
    done_tmp = tmp / ".complete"
    done_tmp.write_text("ok\n")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    log(f"wheels for {lock.name} (py{python}) downloaded in {time.monotonic() - start:.0f} s")
    return folder


def build_image(context: Path, tag: str, buildargs: dict[str, str], log_path: Path) -> float:
    """Build context/Dockerfile with the classic builder (as docker-py and docker-compose v1 do);
    stream the log to log_path; return seconds. Raises with the log's tail on failure."""
    api = client().api
    start = time.monotonic()
    error = None
    with open(log_path, "w", encoding="utf-8") as log:
        for chunk in api.build(path=str(context), tag=tag, buildargs=buildargs, rm=True,
                               forcerm=True, pull=False, decode=True):
            if "stream" in chunk:
                log.write(chunk["stream"])
            elif "status" in chunk:
                log.write(f"{chunk['status']}\n")
            if "error" in chunk:
                error = chunk["error"]
                log.write(f"ERROR: {error}\n")
            log.flush()
    if error:
        tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-60:]
        raise RuntimeError(f"docker build of {tag} failed: {error}\n" + "\n".join(tail))
    return time.monotonic() - start


def prune_stale_stages(base: str, build_log: Path) -> int:
    """Remove the untagged build-stage images (deps, models) made on `base` by earlier builds: the
    classic builder keeps every stage image, ~0.4 GB each. Images this build used stay (the cache);
    stages built on other bases (a person's GPU or CPU image) are never touched."""
    import docker

    used = set(re.findall(r"---> ([0-9a-f]{12})\b", build_log.read_text(encoding="utf-8", errors="replace")))
    api = client(120)
    removed = 0
    for img in api.images.list(filters={"dangling": True, "label": f"io.render.base={base}"}):
        if img.short_id.split(":")[-1][:12] in used:
            continue
        try:
            api.images.remove(img.id, noprune=False)
            removed += 1
        except docker.errors.APIError:
            pass
    return removed


def image_size_mb(tag: str) -> float:
    return client(60).images.get(tag).attrs["Size"] / 1e6
