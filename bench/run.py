#!/usr/bin/env python3
"""The benchmark's command (``make bench``): ``python -m bench.run [options]``; ``--help`` lists them.

``python bench/run.py [options]`` is the same command: run as a file, it runs itself again as the
module ``bench.run`` with this checkout's root first on PYTHONPATH. What it measures: ``bench/cli.py``
and ``bench/README.md``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path


def _again_as_module() -> None:
    root = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=root + (os.pathsep + path if path else ""))
    os.execve(sys.executable, [sys.executable, "-m", "bench.run", *sys.argv[1:]], env)


if __name__ == "__main__":
    if not __package__:
        _again_as_module()
    from bench.cli import main

    sys.exit(main())
