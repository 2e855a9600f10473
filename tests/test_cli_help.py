"""Every subcommand answers --help (and -h) with its own usage, exit 0, before it reads anything."""
from __future__ import annotations

import pytest

from conftest import run_cli

SUBCOMMANDS = ("models", "verify", "review", "submit", "work", "jobs", "assemble", "slurm", "serve",
               "users")


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_a_subcommand_answers_help_with_its_own_usage(name, tmp_path):
    for flag in ("--help", "-h"):
        r = run_cli(name, flag, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        first = r.stdout.splitlines()[0]
        assert first.startswith(f"usage: render {name} "), r.stdout
        assert "usage:" not in r.stdout.split("\n", 1)[1], "only this subcommand's usage"
        assert r.stderr == ""


def test_help_after_arguments_is_still_the_subcommands(tmp_path):
    r = run_cli("jobs", "show", "--help", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("usage: render jobs "), r.stdout + r.stderr
