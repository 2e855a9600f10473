"""Write the generated tables of docs/models.md from the registries and the shipped manifest.

Two blocks between ``<!-- generated: NAME -->`` and ``<!-- end: NAME -->`` markers:

- ``contracts``: every model contract (the union of the registries the manifest checks against),
  the key that names such a model, the class that drives it and the shipped models of it;
- ``swappers``: each swapper contract's normalisation, source input and output range, from the
  swappers' own conventions.

    python scripts/models_doc.py            # rewrite the blocks in docs/models.md
    python scripts/models_doc.py --stdout   # print the page instead (tests/test_docs.py compares)
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The page documents the checkout this script lives in, not whichever render is installed.
sys.path.insert(0, str(ROOT))

from render.faces.contracts import DETECTORS, EMBEDDERS  # noqa: E402
from render.landmarks.registry import LANDMARKS  # noqa: E402
from render.masks.registry import MASKS  # noqa: E402
from render.models.manifest import CONTRACTS, SHIPPED_MANIFEST, read_manifest_file  # noqa: E402
from render.processors import registry as processors  # noqa: E402
from render.processors.swap.embedding_swapper import CONVENTIONS  # noqa: E402
from render.processors.swap.image_swapper import SOURCE_CROPS  # noqa: E402

PAGE = ROOT / "docs" / "models.md"


def _shipped() -> dict[str, list[str]]:
    """Contract → the shipped manifest's models of it (fp16 variants left out)."""
    out: dict[str, list[str]] = {}
    for entry in read_manifest_file(SHIPPED_MANIFEST).values():
        if entry.precision == "fp32":
            out.setdefault(entry.contract, []).append(entry.name)
    return out


def _where(path: str) -> str:
    """``render.x.y:Class`` → ``render/x/y.py`` ``Class``."""
    module, name = path.split(":")
    return f"`{module.replace('.', '/')}.py` `{name}`"


def _also(row: tuple[str, str] | None, key: str, driver: str) -> tuple[str, str]:
    """A contract's row with one more processor naming (and driving) it: LivePortrait's models
    serve the face editor and the expression restorer."""
    if row is None:
        return key, driver
    return f"{row[0]}, {key}", row[1] if driver == row[1] else f"{row[1]}, {driver}"


def contracts_table() -> str:
    rows: dict[str, tuple[str, str]] = {}
    for c in DETECTORS:
        rows[c] = ("`detect.model`", "`render/faces/detect.py` `Detector`")
    for c in EMBEDDERS:
        rows[c] = ("`embed.model`", "`render/faces/embed.py` `Embedder`")
    for p in processors.BUILT_IN:
        for c, path in p.drivers.items():
            rows[c] = _also(rows.get(c), f"`{p.name}.model`", _where(path))
        for c in p.helpers:
            rows[c] = _also(rows.get(c), f"`{p.name}.model`'s `needs`", "its processor")
    for part in (MASKS, LANDMARKS):
        for key, allowed in part.keys.items():
            for c in sorted(allowed):
                rows[c] = (f"`{key}`", _where(part.drivers[c]))
    assert set(rows) == set(CONTRACTS), set(rows) ^ set(CONTRACTS)
    shipped = _shipped()
    lines = ["| contract | named by | driven by | shipped models |", "|---|---|---|---|"]
    for c in CONTRACTS:
        key, driver = rows[c]
        models = ", ".join(shipped.get(c, [])) or "— (an overlay's)"
        lines.append(f"| `{c}` | {key} | {driver} | {models} |")
    return "\n".join(lines)


def _normalisation(mean: tuple[float, ...], std: tuple[float, ...]) -> str:
    if all(m == 0.0 for m in mean) and all(s == 1.0 for s in std):
        return "as is"
    if all(m == 0.5 for m in mean) and all(s == 0.5 for s in std):
        return "(x − 0.5) / 0.5"
    return f"(x − {list(mean)}) / {list(std)}"


def swappers_table() -> str:
    shipped = _shipped()
    lines = ["| contract | shipped models | crop (RGB x/255) | `source` input | output |",
             "|---|---|---|---|---|",
             "| `swapper-inswapper` | " + ", ".join(shipped["swapper-inswapper"])
             + " | as is | raw embedding × emap / ‖raw‖ | 0..1 |"]
    for c, conv in CONVENTIONS.items():
        source = ("raw → crossface converter" if conv.converter else "embedding") + \
            (", L2-normalised" if conv.normalised_source else ", not normalised")
        lines.append(f"| `{c}` | {', '.join(shipped.get(c, [])) or '— (an overlay)'} | "
                     f"{_normalisation(conv.mean, conv.std)} | {source} | "
                     f"{'−1..1' if conv.signed_output else '0..1'} |")
    for c, crop in SOURCE_CROPS.items():
        lines.append(f"| `{c}` | {', '.join(shipped.get(c, [])) or '— (an overlay)'} | "
                     f"{'(x − 0.5) / 0.5' if crop.signed_target else 'as is'} | the source "
                     f"face's crop, {crop.template}, {crop.size} px | "
                     f"{'−1..1' if crop.signed_target else '0..1'} |")
    return "\n".join(lines)


BLOCKS = {"contracts": contracts_table, "swappers": swappers_table}


def page(text: str) -> str:
    """``text`` with every generated block made anew."""
    for name, make in BLOCKS.items():
        pattern = re.compile(rf"(<!-- generated: {name} .*?-->\n)(?:.*?\n)?(<!-- end: {name} -->)",
                             re.S)
        if not pattern.search(text):
            raise SystemExit(f"docs/models.md has no '<!-- generated: {name} ... -->' block")
        text = pattern.sub(lambda m: m.group(1) + make() + "\n" + m.group(2), text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stdout", action="store_true", help="print the page instead")
    args = parser.parse_args()
    made = page(PAGE.read_text())
    if args.stdout:
        sys.stdout.write(made)
    else:
        PAGE.write_text(made)
        print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
