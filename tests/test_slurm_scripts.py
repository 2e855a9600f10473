"""render.slurm: the array and assembly scripts, run by bash with stand-in launchers, and submit()."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from render import slurm
from render.errors import RenderError, UsageError

ROOT = Path(__file__).resolve().parent.parent
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is needed to run the job scripts")

# Values a shell would mangle if they were not quoted.
NASTY = ["target=/data/in/my clip.mp4", "output=/data/out/it's \"done\".mp4", "note=$HOME `id` $(id) ; rm -rf /",
         "multi=line one\nline two", "glob=*.mp4", "empty="]


def _exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _recorder(path: Path, record: Path) -> Path:
    """An executable that writes its argv (and SLURM_ARRAY_TASK_ID) as JSON lines to RECORD."""
    return _exe(path, f"""#!{sys.executable}
import json, os, sys
with open({str(record)!r}, "a") as f:
    f.write(json.dumps({{"prog": os.path.basename(sys.argv[0]), "argv": sys.argv[1:],
                        "task": os.environ.get("SLURM_ARRAY_TASK_ID")}}) + "\\n")
""")


def _records(record: Path) -> list[dict]:
    return [json.loads(line) for line in record.read_text().splitlines()]


def _run(script: str, tmp_path: Path, env: dict[str, str], name: str = "job.sbatch") -> subprocess.CompletedProcess:
    f = tmp_path / name
    f.write_text(script)
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    base.update(env)
    return subprocess.run([BASH, str(f)], env=base, capture_output=True, text=True, timeout=30,
                          cwd=tmp_path, stdin=subprocess.DEVNULL)


def _sbatch_options(script: str) -> list[str]:
    """The #SBATCH options sbatch reads: those before the first line that is not a comment or blank."""
    opts = []
    for line in script.splitlines()[1:]:
        if line.startswith("#SBATCH "):
            opts.append(line[len("#SBATCH "):])
        elif line.strip() and not line.startswith("#"):
            break
    return opts


def test_array_script_sbatch_options():
    s = slurm.array_script(["a=b"], 8, 2, log_dir=Path("/shared/logs"), extra_sbatch=["--time=1:00:00", "-p gpu"])
    assert _sbatch_options(s) == ["--job-name=render", "--array=0-7%2", "--gres=gpu:1", "--requeue",
                                  "--open-mode=append", "--output=/shared/logs/render-%A_%a.out",
                                  "--time=1:00:00", "-p gpu"]
    assert s.startswith("#!/bin/bash\n")
    # No throttle when it would not throttle anything, no gres when asked for none.
    assert "#SBATCH --array=0-3\n" in slurm.array_script(["a=b"], 4)
    assert "#SBATCH --array=0-3\n" in slurm.array_script(["a=b"], 4, 4)
    assert "#SBATCH --array=0-0\n" in slurm.array_script([], 1, 1)
    assert "--gres" not in slurm.array_script(["a=b"], 4, gres=None)
    assert "#SBATCH --gres=gpu:a100:2\n" in slurm.array_script(["a=b"], 4, gres="gpu:a100:2")


def test_assemble_script_sbatch_options():
    s = slurm.assemble_script(["a=b"], log_dir=Path("logs"), job_name="clip1")
    assert _sbatch_options(s) == ["--job-name=clip1-assemble", "--requeue", "--open-mode=append",
                                  "--kill-on-invalid-dep=yes", "--output=logs/clip1-assemble-%j.out"]
    assert "--array" not in s and "--gres" not in s and "shard.count" not in s
    assert "#SBATCH --gres=gpu:1\n" in slurm.assemble_script(["a=b"], gres="gpu:1")


@pytest.mark.parametrize("builder", ["array", "assemble"])
def test_scripts_pass_bash_syntax_check(builder, tmp_path):
    for launcher, image in (("plain", ""), ("apptainer", "x.sif"), ("docker", "render:gpu")):
        s = (slurm.array_script(NASTY, 3, None, launcher, image, mounts=["/shared"]) if builder == "array"
             else slurm.assemble_script(NASTY, launcher, image, mounts=["/shared"]))
        f = tmp_path / "s.sh"
        f.write_text(s)
        p = subprocess.run([BASH, "-n", str(f)], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr


def test_plain_launcher_passes_keys_verbatim(tmp_path):
    rec = tmp_path / "rec.jsonl"
    py = _recorder(tmp_path / "fakepython", rec)
    r = _run(slurm.array_script(NASTY, 4, 2, "plain", python=str(py)), tmp_path, {"SLURM_ARRAY_TASK_ID": "3"})
    assert r.returncode == 0, r.stderr
    r = _run(slurm.assemble_script(NASTY, "plain", python=str(py)), tmp_path, {})
    assert r.returncode == 0, r.stderr
    shard, assemble = _records(rec)
    assert shard["argv"] == ["-m", "render", "shard.count=4", *NASTY]
    assert shard["task"] == "3"
    assert assemble["argv"] == ["-m", "render", "assemble", *NASTY]


def test_plain_launcher_render_on_path(tmp_path):
    rec = tmp_path / "rec.jsonl"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _recorder(bindir / "render", rec)
    r = _run(slurm.array_script(["a=b"], 2, python=""), tmp_path,
             {"SLURM_ARRAY_TASK_ID": "0", "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})
    assert r.returncode == 0, r.stderr
    assert _records(rec) == [{"prog": "render", "argv": ["shard.count=2", "a=b"], "task": "0"}]


def test_default_python_is_this_interpreter():
    assert f"python={sys.executable}\n" in slurm.array_script(["a=b"], 2) or \
        f"python='{sys.executable}'\n" in slurm.array_script(["a=b"], 2)


def test_apptainer_launcher(tmp_path):
    rec = tmp_path / "rec.jsonl"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _recorder(bindir / "apptainer", rec)
    env = {"SLURM_ARRAY_TASK_ID": "1", "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    s = slurm.array_script(NASTY, 2, None, "apptainer", "/images/render 1.sif", mounts=["/shared", "/scratch/x"])
    r = _run(s, tmp_path, env)
    assert r.returncode == 0, r.stderr
    r = _run(slurm.assemble_script(["a=b"], "apptainer", "docker://reg/render:1"), tmp_path, env)
    assert r.returncode == 0, r.stderr
    shard, assemble = _records(rec)
    assert shard["argv"] == ["exec", "--nv", "--bind", "/shared", "--bind", "/scratch/x", "/images/render 1.sif",
                             "render", "shard.count=2", *NASTY]
    assert shard["task"] == "1"  # apptainer passes the host environment through
    assert assemble["argv"] == ["exec", "--nv", "docker://reg/render:1", "render", "assemble", "a=b"]


def test_docker_launcher(tmp_path):
    rec = tmp_path / "rec.jsonl"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _recorder(bindir / "docker", rec)
    path = f"{bindir}{os.pathsep}{os.environ['PATH']}"
    s = slurm.array_script(NASTY, 2, None, "docker", "render:gpu", mounts=["/shared"])
    assert _run(s, tmp_path, {"SLURM_ARRAY_TASK_ID": "0", "SLURM_JOB_GPUS": "3", "PATH": path}).returncode == 0
    r = _run(slurm.assemble_script(["a=b"], "docker", "render:gpu"), tmp_path, {"PATH": path})
    assert r.returncode == 0, r.stderr
    shard, assemble = _records(rec)
    a = shard["argv"]
    assert a[:2] == ["run", "--rm"]
    assert a[a.index("--user") + 1] == f"{os.getuid()}:{os.getgid()}"
    assert a[a.index("--network") + 1] == "none"
    assert a[a.index("--gpus") + 1] == '"device=3"'
    envs = [a[i + 1] for i, x in enumerate(a) if x == "-e"]
    assert "SLURM_ARRAY_TASK_ID" in envs  # docker passes only what it is told
    vols = [a[i + 1] for i, x in enumerate(a) if x == "-v"]
    assert "/shared:/shared" in vols and f"{tmp_path}:{tmp_path}" in vols
    assert a[a.index("render:gpu") + 1:] == ["shard.count=2", *NASTY]
    # The image's entrypoint is the renderer: no 'render' word; no GPU asked for without one.
    b = assemble["argv"]
    assert "--gpus" not in b and b[b.index("render:gpu") + 1:] == ["assemble", "a=b"]


def test_array_task_outside_shards_is_refused(tmp_path):
    rec = tmp_path / "rec.jsonl"
    py = _recorder(tmp_path / "fakepython", rec)
    s = slurm.array_script(["a=b"], 4, python=str(py))
    r = _run(s, tmp_path, {"SLURM_ARRAY_TASK_ID": "4"})
    assert r.returncode == 2 and "outside shards=4" in r.stderr and "--array=0-3" in r.stderr
    r = _run(s, tmp_path, {})
    assert r.returncode == 2 and "not an array task" in r.stderr
    assert not rec.exists()


def test_unknown_launcher_edited_by_hand(tmp_path):
    s = slurm.assemble_script(["a=b"]).replace("\nlauncher=plain\n", "\nlauncher=podman\n")
    r = _run(s, tmp_path, {})
    assert r.returncode == 2 and "render-assemble.sbatch: launcher 'podman'" in r.stderr


@pytest.mark.parametrize("kwargs, words", [
    (dict(keys=["novalue"]), "not KEY=VALUE"),
    (dict(keys=["=x"]), "not KEY=VALUE"),
    (dict(keys=["a b=c"]), "not KEY=VALUE"),
    (dict(keys=["shard.count=3"]), "set by the job itself"),
    (dict(keys=["shard=1/2"]), "set by the job itself"),
    (dict(shards=0), "shards"),
    (dict(shards=True), "shards"),
    (dict(parallel=0), "parallel"),
    (dict(launcher="podman"), "launcher"),
    (dict(launcher="apptainer"), "needs an image"),
    (dict(log_dir=Path("/my logs")), "log folder"),
    (dict(log_dir=Path("/logs/%j")), "log folder"),
    (dict(extra_sbatch=["--time=1\n#SBATCH --x"]), "extra sbatch option"),
    (dict(extra_sbatch=["time=1"]), "extra sbatch option"),
    (dict(gres="gpu:1 --x"), "gres"),
    (dict(mounts=["rel/path"]), "mount"),
    (dict(job_name="a b"), "job name"),
])
def test_bad_arguments_are_usage_errors(kwargs, words):
    args = dict(keys=["a=b"], shards=2)
    args.update(kwargs)
    with pytest.raises(UsageError) as e:
        slurm.array_script(**args)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_templates_are_the_builders_output():
    """deploy/slurm/*.sbatch are array_script/assemble_script for the example settings."""
    for name, text in slurm.templates().items():
        f = ROOT / "deploy" / "slurm" / name
        assert f.read_text() == text, f"{f} is stale: regenerate it (see render.slurm.EXAMPLE)"
    array = (ROOT / "deploy" / "slurm" / slurm.ARRAY_SCRIPT).read_text()
    assert {"--array=0-7%4", "--gres=gpu:1", "--requeue"} <= set(_sbatch_options(array))
    assert any(o.startswith("--output=") for o in _sbatch_options(array))


# --- submit() with a stand-in sbatch ------------------------------------------------------------

def _fake_sbatch(tmp_path: Path, fail_on: int = 0) -> tuple[Path, Path]:
    """sbatch/scancel stand-ins: sbatch prints ids 100, 101, ... (failing call number FAIL_ON)."""
    rec = tmp_path / "calls.jsonl"
    bindir = tmp_path / "slurmbin"
    bindir.mkdir()
    for name in ("sbatch", "scancel"):
        _exe(bindir / name, f"""#!{sys.executable}
import json, os, sys
rec = {str(rec)!r}
n = sum(1 for _ in open(rec)) if os.path.exists(rec) else 0
with open(rec, "a") as f:
    f.write(json.dumps({{"prog": {name!r}, "argv": sys.argv[1:], "cwd": os.getcwd(),
                        "script": open(sys.argv[-1]).read() if {name!r} == "sbatch" else None}}) + "\\n")
if {name!r} == "sbatch":
    if n + 1 == {fail_on}:
        sys.stderr.write("sbatch: error: Batch job submission failed: Invalid dependency\\n")
        sys.exit(1)
    print(f"{{100 + n}};cluster")
""")
    return bindir / "sbatch", rec


def test_submit_writes_and_submits_both(tmp_path):
    sbatch, rec = _fake_sbatch(tmp_path)
    ids = slurm.submit(["a=b", "c=d e"], 4, 2, log_dir=tmp_path / "logs", script_dir=tmp_path / "jobs",
                       sbatch=str(sbatch))
    assert ids == ("100", "101")
    calls = _records(rec)
    assert [c["argv"][:-1] for c in calls] == [["--parsable"], ["--parsable", "--dependency=afterok:100"]]
    assert calls[0]["argv"][-1] == str(tmp_path / "jobs" / "render-array.sbatch")
    assert calls[1]["argv"][-1] == str(tmp_path / "jobs" / "render-assemble.sbatch")
    assert calls[0]["script"] == slurm.array_script(["a=b", "c=d e"], 4, 2, log_dir=tmp_path / "logs")
    assert calls[1]["script"] == slurm.assemble_script(["a=b", "c=d e"], log_dir=tmp_path / "logs")
    assert (tmp_path / "logs").is_dir()  # Slurm would not create it
    assert sorted(p.name for p in (tmp_path / "jobs").iterdir()) == ["render-array.sbatch", "render-assemble.sbatch"]


def test_submit_cancels_the_array_when_the_assembly_is_refused(tmp_path):
    sbatch, rec = _fake_sbatch(tmp_path, fail_on=2)
    with pytest.raises(slurm.SlurmError) as e:
        slurm.submit(["a=b"], 2, log_dir=tmp_path / "logs", script_dir=tmp_path, sbatch=str(sbatch))
    msg = str(e.value)
    assert "Invalid dependency" in msg and "array job 100 was cancelled" in msg and "\n" not in msg
    assert isinstance(e.value, RenderError)
    assert [(c["prog"], c["argv"]) for c in _records(rec)][-1] == ("scancel", ["100"])


def test_submit_errors(tmp_path):
    with pytest.raises(slurm.SlurmError, match="not found"):
        slurm.submit(["a=b"], 2, log_dir=tmp_path, script_dir=tmp_path, sbatch=str(tmp_path / "nope"))
    sbatch, _ = _fake_sbatch(tmp_path, fail_on=1)
    with pytest.raises(slurm.SlurmError, match="Invalid dependency"):
        slurm.submit(["a=b"], 2, log_dir=tmp_path, script_dir=tmp_path, sbatch=str(sbatch))
    with pytest.raises(UsageError):  # nothing written or submitted for a bad job
        slurm.submit(["shard.count=2"], 2, log_dir=tmp_path, script_dir=tmp_path / "x", sbatch=str(sbatch))
    assert not (tmp_path / "x").exists()


# --- render slurm submit|scripts ---------------------------------------------------------------

def test_main_scripts_writes_what_the_builders_build(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    keys = ["profile=low", "source=/d/face.jpg", "target=/d/my clip.mp4", "output=/d/out.mp4"]
    assert slurm.main(["scripts", "shards=6", "parallel=2", "launcher=apptainer", "image=/i/r.sif",
                       "slurm.gres=gpu:a100:1", "mount=/d", "mount=/e", "sbatch_opt=--time=2:00:00",
                       "logs=L", *keys]) == 0
    a, b = capsys.readouterr().out.split()
    assert Path(a) == tmp_path / "L" / "render-array.sbatch" and Path(b).name == "render-assemble.sbatch"
    assert Path(a).read_text() == slurm.array_script(
        keys, 6, 2, "apptainer", "/i/r.sif", sys.executable, tmp_path / "L", "gpu:a100:1", ["--time=2:00:00"],
        mounts=["/d", "/e"])
    assert Path(b).read_text() == slurm.assemble_script(
        keys, "apptainer", "/i/r.sif", sys.executable, tmp_path / "L", None, ["--time=2:00:00"], mounts=["/d", "/e"])


def test_main_submit_prints_the_job_ids(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sbatch, rec = _fake_sbatch(tmp_path)
    assert slurm.main(["submit", "shards=2", f"sbatch={sbatch}", "gres=", "profile=low"]) == 0
    assert capsys.readouterr().out == "array=100 assemble=101\n"
    array = _records(rec)[0]["script"]
    assert "--gres" not in array and "#SBATCH --array=0-1\n" in array
    assert (tmp_path / "slurm-logs" / "render-array.sbatch").exists()


@pytest.mark.parametrize("args, words", [
    ([], "expected submit or scripts"),
    (["run", "shards=2"], "expected submit or scripts"),
    (["submit", "profile=low"], "shards=N is missing"),
    (["submit", "shards=two"], "not a whole number"),
    (["submit", "shards=2", "no.such.key=1"], "no.such.key"),
    (["submit", "shards=2", "shard.count=2"], "set by the job itself"),
    (["submit", "shards=2", "bare"], "not KEY=VALUE"),
])
def test_main_usage_errors(args, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RenderError) as e:
        slurm.main(args)
    assert words in str(e.value) and e.value.exit_code == 2
    assert not any(tmp_path.iterdir())  # nothing written for a bad command line


def test_cli_reaches_render_slurm(tmp_path):
    from conftest import run_cli

    p = run_cli("slurm", "scripts", "shards=3", f"logs={tmp_path}", "profile=low", cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(tmp_path / "render-array.sbatch"), str(tmp_path / "render-assemble.sbatch")]
