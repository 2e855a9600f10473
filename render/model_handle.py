"""What the model loader hands the parts that run models (processors, masks, landmarks): a
manifest entry, the handle of a verified model with its session, the report's row of a model,
whether a graph takes any batch and the calls of a model within its batch, and the loader of the
classes a registry names.

The bottom floor of the model layer: it imports nothing of render, so every part imports it
downward.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

import numpy as np


class Session(Protocol):
    """What a part uses of ``render.sessions.LazySession``."""

    providers: list[str]

    @property
    def session(self) -> Any: ...

    def run(self, feeds: Mapping[str, Any]) -> list: ...


@dataclass(frozen=True)
class ModelEntry:
    """One pinned model file. ``origin`` is the manifest file the entry came from."""

    name: str
    file: str
    sha256: str
    size: int | None
    urls: tuple[str, ...]
    licence: str
    commercial_use: bool
    contract: str
    template: str | None
    input_size: int | None
    precision: str = "fp32"
    variants: Mapping[str, str] = field(default_factory=dict)
    confirmed: bool = True
    source: str | None = None
    source_sha256: str | None = None
    converter: str | None = None
    #: the models this one cannot run without (fp32 manifest names), verified and fetched with it
    needs: tuple[str, ...] = ()
    note: str | None = None
    origin: Path | None = None
    #: an int8 model's fidelity gate figures (render.models.quantize) and what it was calibrated on
    fidelity: Mapping[str, float] = field(default_factory=dict)
    calibration: str | None = None
    #: what its contract leaves to each model (a frame enhancer's scale and tiles, a matting
    #: model's normalisation): names and values as the contract's driver reads them
    params: Mapping[str, Any] = field(default_factory=dict)

    def __hash__(self) -> int:  # variants is a dict: hash on the identity that matters
        return hash((self.name, self.file, self.sha256, self.precision))

    def to_dict(self) -> dict[str, Any]:
        """The manifest form of this entry (without name and origin)."""
        out: dict[str, Any] = {
            "file": self.file, "sha256": self.sha256, "size": self.size, "urls": list(self.urls),
            "licence": self.licence, "commercial_use": self.commercial_use,
            "contract": self.contract, "template": self.template, "input_size": self.input_size,
            "precision": self.precision,
        }
        if self.variants:
            out["variants"] = dict(self.variants)
        if not self.confirmed:
            out["confirmed"] = False
        if self.needs:
            out["needs"] = list(self.needs)
        for key in ("source", "source_sha256", "converter", "note", "calibration"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.fidelity:
            out["fidelity"] = dict(self.fidelity)
        if self.params:
            out["params"] = dict(self.params)
        return out


@dataclass(frozen=True)
class ProcessorModel:
    """A verified model file and its session, as the loader hands it to a processor, a mask or
    a landmark model."""

    entry: ModelEntry
    path: Path
    lazy: Session
    cache_dir: Path
    #: the models its manifest entry ``needs`` (a swapper's embedding converter), by name
    needs: Mapping[str, "ProcessorModel"] = field(default_factory=dict)

    def row(self, role: str) -> dict[str, Any]:
        return model_row(role, self.entry, self.path, self.lazy)


def model_row(role: str, entry: ModelEntry, path: Path, lazy: Session) -> dict[str, Any]:
    """A model's row in the report: its file, SHA-256 and the providers its session got."""
    row = {"role": role, "name": entry.name, "file": str(path), "sha256": entry.sha256,
           "precision": entry.precision, "providers": lazy.providers}
    if entry.fidelity:
        row["fidelity"] = dict(entry.fidelity)
    return row


def accepts_batch(shape: list) -> bool:
    """True when a graph input's first dimension is symbolic (a dynamic batch)."""
    return not (isinstance(shape[0], int) and shape[0] > 0)


def run_batched(fn: Callable[..., np.ndarray], crops: np.ndarray, batch: int,
                max_batch: int | None, *extras: np.ndarray | None) -> np.ndarray:
    """``fn`` over ``crops`` in chunks: ``batch`` when the model takes any batch, else its fixed
    one (a last chunk short of it is filled with copies of its last row, their results
    dropped); each of ``extras`` that is not None (one row per crop) is cut into the same chunks
    and passed along, in order."""
    step = max(1, batch) if max_batch is None else max_batch
    given = [e for e in extras if e is not None]
    out = []
    for i in range(0, len(crops), step):
        args = [crops[i:i + step]] + [e[i:i + step] for e in given]
        n = len(args[0])
        if max_batch is not None and n < max_batch:
            args = [fill_batch(a, max_batch) for a in args]
        out.append(fn(*args)[:n])
    return np.concatenate(out)


def fill_batch(rows: np.ndarray, size: int) -> np.ndarray:
    """``rows`` with copies of its last row up to ``size`` rows (a graph of a fixed batch)."""
    if len(rows) >= size:
        return rows
    return np.concatenate([rows, np.repeat(rows[-1:], size - len(rows), axis=0)])


def load_class(where: str) -> type:
    """The class ``"package.module:Class"`` names, imported now (a registry's entry)."""
    module, name = where.split(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class PartRegistry:
    """The models a config key names for a part of the face stage (the masks, the landmarks):
    which contracts each key takes, the class driving each contract (imported on first use)
    and the report's role of each key's model."""

    #: contract → "package.module:Class"
    drivers: Mapping[str, str]
    #: key → the contracts its model may have
    keys: Mapping[str, frozenset[str]]
    #: key → the report's role of its model
    roles: Mapping[str, str]

    def contracts(self) -> frozenset[str]:
        return frozenset(self.drivers)

    def driver(self, contract: str) -> type:
        """The class for ``contract`` (one of :meth:`contracts`)."""
        return load_class(self.drivers[contract])
