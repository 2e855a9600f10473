"""What the landmark models share: their model, session and report row."""
from __future__ import annotations

from typing import Any

from ..processors.base import ProcessorModel, model_row
from ..sessions import LazySession


class LandmarkModel:
    """Base of the landmark models; a subclass sets ``contracts``."""

    contracts: tuple[str, ...] = ()

    def __init__(self, role: str, model: ProcessorModel) -> None:
        self.role = role
        self.model = model

    @property
    def lazy(self) -> LazySession:
        return self.model.lazy

    def record(self) -> dict[str, Any]:
        return model_row(self.role, self.model.entry, self.model.path, self.lazy)
