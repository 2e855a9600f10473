"""The user documentation stays true to the tree: the generated configuration page matches the
schema, every relative link leads somewhere, every docs page is reachable from the README, and the
README stays a short guide."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS, ROOT / "bench" / "README.md", ROOT / "bench" / "RESULTS.md"]
README_MAX_LINES = 330

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The text without code blocks and code spans, where brackets are not links."""
    return _CODE.sub("", _FENCE.sub("", text))


def _links(page: Path) -> list[str]:
    return _LINK.findall(_prose(page.read_text()))


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_anchor(h) for h in _HEADING.findall(_FENCE.sub("", page.read_text()))}


def test_configuration_page_is_generated_from_the_schema():
    page = ROOT / "docs" / "configuration.md"
    made = subprocess.run([sys.executable, str(ROOT / "scripts" / "config_doc.py"), "--stdout"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    assert page.is_file(), "docs/configuration.md is missing: run python scripts/config_doc.py"
    assert page.read_text() == made.stdout, (
        "docs/configuration.md differs from the config schema: run python scripts/config_doc.py "
        "and commit the result")


def test_the_models_pages_tables_are_generated_from_the_registries():
    page = ROOT / "docs" / "models.md"
    made = subprocess.run([sys.executable, str(ROOT / "scripts" / "models_doc.py"), "--stdout"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    assert page.read_text() == made.stdout, (
        "docs/models.md's contract or swapper table differs from the registries: run "
        "python scripts/models_doc.py and commit the result")


def test_configuration_page_lists_every_key_and_strategy():
    from render.config import SCHEMA
    from render.memory import STRATEGIES

    text = (ROOT / "docs" / "configuration.md").read_text()
    missing = [k for k in SCHEMA if f"| `{k}` |" not in text]
    assert not missing, f"keys missing from docs/configuration.md: {missing}"
    for name in STRATEGIES:
        assert f"`{name}`" in text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_files_and_headings(page: Path):
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):   # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no file {dest.relative_to(ROOT) if ROOT in dest.parents else dest})")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target} (no heading '#{anchor}' in {dest.relative_to(ROOT)})")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: {broken}"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in _links(README)}
    unlinked = [p.name for p in DOCS if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_readme_is_a_short_guide():
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move depth to docs/")


def test_readme_keeps_the_ci_test_command():
    # .ci/run runs this command; the README is where people copy it from
    assert 'pip install -e ".[test]" onnxruntime && python -m pytest -q' in README.read_text()


def _readme_section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def test_the_readmes_command_block_is_the_clis_usage():
    """One source: the README's block is ``cli.USAGE``'s command lines, as ``render --help``
    prints them (a hand copy lost ``verify dir=`` and ``trusted_proxies``)."""
    from render.cli import USAGE

    section = _readme_section("Commands and exit codes")
    block = section.split("```\n", 2)[1]
    assert block == USAGE.split("\n\n", 1)[0].rstrip("\n") + "\n", (
        "the README's command block differs from render/cli.py's USAGE: copy USAGE's first "
        "paragraph into it")


def test_every_exit_code_is_in_the_readmes_table_and_the_usage():
    """The codes the error classes exit with, the README's table and USAGE's last sentence name
    the same codes."""
    import render.errors as errors
    from render.cli import USAGE

    codes = {0} | {cls.exit_code for cls in vars(errors).values()
                   if isinstance(cls, type) and issubclass(cls, errors.RenderError)}
    table = {int(c) for c in re.findall(r"^\| `(\d+)` \|", _readme_section(
        "Commands and exit codes"), re.M)}
    said = {int(c) for c in re.findall(r"(\d+) [a-z]", USAGE.split("Exit codes:", 1)[1])}
    assert table == codes == said, (table, codes, said)


#: paths made later, named in the docs as where a file goes: a person's overlay, the browser
#: tests' screenshots
MADE_LATER = {"models/local/manifest.yaml", "tests/artifacts/"}
_TREE_PATH = re.compile(r"^((?:render|tests|scripts|bench|docs|profiles|deploy|models|\.ci)/"
                        r"[\w./\-]*)")
_SECTION_KEY = re.compile(r"^([a-z_]+\.[a-z_0-9]+)=")


@pytest.mark.parametrize("page", [README, *DOCS, ROOT / "bench" / "README.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_code_spans_name_paths_and_keys_that_exist(page: Path):
    """Every tree path in a code span exists, and every ``section.key=`` is a key of the schema
    (the README named tests/standins.py and tests/media_fixtures.py long after they were gone)."""
    from render.config import SCHEMA

    missing = []
    for span in _CODE.findall(page.read_text()):
        for word in span.strip("`").split():
            word = word.strip(",;:()")
            path = _TREE_PATH.match(word)
            if path and not any(c in path.group(1) for c in "*<") and "NAME" not in path.group(1):
                name = path.group(1).rstrip(".")
                if name not in MADE_LATER and not (ROOT / name).exists():
                    missing.append(f"path {name}")
            key = _SECTION_KEY.match(word)
            if key and key.group(1) != "section.key" and key.group(1) not in SCHEMA:
                missing.append(f"key {key.group(1)}")
    assert not missing, f"{page.relative_to(ROOT)}: {missing}"

