"""Slurm job scripts for a sharded render, and their submission.

A sharded render is two jobs: an array of N tasks, each running ``render shard.count=N KEYS...``
(the renderer takes its index from ``SLURM_ARRAY_TASK_ID``) and rendering its own segments into
the shared work folder beside the output, then one assembly job, ``render assemble KEYS...``,
that waits for every task (``--dependency=afterok:ARRAY``), joins the segments and commits the
output. :func:`array_script` and :func:`assemble_script` build the two scripts (pure functions;
``deploy/slurm/*.sbatch`` are their output for example settings), :func:`submit` writes both and
submits them with ``sbatch --parsable``.

Each script starts with a settings block (launcher, image, python, mounts, keys) that is the only
part a person edits by hand; the body after it is the same for every job. Launchers:

- ``apptainer``: ``apptainer exec --nv [--bind M]... IMAGE render ...`` (IMAGE: a ``.sif`` file
  or ``docker://...``); the host environment, so ``SLURM_ARRAY_TASK_ID``, passes through.
- ``docker``: ``docker run --rm --init --network none --user UID:GID --gpus device=<the job's
  GPU> -e SLURM_ARRAY_TASK_ID ... -v M:M ... IMAGE ...`` (the image's entrypoint is the renderer).
- ``plain``: ``PYTHON -m render ...`` (``python=""``: ``render`` on PATH).

:func:`main` is ``render slurm submit|scripts shards=N [SETTING=VALUE...] KEY=VALUE...``. A task
that is requeued (node failure, preemption, ``scontrol requeue``) starts again only after Slurm's
credential lifetime (``AuthInfo=cred_expire``, 120 s by default) and redoes only its uncommitted
segments; ``--open-mode=append`` keeps the earlier run's log.
"""
from __future__ import annotations

import logging
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence

from .errors import RenderError, UsageError
from .files import write_atomic

log = logging.getLogger(__name__)

LAUNCHERS = ("apptainer", "docker", "plain")
ARRAY_SCRIPT = "render-array.sbatch"
ASSEMBLE_SCRIPT = "render-assemble.sbatch"

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*=")
_RESERVED = ("shard", "shard.count", "shard.index")
_SBATCH_ARG = re.compile(r"^--?[A-Za-z]")


class SlurmError(RenderError):
    """sbatch is missing or refused a job."""

    exit_code = 1


def _check_keys(keys: Sequence[str]) -> list[str]:
    out = []
    for k in keys:
        if not isinstance(k, str) or not _KEY.match(k):
            raise UsageError(f"cluster job: {k!r} is not KEY=VALUE")
        if k.split("=", 1)[0] in _RESERVED:
            raise UsageError(f"cluster job: {k.split('=', 1)[0]} is set by the job itself; leave it out of the keys")
        if "\0" in k:
            raise UsageError(f"cluster job: {k.split('=', 1)[0]} holds a NUL byte")
        out.append(k)
    return out


def _check_common(launcher: str, image: str, python: str, log_dir: Path, gres: str | None,
                  extra_sbatch: Sequence[str], mounts: Sequence[str | Path], job_name: str) -> None:
    if launcher not in LAUNCHERS:
        raise UsageError(f"cluster job: launcher {launcher!r} is not one of {', '.join(LAUNCHERS)}")
    if launcher != "plain" and not image:
        raise UsageError(f"cluster job: the {launcher} launcher needs an image")
    if launcher == "plain" and python and not python.strip():
        raise UsageError("cluster job: python is blank (give an interpreter, or '' for render on PATH)")
    text = str(log_dir)
    if not text or any(c.isspace() for c in text) or "%" in text or "\\" in text:
        raise UsageError(f"cluster job: log folder {text!r} must be a path without spaces, '%' or '\\'")
    if gres is not None and not re.fullmatch(r"[A-Za-z0-9_:.\-,]+", gres):
        raise UsageError(f"cluster job: gres {gres!r} is not like gpu:1")
    for a in extra_sbatch:
        if not isinstance(a, str) or not _SBATCH_ARG.match(a) or "\n" in a or "\r" in a:
            raise UsageError(f"cluster job: extra sbatch option {a!r} must be one option like --time=1:00:00")
    for m in mounts:
        if not os.path.isabs(str(m)) or ":" in str(m) or "," in str(m):
            raise UsageError(f"cluster job: mount {str(m)!r} must be an absolute path without ':' or ','")
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", job_name):
        raise UsageError(f"cluster job: job name {job_name!r} may hold letters, digits, '.', '_', '-' only")


def _bash_array(name: str, items: Sequence[str]) -> str:
    if not items:
        return f"{name}=()"
    return f"{name}=(\n" + "".join(f"  {shlex.quote(str(i))}\n" for i in items) + ")"


_HEADER = """\
#!/bin/bash
# {title}
#
# Written by render/slurm.py; submit with sbatch.
# {what}
# The two scripts of a render (render-array.sbatch, render-assemble.sbatch) must hold the same
# keys: those name the inputs, the output and every setting, and so the shared work folder
# (beside the output) in which the shards' segments meet. render.slurm.submit writes and submits
# both (the assembly with --dependency=afterok:<array job id>); by hand:
#   a=$(sbatch --parsable render-array.sbatch) && sbatch --dependency=afterok:$a render-assemble.sbatch
#
# Edit only the settings block below (and the #SBATCH lines: partition, --time, --cpus-per-task,
# --mem as your site needs). Paths in the keys must be on a file system every node sees; relative
# ones are relative to the submit directory (sbatch --chdir).
"""

_SETTINGS = """\
# --- settings ------------------------------------------------------------------------------------
# launcher: apptainer (apptainer exec --nv IMAGE render ...), docker (docker run ... IMAGE ...;
#           the image's entrypoint is the renderer) or plain (PYTHON -m render ...; python='':
#           'render' on PATH).
launcher={launcher}
image={image}
python={python}
# Folders bound into the container at the same path (apptainer --bind, docker -v); apptainer binds
# the submit directory and $HOME by itself, docker gets the submit directory added.
{mounts}
{shards}# The renderer's keys, one KEY=VALUE per line, each quoted for the shell.
{keys}
# --- end of settings -----------------------------------------------------------------------------
"""

_BODY = """\
set -euo pipefail
{check}\
gpus="${{SLURM_JOB_GPUS:-${{CUDA_VISIBLE_DEVICES:-}}}}"
case "$launcher" in
  apptainer)
    opts=(--nv)
    for m in ${{mounts[@]+"${{mounts[@]}}"}}; do opts+=(--bind "$m"); done
    run=(apptainer exec "${{opts[@]}}" "$image" render) ;;
  docker)
    # The appliance runs as a non-root user: give it the job's uid so it can write the shared
    # folders; only the variables the renderer reads are passed in.
    opts=(--rm --init --network none --user "$(id -u):$(id -g)" -w "$PWD" -v "$PWD:$PWD"
          -e SLURM_JOB_ID -e SLURM_ARRAY_JOB_ID -e SLURM_ARRAY_TASK_ID -e SLURM_ARRAY_TASK_COUNT
          -e SLURM_RESTART_COUNT)
    [ -z "$gpus" ] || opts+=(--gpus "\\"device=$gpus\\"")
    for m in ${{mounts[@]+"${{mounts[@]}}"}}; do opts+=(-v "$m:$m"); done
    run=(docker run "${{opts[@]}}" "$image") ;;
  plain)
    if [ -n "$python" ]; then run=("$python" -m render); else run=(render); fi ;;
  *)
    echo "{script}: launcher '$launcher' is not apptainer, docker or plain" >&2
    exit 2 ;;
esac
exec "${{run[@]}}" {command} ${{keys[@]+"${{keys[@]}}"}}
"""

_ARRAY_CHECK = """\
# This task's index comes from SLURM_ARRAY_TASK_ID (read by the renderer). An index outside
# 0..shards-1 means the --array line and shards= disagree: refuse rather than render nothing.
if [ -z "${SLURM_ARRAY_TASK_ID:-}" ]; then
  echo "{script}: not an array task (submit with sbatch, which reads the --array line)" >&2
  exit 2
fi
if [ "$SLURM_ARRAY_TASK_ID" -ge "$shards" ]; then
  echo "{script}: array task $SLURM_ARRAY_TASK_ID is outside shards=$shards: make --array=0-$((shards - 1)) match" >&2
  exit 2
fi
"""


def _sbatch_lines(opts: Sequence[str]) -> str:
    return "".join(f"#SBATCH {o}\n" for o in opts)


def _script(*, title: str, what: str, sbatch: Sequence[str], launcher: str, image: str, python: str,
            mounts: Sequence[str | Path], shards: int | None, keys: Sequence[str], command: str,
            check: str, script: str) -> str:
    head = _HEADER.format(title=title, what=what)
    shards_line = (f"# Number of shards: the --array line above must be 0-{shards - 1}.\nshards={shards}\n"
                   if shards is not None else "")
    settings = _SETTINGS.format(
        launcher=shlex.quote(launcher), image=shlex.quote(image), python=shlex.quote(python),
        mounts=_bash_array("mounts", [str(m) for m in mounts]), shards=shards_line,
        keys=_bash_array("keys", keys))
    return (head + _sbatch_lines(sbatch) + "\n" + settings + "\n"
            + _BODY.format(check=check.replace("{script}", script), command=command, script=script))


def array_script(keys: Sequence[str], shards: int, parallel: int | None = None, launcher: str = "plain",
                 image: str = "", python: str = sys.executable, log_dir: Path = Path("logs"),
                 gres: str | None = "gpu:1", extra_sbatch: Sequence[str] = (), *,
                 mounts: Sequence[str | Path] = (), job_name: str = "render") -> str:
    """The array job: tasks 0..shards-1 (at most ``parallel`` at once), each ``render shard.count=N KEYS``.

    Requeueable (``--requeue``; a requeued task re-renders only its uncommitted segments), one log
    per task in ``log_dir`` (``NAME-<array id>_<task>.out``, appended across requeues).
    """
    keys = _check_keys(keys)
    _check_common(launcher, image, python, log_dir, gres, extra_sbatch, mounts, job_name)
    if not isinstance(shards, int) or isinstance(shards, bool) or shards < 1:
        raise UsageError(f"cluster job: shards must be a whole number >= 1, not {shards!r}")
    if parallel is not None and (not isinstance(parallel, int) or isinstance(parallel, bool) or parallel < 1):
        raise UsageError(f"cluster job: parallel must be a whole number >= 1 or unset, not {parallel!r}")
    array = f"0-{shards - 1}" + (f"%{parallel}" if parallel is not None and parallel < shards else "")
    opts = [f"--job-name={job_name}", f"--array={array}"]
    if gres:
        opts.append(f"--gres={gres}")
    opts += ["--requeue", "--open-mode=append", f"--output={log_dir}/{job_name}-%A_%a.out", *extra_sbatch]
    return _script(
        title=f"render: the {shards} shards of one render, one Slurm array task each.",
        what=("Task I runs `render shard.count=N KEYS...` and renders shard I (the renderer reads\n"
              "# SLURM_ARRAY_TASK_ID) into the work folder; a failed or requeued task redoes only the\n"
              "# segments it had not committed. Redo some shards by hand: sbatch --array=3,5 THIS_FILE."),
        sbatch=opts, launcher=launcher, image=image, python=python, mounts=mounts, shards=shards,
        keys=keys, command='shard.count="$shards"', check=_ARRAY_CHECK,
        script=ARRAY_SCRIPT)


def assemble_script(keys: Sequence[str], launcher: str = "plain", image: str = "",
                    python: str = sys.executable, log_dir: Path = Path("logs"), gres: str | None = None,
                    extra_sbatch: Sequence[str] = (), *, mounts: Sequence[str | Path] = (),
                    job_name: str = "render") -> str:
    """The assembly job: ``render assemble KEYS`` (joins the committed segments, commits the output).

    Submit it with ``--dependency=afterok:<array id>`` (:func:`submit` does); it is cancelled if
    a shard fails for good (``--kill-on-invalid-dep=yes``). No GPU by default.
    """
    keys = _check_keys(keys)
    _check_common(launcher, image, python, log_dir, gres, extra_sbatch, mounts, job_name)
    opts = [f"--job-name={job_name}-assemble"]
    if gres:
        opts.append(f"--gres={gres}")
    opts += ["--requeue", "--open-mode=append", "--kill-on-invalid-dep=yes",
             f"--output={log_dir}/{job_name}-assemble-%j.out", *extra_sbatch]
    return _script(
        title="render: assemble a sharded render once every shard is done.",
        what=("Runs `render assemble KEYS...`: joins the segments the array tasks committed, muxes the\n"
              "# audio, verifies the result and renames it over the output. Submit it after the array:\n"
              "# sbatch --dependency=afterok:<array job id> THIS_FILE."),
        sbatch=opts, launcher=launcher, image=image, python=python, mounts=mounts, shards=None,
        keys=keys, command="assemble", check="", script=ASSEMBLE_SCRIPT)


def _write_script(path: Path, text: str) -> None:
    """temp → fsync → rename: sbatch never reads a half-written script."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode("utf-8"), 0o755)


def _sbatch(sbatch: str, args: list[str], env: Mapping[str, str] | None, cwd: Path | None) -> str:
    argv = [sbatch, "--parsable", *args]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, env=None if env is None else dict(env),
                           cwd=cwd, stdin=subprocess.DEVNULL, timeout=120)
    except FileNotFoundError:
        raise SlurmError(f"{sbatch} not found: run this on a Slurm login node, or pass the sbatch path") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{sbatch} did not answer in 120 s: is slurmctld reachable (scontrol ping)?") from None
    if p.returncode != 0:
        why = (p.stderr.strip() or p.stdout.strip() or f"exit status {p.returncode}").splitlines()[-1]
        raise SlurmError(f"sbatch {args[-1]} failed: {why}")
    job = p.stdout.strip().split(";")[0]
    if not job.isdigit():
        raise SlurmError(f"sbatch {args[-1]} printed {p.stdout.strip()!r}, not a job id")
    return job


def submit(keys: Sequence[str], shards: int, parallel: int | None = None, launcher: str = "plain",
           image: str = "", python: str = sys.executable, log_dir: Path = Path("logs"),
           gres: str | None = "gpu:1", extra_sbatch: Sequence[str] = (), *, script_dir: Path,
           sbatch: str = "sbatch", mounts: Sequence[str | Path] = (), job_name: str = "render",
           assemble_gres: str | None = None, assemble_sbatch: Sequence[str] | None = None,
           env: Mapping[str, str] | None = None, cwd: Path | None = None) -> tuple[str, str]:
    """Write both scripts into ``script_dir`` and submit them; returns ``(array job id, assembly job id)``.

    The log folder is created (Slurm does not create it, and a job whose log cannot be opened fails
    without a word). If the assembly cannot be submitted the array is cancelled again, so no shards
    run for an output nobody assembles. ``env``/``cwd``: for sbatch (default: this process's).
    """
    if cwd is not None and not Path(log_dir).is_absolute():  # the jobs run in cwd (their submit dir)
        log_dir = Path(cwd) / log_dir
    a_path, b_path = write_scripts(keys, shards, parallel, launcher, image, python, log_dir, gres,
                                   extra_sbatch, script_dir=script_dir, mounts=mounts, job_name=job_name,
                                   assemble_gres=assemble_gres, assemble_sbatch=assemble_sbatch)
    array_id = _sbatch(sbatch, [str(a_path)], env, cwd)
    log.info("submitted array job %s (%d shards) from %s", array_id, shards, a_path)
    try:
        assemble_id = _sbatch(sbatch, [f"--dependency=afterok:{array_id}", str(b_path)], env, cwd)
    except SlurmError as exc:
        scancel = str(Path(sbatch).with_name("scancel")) if os.sep in sbatch else "scancel"
        try:
            gone = subprocess.run([scancel, array_id], capture_output=True, env=None if env is None else dict(env),
                                  stdin=subprocess.DEVNULL, timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            gone = False
        raise SlurmError(f"{exc}; array job {array_id} "
                         + ("was cancelled again" if gone else f"is still queued: scancel {array_id}")) from None
    log.info("submitted assembly job %s after array job %s", assemble_id, array_id)
    return array_id, assemble_id


# The example settings of deploy/slurm/*.sbatch (regenerate them with
# ``python -c 'from render.slurm import write_templates; write_templates("deploy/slurm")'``;
# tests/test_slurm_scripts.py checks they match).
EXAMPLE = dict(
    keys=["source=/shared/renders/in/face.jpg", "target=/shared/renders/in/clip.mp4",
          "output=/shared/renders/out/clip.mp4", "profile=high"],
    launcher="apptainer", image="/shared/images/render.sif", python="python3",
    log_dir=Path("/shared/renders/logs"), mounts=["/shared/renders"],
    extra_sbatch=["--cpus-per-task=8", "--mem=32G", "--time=04:00:00"],
)


def templates() -> dict[str, str]:
    """``{file name: text}`` of the two example scripts (8 shards, 4 at a time)."""
    e = EXAMPLE
    common = dict(launcher=e["launcher"], image=e["image"], python=e["python"], log_dir=e["log_dir"],
                  mounts=e["mounts"])
    return {
        ARRAY_SCRIPT: array_script(e["keys"], 8, 4, extra_sbatch=e["extra_sbatch"], **common),
        ASSEMBLE_SCRIPT: assemble_script(e["keys"], extra_sbatch=["--cpus-per-task=4", "--time=01:00:00"],
                                         **common),
    }


def write_templates(folder: str | Path) -> None:
    for name, text in templates().items():
        _write_script(Path(folder) / name, text)


# --- `render slurm ...` --------------------------------------------------------------------------

USAGE = """\
usage: render slurm submit shards=N [SETTING=VALUE ...] KEY=VALUE ...
       render slurm scripts shards=N [SETTING=VALUE ...] KEY=VALUE ...   write the scripts only
settings (also as slurm.SETTING=VALUE): parallel=K (tasks at once), launcher=plain|apptainer|docker,
  image=IMAGE, python=PYTHON ('' = render on PATH), gres=gpu:1 ('' = none), assemble_gres=,
  logs=DIR (default slurm-logs), scripts=DIR (default: logs), mount=DIR (repeatable),
  sbatch_opt=--time=4:00:00 (repeatable), job_name=render, sbatch=PATH
every other KEY=VALUE is a render key, passed to each shard and to the assembly as given."""

_SETTINGS_KEYS = {"shards", "parallel", "launcher", "image", "python", "gres", "assemble_gres", "logs",
                  "scripts", "mount", "sbatch_opt", "job_name", "sbatch"}
_REPEATED = {"mount", "sbatch_opt"}


def _parse_cli(args: Sequence[str]) -> tuple[dict, list[str]]:
    from .config import SCHEMA, load_config, parse_overrides

    settings: dict = {"mount": [], "sbatch_opt": []}
    keys: list[str] = []
    for a in args:
        name, sep, value = a.partition("=")
        if not sep:
            raise UsageError(f"render slurm: argument {a!r} is not KEY=VALUE\n{USAGE}")
        bare = name[len("slurm."):] if name.startswith("slurm.") else name
        if bare in _SETTINGS_KEYS and (name.startswith("slurm.") or name not in SCHEMA):
            if bare in _REPEATED:
                settings[bare].append(value)
            else:
                settings[bare] = value
        else:
            keys.append(a)
    if "shards" not in settings:
        raise UsageError("render slurm: shards=N is missing (how many array tasks share the render)")
    for name in ("shards", "parallel"):
        if name in settings and settings[name] != "":
            try:
                settings[name] = int(settings[name])
            except ValueError:
                raise UsageError(f"render slurm: {name}={settings[name]} is not a whole number") from None
    # Check the render keys now, not in N queued jobs later (shard.* are the job's own: refused there).
    _check_keys(keys)
    load_config(parse_overrides(keys))
    return settings, keys


def write_scripts(keys: Sequence[str], shards: int, parallel: int | None = None, launcher: str = "plain",
                  image: str = "", python: str = sys.executable, log_dir: Path = Path("logs"),
                  gres: str | None = "gpu:1", extra_sbatch: Sequence[str] = (), *, script_dir: Path,
                  mounts: Sequence[str | Path] = (), job_name: str = "render",
                  assemble_gres: str | None = None, assemble_sbatch: Sequence[str] | None = None
                  ) -> tuple[Path, Path]:
    """Write the array and assembly scripts into ``script_dir`` (and create ``log_dir``);
    returns their paths. :func:`submit` without the sbatch calls."""
    a_text = array_script(keys, shards, parallel, launcher, image, python, log_dir, gres, extra_sbatch,
                          mounts=mounts, job_name=job_name)
    b_text = assemble_script(keys, launcher, image, python, log_dir, assemble_gres,
                             extra_sbatch if assemble_sbatch is None else assemble_sbatch,
                             mounts=mounts, job_name=job_name)
    a_path = Path(script_dir) / f"{job_name}-array.sbatch"
    b_path = Path(script_dir) / f"{job_name}-assemble.sbatch"
    try:
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        _write_script(a_path, a_text)
        _write_script(b_path, b_text)
    except OSError as exc:
        raise SlurmError(f"cannot write the job scripts or the logs folder: {exc}") from None
    return a_path, b_path


def main(argv: Sequence[str]) -> int:
    """``render slurm submit|scripts ...``: prints ``array=ID assemble=ID`` (or the two script paths)."""
    args = list(argv)
    if not args or args[0] not in ("submit", "scripts"):
        raise UsageError(f"render slurm: expected submit or scripts\n{USAGE}")
    s, keys = _parse_cli(args[1:])
    logs = Path(s.get("logs") or "slurm-logs").absolute()
    common = dict(
        keys=keys, shards=s["shards"], parallel=s.get("parallel") or None,
        launcher=s.get("launcher", "plain"), image=s.get("image", ""),
        python=s.get("python", sys.executable), log_dir=logs,
        gres=s.get("gres", "gpu:1") or None, extra_sbatch=s["sbatch_opt"],
        script_dir=Path(s.get("scripts") or logs).absolute(), mounts=s["mount"],
        job_name=s.get("job_name", "render"), assemble_gres=s.get("assemble_gres") or None)
    if args[0] == "scripts":
        a, b = write_scripts(**common)
        sys.stdout.write(f"{a}\n{b}\n")
        return 0
    array_id, assemble_id = submit(**common, sbatch=s.get("sbatch", "sbatch"))
    sys.stdout.write(f"array={array_id} assemble={assemble_id}\n")
    return 0
