"""The model manifest: every model a profile can name, pinned by SHA-256.

Layering (later entries with the same name replace earlier ones whole; a ``pins:`` section of a
later layer only gives an earlier entry that ships with ``sha256: null`` its SHA-256, size and
note — what ``render models fetch`` takes at a first fetch — so the rest of the entry stays the
shipped one, and a pin that ships later wins):

1. the shipped ``models/manifest.yaml`` at the repository root;
2. ``<models_dir>/manifest.yaml`` if it exists (user models, ``render models convert`` output);
3. each extra path given by the caller (``models.manifest=...``).

Format (``version: 1``)::

    models:
      NAME:
        file: NAME.onnx            # plain file name inside the models folder
        sha256: <64 hex>           # required, also for user models; null only with
                                   # confirmed: false (pinned at the first fetch)
        size: 123                  # bytes, optional
        urls: [primary, mirror]    # optional; empty for local/user/converted models
        licence: "MIT"
        commercial_use: true       # false = shown as NON-COMMERCIAL
        contract: detector-yunet   # how the renderer drives it (see CONTRACTS; docs/models.md)
        template: null             # alignment template, null for detectors
        input_size: 640
        precision: fp32            # fp32 | fp16
        variants: {fp16: NAME_fp16}
        confirmed: true            # false = pin not yet confirmed by hashing the real file
        source: OTHER              # converted models: the entry they were made from
        source_sha256: <64 hex>
        converter: "onnxconverter-common 1.16.0"
        needs: [OTHER]             # models it cannot run without (simswap: its crossface converter)
        params: {scale: 2}         # what the contract leaves to the model (docs/models.md)
        note: free text
"""
from __future__ import annotations

import dataclasses
import difflib
import logging
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

import render
from render.errors import ModelError
from render.files import locked_beside, write_atomic
from render.faces.align import TEMPLATES as ALIGN_TEMPLATES
from render.faces.contracts import DETECTORS, EMBEDDERS
from render.landmarks.registry import LANDMARKS
from render.masks.registry import MASKS
from render.model_handle import ModelEntry
from render.processors import registry as processor_registry

log = logging.getLogger(__name__)

SHIPPED_MANIFEST = Path(render.__file__).resolve().parents[1] / "models" / "manifest.yaml"
LOCAL_MANIFEST_NAME = "manifest.yaml"

PRECISIONS = ("fp32", "fp16", "int8")
#: every contract a model may have: one union of the registries of the parts that drive them
CONTRACTS: tuple[str, ...] = (*DETECTORS, *EMBEDDERS, *sorted(
    {*processor_registry.contracts(), *processor_registry.helper_contracts(),
     *MASKS.contracts(), *LANDMARKS.contracts()}))
TEMPLATES = tuple(ALIGN_TEMPLATES)

_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
_KEYS = {
    "file", "sha256", "size", "urls", "licence", "commercial_use", "contract", "template",
    "input_size", "precision", "variants", "confirmed", "source", "source_sha256", "converter",
    "needs", "note", "fidelity", "calibration", "params",
}
_REQUIRED = ("file", "licence", "contract")


def nearest(name: str, names: Iterable[str], n: int = 3) -> list[str]:
    names = list(names)
    close = difflib.get_close_matches(name, names, n=n, cutoff=0.5)
    if not close:
        close = [m for m in names if name.lower() in m.lower() or m.lower() in name.lower()][:n]
    return close


class Manifest:
    """The layered set of entries, by name."""

    def __init__(self, entries: Mapping[str, ModelEntry], files: Iterable[Path] = ()) -> None:
        self._entries = dict(entries)
        self.files = tuple(files)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self):
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        return list(self._entries)

    def entries(self) -> list[ModelEntry]:
        return list(self._entries.values())

    def get(self, name: str) -> ModelEntry:
        try:
            return self._entries[name]
        except KeyError:
            close = nearest(name, self._entries)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise ModelError(
                f"unknown model {name!r}: {hint}`render models list` shows the models in the "
                f"manifest; add your own in a manifest overlay (see models/local/README.md)"
            ) from None

    def resolve(self, name: str, precision: str) -> ModelEntry:
        """The entry to load for model ``name`` at ``precision``.

        The entry itself when its precision matches; else its pinned ``variants[precision]``;
        else a converted entry whose ``source`` is ``name`` with that precision.
        """
        if precision not in PRECISIONS:
            raise ModelError(f"unknown precision {precision!r} for model {name}: use "
                             f"{', '.join(PRECISIONS)}")
        entry = self.get(name)
        if entry.precision == precision:
            return entry
        variant = entry.variants.get(precision)
        if variant is not None:
            target = self.get(variant)
            if target.precision != precision:
                raise ModelError(
                    f"model {name}'s {precision} variant {variant} is {target.precision} "
                    f"in {target.origin}: fix its precision key"
                )
            return target
        for other in self._entries.values():
            if other.source == name and other.precision == precision:
                return other
        if precision in ("fp16", "int8"):
            raise ModelError(
                f"model {name} has no {precision} file: run `render models convert {name} "
                f"{precision}`" + (" (calibrate=CLIP for your own faces)" if precision == "int8"
                                   else "")
            )
        raise ModelError(
            f"model {name} has no {precision} file: use precision={entry.precision} "
            f"or add a {precision} entry to a manifest overlay"
        )


def _bad(path: Path, name: str, key: str, what: str) -> ModelError:
    return ModelError(f"{path}: models.{name}.{key} {what}: fix it in that manifest file")


def _entry(path: Path, name: str, raw: Any) -> ModelEntry:
    if not _NAME_RE.match(str(name)):
        raise ModelError(f"{path}: model name {name!r} must be letters, digits, _ . + -: rename it")
    if not isinstance(raw, Mapping):
        raise _bad(path, name, "", "must be a mapping of keys (file, sha256, licence, contract, ...)")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        key = str(unknown[0])
        close = nearest(key, sorted(_KEYS), 1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise _bad(path, name, key, f"is not a manifest key{hint}")
    for key in _REQUIRED:
        if raw.get(key) in (None, ""):
            raise _bad(path, name, key, "is required")

    def string(key: str, optional: bool = True) -> str | None:
        value = raw.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value.strip():
            raise _bad(path, name, key, "must be a non-empty string")
        return value.strip()

    file = string("file", False)
    assert file is not None
    if "/" in file or "\\" in file or file in (".", "..") or file.startswith("."):
        raise _bad(path, name, "file", "must be a plain file name inside the models folder")
    if raw.get("sha256") is None and raw.get("confirmed") is False:
        sha = ""        # FaceFusion publishes only a CRC32: pinned when first fetched
    elif raw.get("sha256") in (None, ""):
        raise _bad(path, name, "sha256", "is required (null only with confirmed: false)")
    else:
        sha = str(raw["sha256"]).strip().lower()
    if sha and not _SHA_RE.match(sha):
        raise _bad(path, name, "sha256", "must be 64 hex digits (the file's SHA-256)")
    size = raw.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
        raise _bad(path, name, "size", "must be a positive number of bytes or left out")
    urls_raw = raw.get("urls") or []
    if isinstance(urls_raw, str):
        urls_raw = [urls_raw]
    if not isinstance(urls_raw, list) or not all(
            isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls_raw):
        raise _bad(path, name, "urls", "must be a list of http(s) URLs")
    commercial = raw.get("commercial_use", False)
    if not isinstance(commercial, bool):
        raise _bad(path, name, "commercial_use", "must be true or false")
    contract = string("contract", False)
    known = (*CONTRACTS, *sorted(processor_registry.contracts() - set(CONTRACTS)))
    if contract not in known:
        close = nearest(str(contract), known, 1)
        hint = f" (did you mean {close[0]}?)" if close else f" (one of {', '.join(known)})"
        raise _bad(path, name, "contract", f"{contract!r} is not a known contract{hint}")
    template = string("template")
    if template is not None and template not in TEMPLATES:
        raise _bad(path, name, "template", f"must be null or one of {', '.join(TEMPLATES)}")
    input_size = raw.get("input_size")
    if input_size is not None and (isinstance(input_size, bool) or not isinstance(input_size, int)
                                   or input_size <= 0):
        raise _bad(path, name, "input_size", "must be a positive number of pixels or null")
    precision = raw.get("precision", "fp32")
    if precision not in PRECISIONS:
        raise _bad(path, name, "precision", f"must be one of {', '.join(PRECISIONS)}")
    fidelity = raw.get("fidelity") or {}
    if not isinstance(fidelity, Mapping) or not all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
            for k, v in fidelity.items()):
        raise _bad(path, name, "fidelity", "must map figure names to numbers")
    variants = raw.get("variants") or {}
    if not isinstance(variants, Mapping) or not all(
            k in PRECISIONS and isinstance(v, str) and v for k, v in variants.items()):
        raise _bad(path, name, "variants", "must map precisions to model names")
    confirmed = raw.get("confirmed", True)
    if not isinstance(confirmed, bool):
        raise _bad(path, name, "confirmed", "must be true or false")
    needs = raw.get("needs") or []
    if isinstance(needs, str):
        needs = [needs]
    if not isinstance(needs, list) or not all(isinstance(n, str) and _NAME_RE.match(n)
                                              for n in needs):
        raise _bad(path, name, "needs", "must be a list of model names")
    params = raw.get("params") or {}
    if not isinstance(params, Mapping) or not all(
            isinstance(k, str) and _param(v) for k, v in params.items()):
        raise _bad(path, name, "params", "must map names to numbers, strings or lists of numbers")
    source_sha = raw.get("source_sha256")
    if source_sha is not None:
        source_sha = str(source_sha).strip().lower()
        if not _SHA_RE.match(source_sha):
            raise _bad(path, name, "source_sha256", "must be 64 hex digits")
    return ModelEntry(
        name=str(name), file=file, sha256=sha, size=size, urls=tuple(urls_raw),
        licence=str(raw["licence"]).strip(), commercial_use=commercial, contract=contract,
        template=template, input_size=input_size, precision=precision,
        variants=dict(variants), confirmed=confirmed, source=string("source"),
        source_sha256=source_sha, converter=string("converter"), needs=tuple(needs),
        note=string("note"), origin=path, fidelity=dict(fidelity),
        calibration=string("calibration"), params=dict(params),
    )


def _param(value: Any) -> bool:
    """A contract parameter's value: a number, a string or a list of numbers."""
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return number(value) or isinstance(value, str) or (
        isinstance(value, list) and all(number(v) for v in value))


def read_manifest_file(path: Path) -> dict[str, ModelEntry]:
    """Parse and validate one manifest file; errors name the file and the key."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelError(f"model manifest {path} not found: check the path") from None
    except OSError as exc:
        raise ModelError(f"cannot read model manifest {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ModelError(f"{path}{where}: not valid YAML: fix the manifest file") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ModelError(f"{path}: a manifest must be a mapping with `version: 1` and `models:`")
    unknown = sorted(set(data) - {"version", "models", "pins"})
    if unknown:
        raise ModelError(f"{path}: unknown top-level key {unknown[0]!r}: use `version`, `models` "
                         f"and `pins`")
    version = data.get("version", 1)
    if version != 1:
        raise ModelError(f"{path}: manifest version {version!r} is not supported: use version: 1")
    models = data.get("models") or {}
    if not isinstance(models, Mapping):
        raise ModelError(f"{path}: `models` must map model names to entries")
    return {str(name): _entry(path, str(name), raw) for name, raw in models.items()}


def read_pins(path: Path) -> dict[str, dict[str, Any]]:
    """The ``pins:`` section of a manifest file: name → file, sha256, size and note."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    pins = data.get("pins") or {}
    if not isinstance(pins, Mapping):
        raise ModelError(f"{path}: `pins` must map model names to their file, sha256 and size")
    out = {}
    for name, pin in pins.items():
        if not isinstance(pin, Mapping) or not _SHA_RE.match(str(pin.get("sha256", ""))) or \
                not isinstance(pin.get("file"), str) or not isinstance(pin.get("size"), int):
            raise _bad(path, str(name), "pins", "must give file, sha256 (64 hex) and size")
        out[str(name)] = dict(pin)
    return out


def _pinned(entry: ModelEntry, pin: Mapping[str, Any], path: Path) -> ModelEntry:
    """``entry`` (shipped with no SHA-256) with the pin a first fetch took for its file."""
    if entry.sha256 or pin["file"] != entry.file:
        return entry            # a pin shipped since, or another file: the pin is stale
    return dataclasses.replace(entry, sha256=pin["sha256"], size=pin["size"],
                               note=pin.get("note") or entry.note, origin=path)


def load_manifest(models_dir: Path, extra: Iterable[Path] = ()) -> Manifest:
    """Shipped manifest, then ``<models_dir>/manifest.yaml``, then each extra path."""
    paths = [SHIPPED_MANIFEST]
    local = Path(models_dir) / LOCAL_MANIFEST_NAME
    if local.is_file():
        paths.append(local)
    paths.extend(Path(p).expanduser() for p in extra)
    entries: dict[str, ModelEntry] = {}
    pins: dict[str, tuple[dict[str, Any], Path]] = {}
    seen: list[Path] = []
    for path in paths:
        if path in seen:
            continue
        seen.append(path)
        layer = read_manifest_file(path)
        for name, entry in layer.items():
            if name in entries:
                log.debug("model %s from %s replaces the one from %s", name, path,
                          entries[name].origin)
            entries[name] = entry
        pins.update((name, (pin, path)) for name, pin in read_pins(path).items())
    for name, (pin, path) in pins.items():
        if name in entries:
            entries[name] = _pinned(entries[name], pin, path)
    for entry in entries.values():
        for precision, target in entry.variants.items():
            if target not in entries:
                raise _bad(entry.origin or Path("?"), entry.name, f"variants.{precision}",
                           f"names {target!r}, which no manifest defines")
        for need in entry.needs:
            if need not in entries:
                raise _bad(entry.origin or Path("?"), entry.name, "needs",
                           f"names {need!r}, which no manifest defines")
    return Manifest(entries, seen)


def write_local_entries(models_dir: Path, entries: Iterable[ModelEntry] = (),
                        pins: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
    """Add or replace entries (and first-fetch ``pins``) in ``<models_dir>/manifest.yaml``
    (atomic rewrite, under its lock)."""
    path = Path(models_dir) / LOCAL_MANIFEST_NAME
    with locked_beside(path):
        return _write_local(path, list(entries), dict(pins or {}))


def _write_local(path: Path, entries: list[ModelEntry],
                 pins: dict[str, Mapping[str, Any]]) -> Path:
    data: dict[str, Any] = {"version": 1, "models": {}}
    if path.is_file():
        read_manifest_file(path)  # validate before touching it
        loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        data["models"] = dict(loaded.get("models") or {})
        if loaded.get("pins") or pins:
            data["pins"] = dict(loaded.get("pins") or {})
    elif pins:
        data["pins"] = {}
    for entry in entries:
        data["models"][entry.name] = entry.to_dict()
    for name, pin in pins.items():
        data["pins"][name] = dict(pin)
    header = ("# Local model manifest, layered over the shipped models/manifest.yaml.\n"
              "# Written by `render models convert`/`fetch from=`; you may add your own entries.\n")
    text = header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    try:
        write_atomic(path, text.encode("utf-8"))
    except OSError as exc:
        raise ModelError(f"cannot write the model manifest {path}: {exc.strerror}") from None
    return path
