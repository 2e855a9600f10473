"""Command line: ``render key=value ...`` renders; ``render models ...`` manages model files.

Exit codes: :data:`render.errors.EXIT_CODES`, said at the end of :data:`USAGE`. Every non-zero
exit prints one line on stderr; a traceback only with ``--debug``.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any, Sequence

from . import __version__
from .config import help_text, load_config, parse_overrides
from .errors import EXIT_CODES, Interrupted, RenderError, RenderFailed, UsageError
from .interrupts import PROCESS

log = logging.getLogger("render")

USAGE = """\
usage: render [--verbose | --debug] [key=value ...]
       render models list | fetch [profile=P | NAME ...] [dir=DIR] [from=FOLDER]
                          | verify [dir=DIR] [NAME ...] | convert NAME fp16|int8 [calibrate=CLIP]
       render verify REPORT [rerender=N]   check an output against its report
       render review OUTPUT [--out PNG]    a contact sheet of the frames to look at
       render submit JOBFILE | key=value ...  queue a job (prints its id)
       render work [follow=true]      run the queued jobs under the device lock
       render jobs [list | retry ID | cancel ID | remove ID | show ID | clean older=7d]
       render shard=I/N key=value ...   render shard I of N into the shared work folder
       render assemble key=value ...    join the shards' segments and commit the output
       render slurm submit key=value ... shards=N   a sharded render as a Slurm array + assembly
       render serve [host=H] [port=P] [min_free_mb=M] [trusted_proxies=ADDR,NET/BITS]
                    the classroom web page (render work renders)
       render users add NAME [role=teacher] | list | disable NAME | enable NAME | reset NAME
                    | token NAME     the classroom's accounts (one-time passwords, script tokens)
       render --help [profile=P]     every key with its value in profile P (default: moderate)
       render --version              the version

Renders a face-swapped video (or image): render profile=low source=face.jpg target=clip.mp4 output=out.mp4
Without target=, renders every video and image in input_dir with input_dir/source.(jpg|png) into
""" + textwrap.fill("output_dir. Exit codes: " + ", ".join(
    f"{code} {meaning}" for code, meaning in EXIT_CODES.items()) + ".", 94) + "\n"


HELP_FLAGS = ("-h", "--help")


def subcommand_usage(name: str) -> str | None:
    """The lines of :data:`USAGE` that describe ``render NAME`` (continuation lines included)."""
    lines: list[str] = []
    for line in USAGE.split("\n\n", 1)[0].splitlines():
        words = line.removeprefix("usage:").split()
        if words[:1] == ["render"]:
            if lines:
                break
            if words[1:2] == [name]:
                lines.append("usage: " + line[line.index("render "):])
        elif lines:
            lines.append(line)
    return "\n".join(lines) + "\n" if lines else None


def _setup_logging(debug: bool, verbose: bool) -> None:
    """Debug lines with --debug; informational lines (providers skipped, models verified,
    resuming) with --verbose or on a terminal; otherwise warnings and errors only, so that a
    failing run off a terminal prints exactly one line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("render: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    tty = getattr(sys.stderr, "isatty", lambda: False)()
    root.setLevel(logging.DEBUG if debug else logging.INFO if verbose or tty else logging.WARNING)
    # c2pa: a dozen "Library not found at: <path>" lines while it looks for its own library
    for noisy in ("urllib3", "PIL", "c2pa"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _models_command(args: list[str]) -> int:
    from .models.commands import main as models_main
    from .models.needs import profile_models

    # dir= and manifest= may be given to the models commands the same way as to a render.
    render_keys = {"models.dir", "models.manifest", "cache_dir"}
    overrides = {}
    rest = []
    for a in args:
        key, sep, value = a.partition("=")
        if sep and key in render_keys:
            overrides[key] = value
        else:
            rest.append(a)
    cfg = load_config(parse_overrides([f"{k}={v}" for k, v in overrides.items()]))
    return models_main(rest, models_dir=cfg.models_dir, cache_dir=cfg.cache_path,
                       manifest_paths=[Path(p) for p in cfg.models.manifest],
                       profiles=profile_models())


def run(argv: Sequence[str]) -> int:
    """One command; a stop (SIGTERM, Ctrl-C) is the process's token (interrupts.py)."""
    args = list(argv)
    if args and any(a in HELP_FLAGS for a in args[1:]) and subcommand_usage(args[0]) is not None:
        sys.stdout.write(subcommand_usage(args[0]))
        return 0
    if args and args[0] == "models":
        return _models_command(args[1:])
    if args and args[0] in ("submit", "work", "jobs"):
        from . import work

        if args[0] == "work":
            return work.work_main(args[1:], stop=PROCESS)
        return {"submit": work.submit_main, "jobs": work.jobs_main}[args[0]](args[1:])
    if args and args[0] == "verify":
        from .verify import main as verify_main

        return verify_main(args[1:])
    if args and args[0] == "review":
        from .review_sheet.command import main as review_main

        return review_main(args[1:])
    if "-h" in args or "--help" in args or "help" in args[:1]:
        rest = [a for a in args if a not in ("-h", "--help", "help")]
        cfg = load_config(parse_overrides(rest))
        sys.stdout.write(USAGE + f"\nkeys (values from profile {cfg.profile}):\n"
                         + help_text(cfg) + "\n")
        return 0
    if "--version" in args:
        sys.stdout.write(f"render {__version__}\n")
        return 0
    flags = [a for a in args if a.startswith("-")]
    if flags:
        raise UsageError(f"unknown option {flags[0]}; keys are given as key=value, see render --help")
    if args and args[0] in ("serve", "users"):
        from . import web

        return (web.serve_main if args[0] == "serve" else web.users_main)(args[1:])
    if args and args[0] == "assemble":
        from .shards import assemble

        assemble(load_config(parse_overrides(_shard_shorthand(args[1:]))))
        return 0
    if args and args[0] == "slurm":
        from .slurm import main as slurm_main

        return slurm_main(args[1:])
    from .batch import render_all
    from .shards import render_shard

    cfg = load_config(parse_overrides(_shard_shorthand(args)))
    if cfg.shard.count:
        render_shard(cfg, stop=PROCESS)
        return 0
    render_all(cfg, stop=PROCESS)
    return 0


def _shard_shorthand(args: Sequence[str]) -> list[str]:
    """``shard=I/N`` → ``shard.index=I shard.count=N``."""
    out = []
    for a in args:
        key, sep, value = a.partition("=")
        if sep and key == "shard":
            i, slash, n = value.partition("/")
            if not slash or not i.strip().isdigit() or not n.strip().isdigit():
                raise UsageError(f"shard={value}: expected I/N, e.g. shard=0/4")
            out += [f"shard.index={int(i)}", f"shard.count={int(n)}"]
        else:
            out.append(a)
    return out


def main(argv: Sequence[str] | None = None, *, afterwards: Any = None) -> int:
    """Run the command ``argv``; ``afterwards``: the SIGTERM and SIGINT handler once it is
    done (None: the ones before)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    verbose = "--verbose" in args or "-v" in args
    args = [a for a in args if a not in ("--debug", "--verbose", "-v")]
    _setup_logging(debug, verbose)
    # CUDA numbers the GPUs as nvidia-smi does (PCI order), so the GPU a render locks
    # (render.lock.detect_devices) is the one its sessions' device_id names
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    PROCESS.reset()
    try:
        with PROCESS.handling_signals(afterwards):
            return run(args)
    except RenderError as exc:
        if debug:
            log.exception("failed")
        sys.stderr.write(f"render: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("render: error: interrupted\n")
        return Interrupted.exit_code
    except Exception as exc:  # noqa: BLE001 - last resort: still one line and a code
        if debug:
            raise
        sys.stderr.write(f"render: error: internal error: {type(exc).__name__}: "
                         f"{' '.join(str(exc).split())} (run with --debug for a traceback)\n")
        return RenderFailed.exit_code


def entry() -> None:
    """The ``render`` command as a process: :func:`main`, then the process winds down with its
    work done. SIGTERM and SIGINT are ignored from the moment :func:`main`'s handling ends: with
    the default handlers a signal then killed the finished process without a word."""
    sys.exit(main(afterwards=signal.SIG_IGN))


if __name__ == "__main__":
    entry()
