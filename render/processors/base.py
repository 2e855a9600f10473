"""What the chain runs: a processor's instance for one render, of either kind.

- :class:`FaceProcessor` — aligned face crops in, crops out; the face stage aligns, runs, masks
  and pastes back. A subclass declares what the stage may not guess: the crop (``template``,
  ``size``), what it takes of the target (``needs_target_identity``), which masks apply
  (``mask_padding``, ``mask_result``, ``own_mask``), its colour match (``colour_crop``), its
  ``opacity`` and what it takes of the faces (``needs_landmarks``, ``landmarks_in_crop``) and
  of the frames (``needs_frame_numbers``: a lip syncer's audio slice, bound to the render's
  :class:`Timeline`; ``needs_original``: the faces' crops of the frames as decoded, an
  expression restorer's driving face).
  What it takes of the source it asks for itself, in :meth:`FaceProcessor.bind`.
- :class:`FrameProcessor` — whole frames in, whole frames out, possibly at a new size
  (:meth:`FrameProcessor.output_size`). Frames are BGR, or BGRA once a step has made a matte
  that the output carries as its alpha channel (``matte``; the plan decides, :meth:`bind` is
  told); every frame step takes both and keeps the alpha.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..model_handle import ProcessorModel, Session, accepts_batch
from .spec import Step

if TYPE_CHECKING:
    from ..media.audio_args import Soundtrack
    from ..memory import StrategySettings

#: crops in, crops out: (N, size, size, 3) BGR uint8 both (a step that takes the target faces'
#: identities, their landmarks, the frames' numbers or the faces' crops of the frames as decoded
#: gets them as further arguments, in that order)
CropsFn = Callable[..., np.ndarray]
#: frames in, frames out, in order: BGR or BGRA uint8
FramesFn = Callable[[list[np.ndarray]], list[np.ndarray]]


@dataclass(frozen=True)
class Source:
    """The render's source face, as a step takes it: its raw ArcFace ``embedding``, and the
    image with its chosen face (``image_face()``, read when a step asks)."""

    embedding: np.ndarray
    image_face: Callable[[], tuple[np.ndarray, Any]]


@dataclass(frozen=True)
class Timeline:
    """Where a render's frames sit in its target, as a step whose work depends on each frame's
    time takes it (a lip syncer's audio): the target, its SHA-256 and frame rate, the target's
    number of the output's first frame and how many frames the output has, and the seconds of
    the target's audio at that first frame as the output carries it (None: the target has no
    audio)."""

    target: str
    sha256: str
    fps: Fraction
    first: int
    frames: int
    audio_start: float | None
    image: bool = False


class ChainProcessor:
    """What both kinds share: the step it runs, its model (None for a processor without one)
    and its report row."""

    #: the render's memory strategy, set by the loader (None outside a render): what a processor
    #: may size its calls by; never what changes the output's bytes (it is not in the job key)
    memory: StrategySettings | None = None

    def __init__(self, step: Step, model: ProcessorModel | None) -> None:
        self.step = step
        self.model = model

    @property
    def name(self) -> str:
        """The step's name: its stage in the timings and its role in the report."""
        return self.step.name

    @property
    def lazy(self) -> Session:
        assert self.model is not None, f"{self.name} has no model"
        return self.model.lazy

    def files(self) -> dict[str, str]:
        """The SHA-256 of the bytes it read from the files its options name
        (``background.image``), by key: they enter the job key."""
        return {}

    def soundtrack(self) -> Soundtrack | None:
        """The audio the output carries instead of (or mixed with) the target's: a lip
        syncer's voice file; None: the target's."""
        return None

    def record(self) -> dict[str, Any]:
        """The report's row: the model's (with the rows of the models it needs), then the
        options whose value is not the declared default."""
        if self.model is None:
            row: dict[str, Any] = {"role": self.name}
        else:
            row = self.model.row(self.name)
            if self.model.needs:
                row["needs"] = [m.row(f"{self.name}-{name}") for name, m in self.model.needs.items()]
        row.update(self.step.changed())
        return row


class FaceProcessor(ChainProcessor):
    """Base of the face processors: a subclass sets ``template`` and ``size`` (the crop it takes,
    see ``faces.align``) and implements :meth:`run` or :meth:`bind`."""

    template: str = ""
    size: int = 0
    #: the stage gives :meth:`bind`'s call the target faces' raw embeddings
    needs_target_identity = False
    #: its box mask takes ``mask.padding`` and the per-side paddings (a swapper's, as FaceFusion's)
    mask_padding = False
    #: the region and area masks are computed on its result (a swapper's: what it changed)
    mask_result = False
    #: (template, side) of the crop on which colour match measures the target face's colour and
    #: moves the result's to it; None: no colour match
    colour_crop: tuple[str, int] | None = None
    #: the share of its result pasted over the frame (its paste mask times this): an enhancer's
    #: blend, so the rest is the frame's own pixels and not the crop resampled twice
    opacity = 1.0
    #: its call returns (N, size, size, 4) float32: the result's BGR (whole numbers 0..255) and,
    #: as the fourth channel, a paste mask of its own in 0..1 (a DFM model's), min-combined with
    #: the step's masks
    own_mask = False
    #: its call takes the faces' 68 landmarks in frame pixels, (N, 68, 2) float32, as a second
    #: argument (a face editor's eye and lip open ratios; the loader runs the landmark step)
    needs_landmarks = False
    #: with ``needs_landmarks``: the points in its crop's pixels (a lip syncer's mouth box)
    landmarks_in_crop = False
    #: its call takes each crop's frame number in the target, (N,) int64, after the identities
    #: and landmarks (a lip syncer's audio slice); the stage binds it with :meth:`bind_timeline`
    needs_frame_numbers = False
    #: its call takes, last, each face's crop of its frame as decoded (before any step of the
    #: chain changed it), (N, size, size, 3) BGR uint8, aligned at the face's points on that
    #: frame (an expression restorer's driving expression)
    needs_original = False

    @property
    def max_batch(self) -> int | None:
        """None when the model takes any batch size, else its fixed batch."""
        if self.model is None:
            return None
        shape = self.lazy.session.get_inputs()[0].shape
        return None if accepts_batch(shape) else int(shape[0])

    def crop_size(self, kps: np.ndarray) -> int:
        """The side of the crop this processor takes for a face with key points ``kps``; the
        same ``size`` for every face unless the processor chooses per face."""
        return self.size

    def bind(self, source: Source) -> CropsFn:
        """The call for one render, given its source face; processors that do not use the
        source keep the default."""
        return self.run

    def check_timeline(self, timeline: Timeline) -> None:
        """A step with ``needs_frame_numbers``: refuse (a usage error) a render it cannot run
        on, when it is planned, before anything is written."""

    def bind_timeline(self, source: Source, timeline: Timeline) -> CropsFn:
        """The call for one render of a step with ``needs_frame_numbers``, given its source face
        and where the render's frames sit in the target."""
        raise NotImplementedError(f"{type(self).__name__} needs frame numbers but implements "
                                  f"no bind_timeline")

    def run(self, crops: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} implements neither run nor bind")


class FrameProcessor(ChainProcessor):
    """Base of the frame processors: a subclass implements :meth:`run` (or :meth:`bind`) and,
    when it changes the frame's size, :meth:`output_size`."""

    #: "" for a step that makes no matte; a step that does says where it wants it to go: "auto"
    #: (the output's alpha channel where its format carries one, else laid over a fill),
    #: "alpha" (the alpha channel or a usage error), "fill" (always the fill)
    matte = ""
    #: it gives the frame other colours (a colouriser): a face step's colour match after it
    #: would match the faces to the colours it replaced
    recolours = False

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        """The size of its frames out for frames of ``width`` × ``height`` in."""
        return width, height

    def describe_matte(self, alpha: bool) -> str:
        """What becomes of its matte in an output that does (``alpha``) or does not carry it:
        the line the render logs."""
        return ""

    def bind(self, alpha: bool) -> FramesFn:
        """The call for one render: ``alpha`` — the output carries the matte as its alpha
        channel (only for a step with a ``matte``)."""
        return self.run

    def run(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        """BGR or BGRA uint8 frames in, frames of :meth:`output_size` out (the alpha kept), in
        order."""
        raise NotImplementedError(f"{type(self).__name__} implements neither run nor bind")
