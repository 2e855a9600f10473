"""Static checks of the appliance files (no Docker needed): compose.yaml's two services, the
Dockerfile's build arguments and the hash-locked requirements."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))


def test_both_services_are_locked_down_the_same_way():
    services = _compose()["services"]
    assert {"render", "render-cpu", "render-queue", "render-queue-cpu"} <= set(services)
    lock = "render-locks:/locks"
    for name, svc in services.items():
        if name == "render-web":      # the web page publishes a port (its own test checks it)
            continue
        assert svc["network_mode"] == "none", name
        assert svc["read_only"] is True, name
        assert any(str(t).split(":")[0] == "/tmp" for t in svc["tmpfs"]), name
        assert sorted(svc["volumes"]) == sorted(["./in:/data/in:ro", "./out:/data/out",
                                                 "./jobs:/data/jobs", "render-cache:/cache", lock])
        assert svc["environment"]["RENDER_LOCK_DIR"] == "/locks", name
        _starts_only_to_drop_to_the_owner(name, svc)
    assert "render-cache" in _compose()["volumes"]
    assert _compose()["volumes"]["render-locks"]["name"] == "${RENDER_LOCK_VOLUME:-render-locks}"


def _starts_only_to_drop_to_the_owner(name: str, svc: dict) -> None:
    """Started as root (or RENDER_UID) with every capability dropped but the two the entrypoint
    needs to become the owner of ./out, and no new privileges: no root process stays."""
    assert svc["user"] == "${RENDER_UID:-0}:${RENDER_GID:-0}", (name, svc["user"])
    assert svc["cap_drop"] == ["ALL"] and sorted(svc["cap_add"]) == ["SETGID", "SETUID"], name
    assert svc["security_opt"] == ["no-new-privileges:true"], name
    assert "init" not in svc, name       # an init would stay as root; render is PID 1 as the owner


def test_only_the_gpu_service_asks_for_a_gpu_and_each_sits_in_its_own_profile():
    services = _compose()["services"]
    gpu, cpu = services["render"], services["render-cpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert "deploy" not in cpu and "runtime" not in cpu and "gpus" not in cpu
    assert gpu["profiles"] == ["gpu"] and cpu["profiles"] == ["cpu"]
    assert gpu["build"]["args"]["ORT_PACKAGE"] == "onnxruntime-gpu"
    assert cpu["build"]["args"]["ORT_PACKAGE"] == "onnxruntime"


def test_dockerfile_build_arguments_and_runtime_settings():
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    args: dict[str, str] = {}
    for name, default in re.findall(r"^ARG ([A-Z_]+)(?:=(.*))?$", text, re.M):
        args.setdefault(name, default)          # the first declaration carries the default
    for name in ("BASE_IMAGE", "ORT_PACKAGE", "MODEL_SET", "WITH_TENSORRT", "VERSION", "SOURCE_URL"):
        assert name in args, name
    assert re.fullmatch(r"nvidia/cuda:12\.\d+\.\d+-cudnn-runtime-ubuntu22\.04", args["BASE_IMAGE"])
    assert args["ORT_PACKAGE"] == "onnxruntime-gpu" and args["MODEL_SET"] == "all"
    assert re.search(r"^USER 10001:10001$", text, re.M)
    assert re.search(r'^ENTRYPOINT \["/opt/render/entrypoint"\]$', text, re.M)
    assert "COPY deploy/entrypoint.sh /opt/render/entrypoint" in text
    assert "--require-hashes" in text and "PYTHONDONTWRITEBYTECODE=1" in text
    # code comes after the models: the last COPY of render/ follows the models stage
    assert text.rindex("COPY render/ ") > text.index("COPY --from=models")


def _pins(lock: Path) -> dict[str, tuple[str, list[str]]]:
    pins: dict[str, tuple[str, list[str]]] = {}
    name = None
    for line in lock.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^ \\]+)", line)
        if m:
            name = m.group(1).lower()
            pins[name] = (m.group(2), [])
        elif name and "--hash=sha256:" in line:
            pins[name][1].append(line.split("--hash=sha256:")[1].split()[0])
        elif line.strip() and not line.lstrip().startswith(("#", "--hash")):
            name = None
    return pins


def test_locks_pin_every_package_with_hashes_and_agree_with_each_other():
    cpu = _pins(ROOT / "requirements" / "onnxruntime.lock")
    gpu = _pins(ROOT / "requirements" / "onnxruntime-gpu.lock")
    for pins in (cpu, gpu):
        assert all(hashes for _, hashes in pins.values())
        for dep in ("numpy", "opencv-python-headless", "ffmpeg-python", "pyyaml", "onnx", "requests", "tqdm"):
            assert dep in pins, dep
    assert cpu["onnxruntime"][0] == gpu["onnxruntime-gpu"][0]
    # only the CPU image calibrates int8 models on scikit-image's faces (onnxruntime.in)
    cpu_only = {"scikit-image", "scipy", "networkx", "pillow", "imageio", "tifffile", "lazy-loader"}
    assert cpu_only <= set(cpu)
    shared = set(cpu) - {"onnxruntime"} - cpu_only
    assert shared == set(gpu) - {"onnxruntime-gpu"}
    assert all(cpu[n][0] == gpu[n][0] for n in shared)


def test_the_web_page_service_publishes_one_port_and_shares_the_queue_folders():
    services = _compose()["services"]
    web, queue = services["render-web"], services["render-queue"]
    assert web["command"][0] == "serve" and "host=0.0.0.0" in web["command"]
    assert len(web["ports"]) == 1 and web["ports"][0].endswith(":8080")
    assert "network_mode" not in web and "deploy" not in web       # a network, no GPU
    assert web["read_only"] is True and web["restart"] == "unless-stopped"
    _starts_only_to_drop_to_the_owner("render-web", web)
    assert web["environment"]["RENDER_OWNER_OF"] == "/data/jobs"     # it writes ./jobs, not ./out
    # the same spool, locks and cache as the worker; the state folder inside the shared spool mount
    for mount in ("./jobs:/data/jobs", "render-locks:/locks", "render-cache:/cache"):
        assert mount in web["volumes"] and mount in queue["volumes"], mount
    env = web["environment"]
    assert env["RENDER_SPOOL_DIR"] == queue["environment"]["RENDER_SPOOL_DIR"] == "/data/jobs"
    assert env["RENDER_LOCK_DIR"] == "/locks" and env["RENDER_STATE_DIR"].startswith("/data/jobs/")
    assert queue["network_mode"] == "none"
