"""What a processor declares, and a step of the chain as a render configures it.

A processor is declared beside its code (``render.processors.swap``, ``.enhance``): its name (the
config section and the step's name), its options as a frozen dataclass of
:func:`render.options.option` fields, its kind and the classes that drive it. The schema composes
the declared sections into the one validated Config; ``render --help``, docs/configuration.md
and the job key read them from there, so each default is written once.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

#: "face": aligned face crops in, crops out, pasted back (the face stage's steps); "frame": whole
#: frames in, whole frames out, possibly at a new size
KINDS = ("face", "frame")

#: the options every processor with a model may declare and the chain reads itself: ``model`` (a
#: manifest name), ``precision`` and ``enabled`` (False leaves the step out)
CHAIN_OPTIONS = ("enabled", "model", "precision")


@dataclass(frozen=True)
class Processor:
    """A processor's declaration."""

    name: str
    #: its section: a frozen dataclass of ``option`` fields (``model``, ``precision`` and
    #: ``enabled`` where it has them, then its own)
    options: type
    kind: str = "face"
    #: model contract → "module:Class" driving models of it; a processor without a model (no
    #: ``model`` option) has one class under the contract ""
    drivers: Mapping[str, str] = field(default_factory=dict)
    #: contracts of the models its models may ``need`` (a swapper's embedding converter)
    helpers: tuple[str, ...] = ()
    #: its section → why a step with those options would change nothing ("" when it would): such
    #: a step is left out of the chain, with a warning (a face editor whose controls are all 0)
    idle: Callable[[Any], str] | None = None
    #: its section → the settings (``key=value``) that need each face's 68 landmarks: the loader
    #: then runs the landmark step (a face editor's eye and lip open ratios)
    landmarks: Callable[[Any], list[str]] | None = None
    #: its step's own options → the manifest names of the models they name besides ``model`` (a
    #: lip syncer's voice extractor): verified with the chain's, before any frame is decoded, and
    #: handed to its class with the model's ``needs``
    option_models: Callable[[Mapping[str, Any]], tuple[str, ...]] | None = None

    def __post_init__(self) -> None:
        assert self.kind in KINDS, self.kind
        assert dataclasses.is_dataclass(self.options), self.options

    @property
    def contracts(self) -> frozenset[str]:
        """The model contracts it drives."""
        return frozenset(c for c in self.drivers if c)

    def defaults(self) -> dict[str, Any]:
        """Its own options at their declared defaults (without the chain's)."""
        return own_options(self.options())

    def step(self, model: str = "", precision: str = "fp32", **options: Any) -> "Step":
        """A step of this processor with ``options`` over its declared defaults."""
        defaults = self.defaults()
        unknown = set(options) - set(defaults)
        assert not unknown, f"{self.name} has no option {sorted(unknown)}"
        return Step(self.name, model, precision, {**defaults, **options}, defaults)


def own_options(section: Any) -> dict[str, Any]:
    """A section's values without the chain's options (model, precision, enabled)."""
    return {k: v for k, v in dataclasses.asdict(section).items() if k not in CHAIN_OPTIONS}


@dataclass(frozen=True)
class Step:
    """One step of the chain."""

    name: str                      # a processor's name ("swap") or a model's manifest name
    model: str                     # manifest name; "" for a processor without a model
    precision: str = "fp32"
    #: the step's own options (its section's values, or the declared defaults for a step named
    #: by its model)
    options: Mapping[str, Any] = field(default_factory=dict)
    #: the declared defaults of those options (the report lists the options that differ)
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def changed(self) -> dict[str, Any]:
        """The options whose value is not the declared default."""
        return {k: v for k, v in self.options.items() if self.defaults.get(k) != v}
