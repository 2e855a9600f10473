"""What the landmark models share: their model, session and report row."""
from __future__ import annotations

from typing import Any

from ..model_handle import ProcessorModel, Session


class LandmarkModel:
    """Base of the landmark models."""

    def __init__(self, role: str, model: ProcessorModel) -> None:
        self.role = role
        self.model = model

    @property
    def lazy(self) -> Session:
        return self.model.lazy

    def record(self) -> dict[str, Any]:
        return self.model.row(self.role)
