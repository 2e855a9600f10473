"""What a face processor is: a model over aligned crops, and how the face stage calls it."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..faces.swap import accepts_batch
from ..models.manifest import ModelEntry
from ..sessions import LazySession
from .steps import Step

#: crops in, crops out: (N, size, size, 3) BGR uint8 both
CropsFn = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class ProcessorModel:
    """A verified model file and its session, as the loader hands it to a processor."""

    entry: ModelEntry
    path: Path
    lazy: LazySession
    cache_dir: Path
    #: the models its manifest entry ``needs`` (a swapper's embedding converter), by name
    needs: Mapping[str, "ProcessorModel"] = field(default_factory=dict)


class FaceProcessor:
    """Base of the face processors. A subclass sets ``template`` and ``size`` (the crop it takes,
    see ``faces.align``), its manifest contracts, and implements :meth:`run` or :meth:`bind`."""

    contracts: tuple[str, ...] = ()
    template: str = ""
    size: int = 0
    #: the processor takes the source image and its face (:meth:`bind_face`), not the embedding
    takes_source_image = False
    #: the share of its result pasted over the frame (its paste mask times this): an enhancer's
    #: blend, so the rest is the frame's own pixels and not the crop resampled twice
    opacity = 1.0

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        self.step = step
        self.model = model

    @property
    def name(self) -> str:
        """The step's name: its stage in the timings and its role in the report."""
        return self.step.name

    @property
    def lazy(self) -> LazySession:
        return self.model.lazy

    @property
    def max_batch(self) -> int | None:
        """None when the model takes any batch size, else its fixed batch."""
        shape = self.lazy.session.get_inputs()[0].shape
        return None if accepts_batch(shape) else int(shape[0])

    def crop_size(self, kps: np.ndarray) -> int:
        """The side of the crop this processor takes for a face with key points ``kps``; the
        same ``size`` for every face unless the processor chooses per face."""
        return self.size

    def bind(self, source: np.ndarray) -> CropsFn:
        """The call for one render, given the source face's raw embedding; processors that do not
        use the source face keep the default."""
        return self.run

    def bind_face(self, image: np.ndarray, face: Any) -> CropsFn:
        """The call for one render, given the source image and its chosen face (processors with
        ``takes_source_image``)."""
        raise NotImplementedError(f"{type(self).__name__} does not take the source image")

    def run(self, crops: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} implements neither run nor bind")

    def record(self) -> dict[str, Any]:
        """The report's row for this step (with the rows of the models it needs)."""
        row = model_row(self.name, self.model.entry, self.model.path, self.lazy)
        if self.model.needs:
            row["needs"] = [model_row(f"{self.name}-{name}", m.entry, m.path, m.lazy)
                            for name, m in self.model.needs.items()]
        return row


def model_row(role: str, entry: ModelEntry, path: Path, lazy: LazySession) -> dict[str, Any]:
    """A model's row in the report: its file, SHA-256 and the providers its session got."""
    return {"role": role, "name": entry.name, "file": str(path), "sha256": entry.sha256,
            "precision": entry.precision, "providers": lazy.providers}
