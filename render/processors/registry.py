"""The processors a render can run: those that ship and those registered at run time (a plug-in,
a test). Light on purpose: it holds declarations only; the classes that drive a model are
imported when a render loads it (:func:`driver`).
"""
from __future__ import annotations

from ..model_handle import load_class
from . import enhance, swap
from .spec import Processor

#: the processors that ship, in the order their sections are listed
BUILT_IN: tuple[Processor, ...] = (swap.PROCESSOR, enhance.PROCESSOR)

_added: dict[str, Processor] = {}
#: counts registrations: the schema composes its keys again when it changes
_generation = [0]


def register(processor: Processor) -> None:
    """Add ``processor`` (its section joins the schema; its contracts are loadable)."""
    if any(p.name == processor.name for p in BUILT_IN):
        raise ValueError(f"processor {processor.name!r} ships with render already")
    _added[processor.name] = processor
    _generation[0] += 1


def unregister(name: str) -> None:
    if _added.pop(name, None) is not None:
        _generation[0] += 1


def generation() -> int:
    return _generation[0]


def processors() -> tuple[Processor, ...]:
    return (*BUILT_IN, *_added.values())


def processor(name: str) -> Processor | None:
    """The processor whose section is ``name``; None when none is."""
    return next((p for p in processors() if p.name == name), None)


def for_contract(contract: str) -> Processor | None:
    """The processor that drives models of ``contract``; None when none does."""
    return next((p for p in processors() if contract in p.drivers), None)


def contracts() -> frozenset[str]:
    """Every model contract a processor drives."""
    return frozenset(c for p in processors() for c in p.drivers if c)


def helper_contracts() -> frozenset[str]:
    """The contracts of the models processors' models need (a converter)."""
    return frozenset(c for p in processors() for c in p.helpers)


def driver(processor: Processor, contract: str = "") -> type:
    """The class that runs ``processor`` with a model of ``contract`` ("" without a model)."""
    return load_class(processor.drivers[contract])
