"""deploy/k8s/*.yaml: valid Kubernetes objects (no unknown fields), an Indexed shard Job whose pods
need nothing but Kubernetes' own JOB_COMPLETION_INDEX, an assembly Job with the same keys.

The models of the official client (pip package ``kubernetes``) define the fields; no cluster is needed.
"""
from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

kubernetes = pytest.importorskip("kubernetes", reason="pip install kubernetes to check the manifests")

from render.config import parse_overrides  # noqa: E402
from render.errors import ConfigError, MediaError, ModelError, UsageError  # noqa: E402

K8S = Path(__file__).resolve().parent.parent / "deploy" / "k8s"
MODELS = {("v1", "ConfigMap"): "V1ConfigMap", ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
          ("batch/v1", "Job"): "V1Job"}
INDEX_VARIABLE = "JOB_COMPLETION_INDEX"


class _Response:  # what ApiClient.deserialize reads before client 37
    def __init__(self, doc):
        self.data = json.dumps(doc)


def _deserialize(api, doc: dict, model: str):
    """The client's own deserializer (as for an API server's answer), old and new signatures."""
    if "response_text" in inspect.signature(api.deserialize).parameters:  # kubernetes >= 37
        return api.deserialize(json.dumps(doc), model, "application/json")
    return api.deserialize(_Response(doc), model)


def _documents() -> list[tuple[Path, dict]]:
    out = []
    for f in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc is not None:
                out.append((f, doc))
    return out


def _same(original, round_tripped, where: str) -> list[str]:
    """Differences between the YAML and what the client's model kept of it (unknown fields vanish)."""
    if isinstance(original, dict):
        if not isinstance(round_tripped, dict):
            return [f"{where}: {round_tripped!r} is not a mapping"]
        diffs = [f"{where}.{k}: unknown field (dropped by the model)" for k in original if k not in round_tripped]
        diffs += [f"{where}.{k}: added by the model" for k in round_tripped if k not in original]
        for k in original:
            if k in round_tripped:
                diffs += _same(original[k], round_tripped[k], f"{where}.{k}")
        return diffs
    if isinstance(original, list):
        if not isinstance(round_tripped, list) or len(original) != len(round_tripped):
            return [f"{where}: list changed to {round_tripped!r}"]
        return [d for i, (a, b) in enumerate(zip(original, round_tripped)) for d in _same(a, b, f"{where}[{i}]")]
    # Quantities (nvidia.com/gpu: 1) are strings in the model.
    if original != round_tripped and str(original) != str(round_tripped):
        return [f"{where}: {original!r} became {round_tripped!r}"]
    return []


@pytest.fixture(scope="module")
def objects() -> dict[str, tuple[dict, object]]:
    api = kubernetes.client.ApiClient()
    out = {}
    for f, doc in _documents():
        key = (doc.get("apiVersion"), doc.get("kind"))
        assert key in MODELS, f"{f.name}: unexpected {key}"
        obj = _deserialize(api, doc, MODELS[key])
        diffs = _same(doc, api.sanitize_for_serialization(obj), f"{f.name}:{doc['kind']}")
        assert not diffs, "\n".join(diffs)
        name = doc["metadata"]["name"]
        assert name not in out, f"two objects named {name}"
        out[name] = (doc, obj)
    return out


def test_the_expected_objects(objects):
    assert sorted(objects) == ["render-assemble", "render-data", "render-keys", "render-shards"]
    assert sorted(f.name for f in K8S.glob("*.yaml")) == [
        "pvc.yaml", "render-assemble.yaml", "render-keys.yaml", "render-shards.yaml"]


def test_unknown_fields_are_caught():
    """The round-trip check itself: a misspelt field is reported."""
    api = kubernetes.client.ApiClient()
    doc = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"},
           "spec": {"completionMode": "Indexed", "backofLimitPerIndex": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "i", "limts": {}}]}}}}
    obj = _deserialize(api, doc, "V1Job")
    diffs = _same(doc, api.sanitize_for_serialization(obj), "x")
    assert any("backofLimitPerIndex" in d for d in diffs) and any("limts" in d for d in diffs)


def _container(job) -> object:
    (c,) = job.spec.template.spec.containers
    return c


def _script(job) -> str:
    c = _container(job)
    assert c.command == ["/bin/sh", "-c"] and len(c.args) == 1
    return c.args[0]


def test_pvc_is_read_write_many(objects):
    _, pvc = objects["render-data"]
    assert pvc.spec.access_modes == ["ReadWriteMany"]


def test_shard_job_is_indexed_and_finds_its_index_by_itself(objects):
    doc, job = objects["render-shards"]
    spec = job.spec
    assert spec.completion_mode == "Indexed"
    assert spec.completions >= 1 and 1 <= spec.parallelism <= spec.completions
    assert spec.backoff_limit_per_index >= 1
    assert spec.template.spec.restart_policy == "Never"  # required by podFailurePolicy
    script = _script(job)
    assert f"exec render shard.count={spec.completions} " in script, "completions and shard.count differ"
    c = _container(job)
    assert c.resources.limits["nvidia.com/gpu"] == "1"
    # Kubernetes sets the index; nothing in the manifests may (or needs to).
    for _, d in _documents():
        assert INDEX_VARIABLE not in json.dumps(d), f"{d['metadata']['name']} mentions {INDEX_VARIABLE} outside a comment"
    assert not [e for e in (c.env or []) if e.name.startswith(("SLURM_", "JOB_COMPLETION"))]
    text = (K8S / "render-shards.yaml").read_text()
    assert any(INDEX_VARIABLE in line and line.lstrip().startswith("#") for line in text.splitlines())
    try:  # the renderer's side of the contract
        from render.shards import INDEX_VARIABLES
    except ImportError:
        pass
    else:
        assert INDEX_VARIABLE in INDEX_VARIABLES


def test_failure_policy_matches_the_renderers_exit_codes(objects):
    permanent = sorted({UsageError.exit_code, ConfigError.exit_code, MediaError.exit_code, ModelError.exit_code})
    for name in ("render-shards", "render-assemble"):
        _, job = objects[name]
        rules = job.spec.pod_failure_policy.rules
        fail = [r for r in rules if r.action == "FailJob"]
        assert len(fail) == 1 and fail[0].on_exit_codes.operator == "In"
        assert sorted(fail[0].on_exit_codes.values) == permanent
        assert fail[0].on_exit_codes.container_name == _container(job).name
        assert any(r.action == "Ignore" and r.on_pod_conditions and r.on_pod_conditions[0].type == "DisruptionTarget"
                   for r in rules)


def test_assemble_job_runs_render_assemble_without_gpu(objects):
    _, job = objects["render-assemble"]
    assert job.spec.completion_mode in (None, "NonIndexed") and job.spec.completions in (None, 1)
    script = _script(job)
    assert "exec render assemble \"$@\"" in script and "shard" not in script
    assert "nvidia.com/gpu" not in (_container(job).resources.limits or {})


def test_both_jobs_share_image_keys_volume_and_user(objects):
    _, shards = objects["render-shards"]
    _, assemble = objects["render-assemble"]
    a, b = _container(shards), _container(assemble)
    assert a.image == b.image
    for job in (shards, assemble):
        pod = job.spec.template.spec
        assert pod.security_context.run_as_user == 10001 and pod.security_context.run_as_non_root
        vols = {v.name: v for v in pod.volumes}
        mounts = {m.mount_path: m.name for m in _container(job).volume_mounts}
        assert vols[mounts["/data"]].persistent_volume_claim.claim_name == "render-data"
        assert vols[mounts["/etc/render"]].config_map.name == "render-keys"
        assert "/etc/render/keys" in _script(job)
    # The wrappers differ in their last line only: the keys are read the same way.
    assert _script(shards).rsplit("exec", 1)[0] == _script(assemble).rsplit("exec", 1)[0]
    for f in ("render-shards.yaml", "render-assemble.yaml"):
        assert "10001" in (K8S / f).read_text() and "network" in (K8S / f).read_text()


def _keys(objects) -> list[str]:
    doc, cm = objects["render-keys"]
    return [ln.strip() for ln in cm.data["keys"].splitlines() if ln.strip() and not ln.strip().startswith("#")]


def test_the_keys_are_render_keys(objects):
    keys = _keys(objects)
    parsed = parse_overrides(keys)  # unknown keys raise
    assert {"source", "target", "output"} <= set(parsed)
    assert not [k for k in parsed if k.startswith("shard")]
    assert all(v.startswith("/data/") for k, v in parsed.items() if k in ("source", "target", "output"))


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs /bin/sh")
@pytest.mark.parametrize("name, head", [("render-shards", None), ("render-assemble", ["assemble"])])
def test_wrapper_passes_each_key_line_as_one_argument(objects, tmp_path, name, head):
    _, job = objects[name]
    keys_file = tmp_path / "keys"
    keys_file.write_text("profile=low\n\n# a comment\n  target=/data/in/my clip.mp4  \n"
                         "output=/data/out/it's \"x\" $HOME `id`.mp4\nglob=*\nlast=no-newline")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    rec = tmp_path / "argv.json"
    fake = bindir / "render"
    fake.write_text(f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(rec)!r}, 'w'))\n")
    fake.chmod(0o755)
    script = _script(job).replace("/etc/render/keys", str(keys_file))
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}", JOB_COMPLETION_INDEX="2")
    p = subprocess.run(["/bin/sh", "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    expected_head = head or [f"shard.count={job.spec.completions}"]
    assert json.loads(rec.read_text()) == [*expected_head, "profile=low", "target=/data/in/my clip.mp4",
                                           "output=/data/out/it's \"x\" $HOME `id`.mp4", "glob=*", "last=no-newline"]
