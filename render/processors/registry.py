"""The processors a render can run: those that ship, those installed as plug-ins (a package's
entry point in the ``render.processors`` group names its declaration) and those registered at
run time (a test). Light on purpose: it holds declarations only; the classes that drive a model
are imported when a render loads it (:func:`driver`).
"""
from __future__ import annotations

import functools
from importlib.metadata import entry_points

from ..errors import ConfigError
from ..model_handle import load_class
from . import (age_modifier, background, colourize, deep_swap, enhance, expression, face_editor,
               frame_enhance, lip_sync, swap)
from .spec import Processor

#: the processors that ship, in the order their sections are listed
BUILT_IN: tuple[Processor, ...] = (swap.PROCESSOR, enhance.PROCESSOR, colourize.PROCESSOR,
                                   background.PROCESSOR, frame_enhance.PROCESSOR,
                                   deep_swap.PROCESSOR, face_editor.PROCESSOR,
                                   age_modifier.PROCESSOR, lip_sync.PROCESSOR,
                                   expression.PROCESSOR)
#: the entry-point group of plug-in processors: ``name = package.module:DECLARATION``
PLUGINS = "render.processors"

_added: dict[str, Processor] = {}
#: counts registrations: the schema composes its keys again when it changes
_generation = [0]


@functools.lru_cache(maxsize=1)
def plugins() -> tuple[Processor, ...]:
    """The installed plug-ins' declarations, by entry-point name."""
    found = []
    for point in sorted(entry_points(group=PLUGINS), key=lambda p: p.name):
        try:
            processor = point.load()
        except Exception as exc:  # noqa: BLE001 - any failure of a plug-in's import is told so
            raise ConfigError(f"plug-in processor {point.name} ({point.value}) does not load: "
                              f"{type(exc).__name__}: {exc}") from None
        if not isinstance(processor, Processor) or processor.name != point.name:
            raise ConfigError(f"plug-in processor {point.name} ({point.value}) is not a "
                              f"render.processors.spec.Processor named {point.name!r}")
        if any(p.name == point.name for p in BUILT_IN):
            raise ConfigError(f"plug-in processor {point.name} ({point.value}) has the name of "
                              f"a processor that ships with render: rename it")
        found.append(processor)
    return tuple(found)


def register(processor: Processor) -> None:
    """Add ``processor`` (its section joins the schema; its contracts are loadable)."""
    if any(p.name == processor.name for p in (*BUILT_IN, *plugins())):
        raise ValueError(f"processor {processor.name!r} is known already")
    _added[processor.name] = processor
    _generation[0] += 1


def unregister(name: str) -> None:
    if _added.pop(name, None) is not None:
        _generation[0] += 1


def generation() -> int:
    return _generation[0]


def processors() -> tuple[Processor, ...]:
    return (*BUILT_IN, *plugins(), *_added.values())


def shipped(name: str) -> bool:
    """Whether the processor ``name`` ships with render."""
    return any(p.name == name for p in BUILT_IN)


def processor(name: str) -> Processor | None:
    """The processor whose section is ``name``; None when none is."""
    return next((p for p in processors() if p.name == name), None)


def for_contract(contract: str) -> Processor | None:
    """The processor that drives models of ``contract`` (the first listed where several do:
    ``live-portrait`` runs the face editor when a step names the model itself; the expression
    restorer is named by its section); None when none does."""
    return next((p for p in processors() if contract in p.drivers), None)


def contracts() -> frozenset[str]:
    """Every model contract a processor drives."""
    return frozenset(c for p in processors() for c in p.contracts)


def helper_contracts() -> frozenset[str]:
    """The contracts of the models processors' models need (a converter)."""
    return frozenset(c for p in processors() for c in p.helpers)


def driver(processor: Processor, contract: str = "") -> type:
    """The class that runs ``processor`` with a model of ``contract`` ("" without a model)."""
    return load_class(processor.drivers[contract])
