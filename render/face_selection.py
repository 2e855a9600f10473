"""Which faces a render swaps, and what it puts on each: the render's identities (the source's —
one image or the mean of several — or, with select.mode=map, one per person of the face map)
and the selection that picks the faces, per frame or per face track."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .config import Config
from .face_window import face_filter
from .faces.assign import MapTracks
from .faces.select import ReferenceTracks, select_faces
from .faces.tracks import TrackLinker, TrackSelection
from .faces.types import Face
from .models.load import LoadedModels
from .processors.base import Source
from .source_face import SourceFaces
from .sources import read_face_map


@dataclass
class Tracking:
    """What tracks add to the face stage (stabilize.enabled, or select.mode=map): the track
    linker, the selection of tracks, the frames a miss may last and still be filled, the maker
    of each track's filter, and the frames either side of the centred line."""

    linker: TrackLinker
    select: TrackSelection
    fill: int
    make_filter: Callable[[Face], Callable[[Face], Face]] | None
    window: int = 0


@dataclass
class Selection:
    #: what the chain puts on a selected face, by the face's ``source`` (0 but in mode map)
    identities: list[Source]
    #: the faces of one frame to swap (without tracks)
    select: Callable[[np.ndarray, list[Face]], list[Face]] | None
    tracks: Tracking | None


def build_selection(cfg: Config, models: LoadedModels, faces: SourceFaces,
                    sources: Sequence[Path]) -> Selection:
    """The identities and the selection ``select.*`` and ``stabilize.*`` ask for; a bad face
    map, a reference without a face, ... raise here, before any frame is read."""
    sel, stab = cfg.select, cfg.stabilize
    reference_tracks = people = None
    select = None
    if sel.mode == "map":
        persons = faces.people(read_face_map(sel.map))
        identities = [Source(faces.identity(p.sources),
                             lambda p=p: faces.best_face(p.sources)) for p in persons]
        people = MapTracks(models.embedder.embed, [p.embedding for p in persons],
                           distance=sel.distance, every=sel.embed_every, margin=sel.margin)
    else:
        identities = [Source(faces.identity(sources), lambda: faces.best_face(sources))]
        ref_path = faces.reference_path(sources[0])
        if ref_path is not None:
            # one source and no select.reference: the source image's largest face, as always
            reference = faces.identity(sources) if len(sources) > 1 and not sel.reference \
                else faces.embedding(ref_path, "reference")
            select = reference_tracks = ReferenceTracks(
                models.embedder.embed, reference, distance=sel.distance, every=sel.embed_every,
                margin=sel.margin)
        else:
            needed = any(p.needs_target_identity for p in models.face_steps)
            if models.settings.release_idle_models and not needed and not cfg.review.enabled:
                models.embedder.lazy.release()   # not needed again (the review embeds outputs)

            def select(frame: np.ndarray, found: list[Face]) -> list[Face]:
                return select_faces(found, sel.mode)
    tracks = None
    if stab.enabled:
        tracks = Tracking(TrackLinker(max_missed=stab.fill),
                          TrackSelection(sel.mode, reference_tracks, people=people), stab.fill,
                          face_filter(stab.min_cutoff, stab.beta, stab.d_cutoff), stab.window)
    elif people is not None:     # a person is decided per track: tracks, used as found
        tracks = Tracking(TrackLinker(max_missed=0), TrackSelection("map", people=people), 0,
                          None)
    return Selection(identities, select, tracks)
