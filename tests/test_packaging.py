"""What an installed render (pip, the image) holds: every package of the source tree."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is Python 3.11+")
def test_every_package_is_installed():
    """A package pyproject.toml leaves out works in the checkout and is gone once installed
    (render.processors was missing from the image: 'No module named render.processors')."""
    import tomllib

    from setuptools import find_packages

    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"]["find"]["include"]
    listed = set(find_packages(where=str(ROOT), include=include))
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "render").rglob("__init__.py")}
    assert found == listed, f"not installed: {sorted(found - listed)}; gone: {sorted(listed - found)}"
