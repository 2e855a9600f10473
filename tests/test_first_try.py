"""What a person meets first (issue 43): bad path keys, a folder batch with a target it refuses,
advice that works, every script's --help, and the smaller items — each a clear line and a
non-zero exit, nothing half-written."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from render.standins import media as mf
from conftest import ROOT, cli_env, model_args, run_cli

SCRIPTS = sorted([*(p for p in (ROOT / "scripts").iterdir() if p.suffix in (".py", ".sh")),
                  *(p for p in (ROOT / "bench").iterdir() if p.suffix == ".sh" or
                    (p.suffix == ".py" and '__name__ == "__main__"' in p.read_text()))])


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_script_answers_help_with_its_usage_and_writes_nothing(script, tmp_path):
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    command = ["bash", str(script)] if script.suffix == ".sh" else [sys.executable, str(script)]
    r = subprocess.run([*command, "--help"], cwd=cwd, env=cli_env(HOME=str(home)),
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    name = script.stem if script.suffix == ".py" else script.name
    assert name in r.stdout and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert listing(cwd) == [] and listing(home) == []


# ------------------------------------------------------------------------- path-valued keys
@pytest.fixture
def clip(workdir):
    return mf.make_clip(workdir / "in" / "clip.mp4", width=320, height=240, seconds=0.4)


def _one_error_line(r: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("render: error: "), \
        r.stderr
    return lines[0]


@pytest.mark.parametrize("case", ["folder", "missing folder", "device", "read-only file"])
def test_a_bad_debug_faces_path_is_refused_before_any_model_loads(case, workdir, clip):
    """No models at all in models.dir: a check after the models would say exit 4."""
    if case == "read-only file" and os.geteuid() == 0:
        pytest.skip("root writes a read-only file: run as another user to check this case")
    path = {"folder": workdir / "out", "missing folder": workdir / "nowhere" / "faces.jsonl",
            "device": Path("/dev/full"), "read-only file": workdir / "faces.jsonl"}[case]
    if case == "read-only file":
        path.write_text("")
        path.chmod(0o444)
    empty = workdir / "no-models"
    empty.mkdir()
    r = run_cli(f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                f"output={workdir / 'out' / 'clip.mp4'}",
                *model_args(empty, workdir / "cache"), f"debug.faces={path}")
    line = _one_error_line(r)
    assert f"debug.faces={path}" in line
    assert {"folder": "is a folder", "missing folder": "does not exist",
            "device": "is a character device", "read-only file": "not writable"}[case] in line
    assert listing(workdir / "out") == [] and not (workdir / "cache").exists()


@pytest.mark.parametrize("key", ["cache_dir", "lock_dir"])
def test_a_folder_key_naming_a_file_is_refused(key, workdir, clip):
    blocker = workdir / "a-file"
    blocker.write_text("x")
    r = run_cli(f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                f"output={workdir / 'out' / 'clip.mp4'}", f"models.dir={workdir}",
                f"{key}={blocker / 'inside'}")
    assert f"{key}={blocker / 'inside'}: {blocker} is not a folder" in _one_error_line(r)
    assert listing(workdir / "out") == []


# --------------------------------------------------------------------------- a folder batch
def test_a_folder_batch_goes_past_a_target_it_refuses(workdir, standin_models):
    """A target whose output name would be too long is one failure of the batch, said once; the
    other targets render and the summary ends it."""
    mf.make_clip(workdir / "in" / "good.mp4", width=320, height=240, seconds=0.4)
    long = workdir / "in" / ("x" * 240 + ".mp4")
    mf.make_clip(long, width=320, height=240, seconds=0.4)
    r = run_cli(f"input_dir={workdir / 'in'}", f"output_dir={workdir / 'out'}", "profile=low",
                "lock.device=none", *model_args(standin_models, workdir / "cache"))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stderr
    assert lines[-1] == f"render: error: 1 rendered, 1 failed: {long.name}", lines
    assert len([ln for ln in lines if "is too long" in ln]) == 1, lines
    assert sorted(p.name for p in (workdir / "out").iterdir()) == ["good.mp4",
                                                                  "good.mp4.report.json"]


# ------------------------------------------------------------------------ advice that works
def test_convert_without_the_converter_names_what_to_install(tmp_path, standin_models):
    """onnxconverter-common hidden from the process: one line naming the package and the
    extra, exit 2, nothing written in the models folder."""
    before = listing(standin_models)
    hide = ("import sys; sys.modules['onnxconverter_common'] = None; "
            "from render.cli import main; sys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", hide, "models", "convert", "gfpgan_1.4", "fp16",
                        f"dir={standin_models}"], env=cli_env(RENDER_CACHE_DIR=str(tmp_path)),
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, r.stderr
    assert "pip install onnxconverter-common" in r.stderr and "'.[convert]'" in r.stderr
    assert "Traceback" not in r.stderr and listing(standin_models) == before


def test_a_model_of_the_wrong_kind_is_told_so_before_its_precision(workdir, clip, standin_models):
    r = run_cli(f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                f"output={workdir / 'out' / 'clip.mp4'}", "profile=low", "swap.model=gfpgan_1.4",
                *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 4, r.stderr
    assert "swap.model=gfpgan_1.4: its contract is enhancer-gfpgan" in r.stderr
    assert "models convert" not in r.stderr


# ------------------------------------------------------------------------ the smaller items
@pytest.mark.parametrize("value", ["-1", "two"])
def test_verify_refuses_a_negative_or_odd_rerender(value, tmp_path):
    report = tmp_path / "x.mp4.report.json"
    report.write_text("{}")
    r = run_cli("verify", str(report), f"rerender={value}")
    assert "rerender=N needs a whole number of segments, 0 or more" in _one_error_line(r)


def test_a_trim_past_the_end_names_its_own_frame(workdir, standin_models):
    clip = mf.make_clip(workdir / "in" / "short.mp4", width=320, height=240, seconds=3.08)
    r = run_cli(f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                f"output={workdir / 'out' / 'short.mp4'}", "trim=5-8", "lock.device=none",
                *model_args(standin_models, workdir / "cache"))
    line = _one_error_line(r)
    assert "trim starts at 5s (frame 125), past the end of" in line and "(77 frames" in line


def _render(workdir: Path, models: Path, target: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "render", f"source={workdir / 'in' / 'source.jpg'}",
                             f"target={target}", f"output={out}", "lock.device=none",
                             *model_args(models, workdir / "cache"), *extra],
                            env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.03, 0.1])
def test_a_sigterm_after_the_report_never_kills_the_finished_render_silently(
        delay, workdir, clip, standin_models):
    """Python's shutdown put the default handler back: a SIGTERM then ended a finished render
    with 143 and no line. Now it ends 0 (or, inside the commit, 130 with its line), the output
    and report complete."""
    out = workdir / "out" / "clip.mp4"
    proc = _render(workdir, standin_models, clip.path, out)
    report = Path(f"{out}.report.json")
    deadline = time.monotonic() + 120
    while not report.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(delay)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 130), (proc.returncode, err)
    if proc.returncode == 130:
        assert err.strip().splitlines()[-1] == "render: error: terminated", err
    assert run_cli("verify", str(report)).returncode == 0


def test_a_decoder_killed_from_outside_is_a_failed_render_not_bad_input(workdir, standin_models):
    target = mf.make_clip(workdir / "in" / "long.mp4", width=640, height=360, seconds=8.0).path
    proc = _render(workdir, standin_models, target, workdir / "out" / "long.mp4",
                   "segment.seconds=1", "execution.threads=1")
    deadline = time.monotonic() + 60
    decoder = ""
    while not decoder and proc.poll() is None and time.monotonic() < deadline:
        found = subprocess.run(["pgrep", "-f", f"ffmpeg .*-i {target}"], capture_output=True,
                               text=True).stdout.split()
        decoder = found[0] if found else ""
        time.sleep(0.05)
    assert decoder, "no decoder was seen"
    os.kill(int(decoder), signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 5, err
    line = err.strip().splitlines()[-1]
    assert line == (f"render: error: the decoder of {target} was stopped from outside "
                    f"(killed by signal 9): render again"), err
