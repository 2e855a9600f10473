"""Shared fixtures: stand-in models in a models folder, generated media, and the CLI as a user runs it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from render import standins
from render.standins import media

ROOT = Path(__file__).resolve().parent.parent

SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def standin_models(tmp_path_factory) -> Path:
    """A models folder holding the stand-ins and their manifest.yaml overlay, like a user's own models."""
    d = tmp_path_factory.mktemp("models")
    standins.write_standins(d)
    return d


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RENDER_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 300, **env: str
            ) -> subprocess.CompletedProcess:
    """``python -m render ARGS`` exactly as a user runs it (no test-only hooks)."""
    return subprocess.run([sys.executable, "-m", "render", *args], cwd=cwd, env=cli_env(**env),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture
def workdir(tmp_path, standin_models) -> Path:
    """tmp folder with in/ (source.jpg) and out/; models and cache given through the normal keys."""
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    media.make_source_image(tmp_path / "in" / "source.jpg")
    return tmp_path


def model_args(models: Path, cache: Path) -> list[str]:
    return [f"models.dir={models}", f"cache_dir={cache}", "progress=lines"]


@pytest.fixture(scope="session")
def signing(tmp_path_factory) -> list[str]:
    """One C2PA signing identity for renders whose bytes are compared across cache folders (each
    cache folder would otherwise make its own local certificate, and so its own signature)."""
    from render.mark import create_signing_identity

    chain, key = create_signing_identity(tmp_path_factory.mktemp("signing"))
    return [f"mark.cert={chain}", f"mark.key={key}"]
