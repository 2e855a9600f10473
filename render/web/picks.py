"""A second photo on the classroom page (issue 42): another photo of the same person, or a second
person whose face the student clicks on the target.

* ``source2_is=same-person``: the job's ``source`` is both photos (``source=P1,P2``): the
  renderer puts in their mean identity.
* ``source2_is=second-person``: a face map. The student clicks, on a frame of the target, the face
  that becomes photo 1 (``pick1``) and the one that becomes photo 2 (``pick2``), each sent as
  ``"t,x,y"`` (seconds into the target, and pixels of the target's own frame). The server decodes
  that frame with the renderer's own decode arguments (ffmpeg, its output drained, reaped, with a
  timeout), finds the faces in it with the renderer's detector, and crops the face whose box
  holds the click as the map's reference picture (``reference1.png``, ``reference2.png``); the
  job gets ``select.mode=map select.map=REF1=P1,REF2=P2`` and no ``source``. Faces of anyone else
  in the target are left as they are.

Everything here is checked before anything is stored, each refusal one line (422): a malformed
pick, a pick outside the frame or past the end, a click on no face, both clicks on one face,
two faces the renderer takes for one person (the plan would refuse the map), a clicked face the
detector cannot find again in its own crop.
"""
from __future__ import annotations

import logging
import math
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import cv2
import numpy as np

from ..errors import RenderError
from ..faces.embed import identity_distance
from ..files import write_atomic
from ..media.probe import MediaInfo
from ..media.reader import run_tool
from ..media.tools import ffmpeg_version
from ..media.video_args import decode_args
from ..sources import read_face_map, source_paths
from .errors import Refused, disk_full
from .uploads import FaceFinder, Received, ReceivedFile, check_source

log = logging.getLogger(__name__)

SAME, OTHER = "same-person", "second-person"
#: the crop around the clicked face's box, in face sides on each side
MARGIN = 0.3
#: the reference picture is a square this many face sides wide, grey around the crop: the face
#: is then a fifth of the picture, as in a portrait, whatever its size in the target (a detector
#: scales a picture to its input size: a tight crop would give it a face larger than it finds)
CANVAS = 5.0
GREY = 127
FRAME_TIMEOUT_S = 60.0      # decoding one frame of a target that passed the probe


@dataclass(frozen=True)
class Pick:
    """Photo ``n``'s click: ``t`` seconds into the target, at (x, y) pixels of its frame."""

    n: int
    t: float
    x: float
    y: float

    def where(self) -> str:
        return f"({self.x:g}, {self.y:g}) at {self.t:.2f} s"


@dataclass(frozen=True)
class Reference:
    """The picture cut around a clicked face, with the face's box in the target's frame."""

    pick: Pick
    box: tuple[int, int, int, int]
    image: np.ndarray


@dataclass
class Second:
    """What the second photo adds to a job, checked; :meth:`store` puts it into the job's
    folder and :meth:`settings` gives the job's keys."""

    kind: str
    photo: ReceivedFile
    ext: str
    references: list[Reference]
    stored: dict[str, Path] | None = None

    def store(self, folder: Path) -> list[tuple[str, str, Path, int, dict[str, Any]]]:
        """Move the photo into ``folder`` and write the references (temp → fsync → rename);
        the files' (role, name for people, path, bytes, more for the job's record)."""
        photo = folder / f"source2{self.ext}"
        os.replace(self.photo.path, photo)
        rows = [("source2", self.photo.name, photo, self.photo.bytes, {})]
        for ref in self.references:
            ok, data = cv2.imencode(".png", ref.image)
            if not ok:                       # pragma: no cover - a uint8 BGR array always encodes
                raise RenderError(f"cannot encode the crop of face {ref.pick.n}")
            path = folder / f"reference{ref.pick.n}.png"
            write_atomic(path, data.tobytes())
            rows.append((f"reference{ref.pick.n}", f"face {ref.pick.n}.png", path, len(data),
                         {"at": ref.pick.t, "box": list(ref.box)}))
        self.stored = {row[0]: row[2] for row in rows}
        return rows

    def settings(self, source: Path) -> dict[str, str]:
        """The job's keys with the first photo at ``source``: both photos as ``source``, or the
        face map (inline; a ``faces.yaml`` beside them should a path hold one of the inline
        form's separators)."""
        stored = self.stored or {}
        photos = (source, stored["source2"])
        if self.kind == SAME:
            value = ",".join(str(p) for p in photos)
            if _sources(value) != photos:
                log.error("two photos of one person cannot be named in source= under %s (a "
                          "comma in the path): move state_dir", source.parent)
                raise Refused(503, "the server cannot take two photos of one person: its folder "
                                   "for the uploads has a comma in its path (ask your teacher)")
            return {"source": value}
        refs = (stored["reference1"], stored["reference2"])
        value = ",".join(f"{r}={p}" for r, p in zip(refs, photos))
        if _entries(value) != list(zip(refs, photos)):
            listing = source.parent / "faces.yaml"
            write_atomic(listing, "".join(f"- reference: {r.name}\n  source: {p.name}\n"
                                          for r, p in zip(refs, photos)).encode())
            value = str(listing)
        return {"select.mode": "map", "select.map": value}


def _sources(value: str) -> tuple[Path, ...] | None:
    try:
        return source_paths(value)
    except RenderError:
        return None


def _entries(value: str) -> list[tuple[Path, Path]] | None:
    try:
        face_map = read_face_map(value)
    except RenderError:
        return None
    return [(e.reference, *e.sources) for e in face_map.entries]   # type: ignore[misc]


def check_second(received: Received, target: ReceivedFile, info: MediaInfo, faces: FaceFinder,
                 job: Mapping[str, str], work: Path) -> Second | None:
    """The second photo of the form (None without one) with what it is, its picks checked and
    the references cut; Refused with one line. ``work``: a folder for the decoded frame."""
    fields = received.fields
    photo = received.files.get("source2")
    kind = fields.get("source2_is", "")
    texts = {n: fields.get(f"pick{n}", "") for n in (1, 2)}
    if photo is None:
        if kind or any(texts.values()):
            given = [k for k in ("source2_is", "pick1", "pick2") if fields.get(k)]
            raise Refused(422, f"{', '.join(given)} given without a second photo: add the second "
                               f"photo (source2) or leave them out")
        return None
    if photo.bytes == 0:
        raise Refused(422, f"the second photo {photo.name!r} is empty")
    if kind not in (SAME, OTHER):
        raise Refused(422, f"say what the second photo {photo.name!r} is: source2_is={SAME} "
                           f"(another photo of the same person) or source2_is={OTHER} (a second "
                           f"person)")
    _, ext = check_source(photo.path, photo.name, faces, job, role="the second photo")
    if kind == SAME:
        if any(texts.values()):
            raise Refused(422, "pick1 and pick2 are for a second person: leave them out when the "
                               "second photo is of the same person")
        return Second(SAME, photo, ext, [])
    if not all(texts.values()):
        raise Refused(422, "a second person: click on the target the face that becomes each "
                           "photo (pick1 for the first photo, pick2 for the second, each "
                           "seconds,x,y)")
    picks = [parse_pick(n, texts[n]) for n in (1, 2)]
    return Second(OTHER, photo, ext, references(picks, target, info, faces, job, work))


def parse_pick(n: int, text: str) -> Pick:
    """``"t,x,y"``: seconds and pixels, plain finite numbers."""
    parts = [p.strip() for p in text.split(",")]
    try:
        t, x, y = (float(p) for p in parts)
        if not all(math.isfinite(v) for v in (t, x, y)):
            raise ValueError
    except ValueError:
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise Refused(422, f"pick{n}: expected seconds,x,y (e.g. 1.5,320,180), got "
                           f"{shown!r}") from None
    return Pick(n, t, x, y)


def check_place(pick: Pick, info: MediaInfo, label: str) -> None:
    """Refused unless the pick is inside the target's frame and within its length."""
    if pick.t < 0:
        raise Refused(422, f"pick{pick.n} is at {pick.t:g} s: a time from 0 on")
    if info.is_image and pick.t != 0:
        raise Refused(422, f"pick{pick.n} is at {pick.t:g} s, past the end: the target {label!r} "
                           f"is a picture (its time is 0)")
    end = info.video_start + info.duration
    if not info.is_image and pick.t >= end:
        raise Refused(422, f"pick{pick.n} is at {pick.t:g} s, past the end of the target "
                           f"{label!r} ({end:.2f} s long)")
    if not (0 <= pick.x < info.width and 0 <= pick.y < info.height):
        raise Refused(422, f"pick{pick.n} ({pick.x:g}, {pick.y:g}) is outside the frame of the "
                           f"target {label!r} ({info.width} × {info.height} pixels)")


def references(picks: Sequence[Pick], target: ReceivedFile, info: MediaInfo, faces: FaceFinder,
               job: Mapping[str, str], work: Path) -> list[Reference]:
    """The pictures of the clicked faces, each checked as the plan will check the map."""
    label = target.name
    for pick in picks:
        check_place(pick, info, label)
    frames: dict[float, np.ndarray] = {}
    found: dict[float, list] = {}
    chosen = []
    for pick in picks:
        at = frame_start(info, pick.t)
        if at not in frames:
            frames[at] = read_frame(target.path, info, at, work, pick, label)
            found[at] = faces.detect(frames[at], job)
        index = clicked(found[at], pick.x, pick.y)
        if index is None:
            n = len(found[at])
            raise Refused(422, f"pick{pick.n}: no face at {pick.where()} in the target {label!r} "
                               f"(the server finds {n} face{'' if n == 1 else 's'} in that "
                               f"frame): click inside a face")
        chosen.append((pick, at, index))
    (p1, at1, i1), (p2, at2, i2) = chosen
    if (at1, i1) == (at2, i2):
        raise Refused(422, "pick1 and pick2 are on the same face: click a different person for "
                           "each photo")
    out = []
    for pick, at, index in chosen:
        face = found[at][index]
        others = [f.box for j, f in enumerate(found[at]) if j != index]
        image = reference_image(frames[at], face.box, others)
        again = faces.detect(image, job)
        if not again:
            raise Refused(422, f"pick{pick.n}: the face at {pick.where()} is too small or unclear "
                               f"for the renderer to find it again on its own: pick a moment "
                               f"where it is larger")
        box = tuple(int(round(float(v))) for v in face.box)
        out.append((Reference(pick, box, image), largest(again)))    # type: ignore[arg-type]
    (r1, f1), (r2, f2) = out
    limit = faces.config(job).select.distance
    distance = identity_distance(faces.embed(r1.image, f1, job), faces.embed(r2.image, f2, job))
    if distance < limit:
        raise Refused(422, f"the two faces you clicked look like one person to the renderer "
                           f"(identity distance {distance:.2f}, under {limit:g}): click two "
                           f"different people, or send the photo as another photo of the same "
                           f"person")
    return [r1, r2]


def largest(found: Sequence[Any]) -> Any:
    """The face the renderer takes from a reference picture: the largest (then the surest)."""
    return max(found, key=lambda f: (f.area, f.score))


def clicked(found: Sequence[Any], x: float, y: float) -> int | None:
    """The index of the face whose box holds (x, y) (of several, the one whose centre is
    nearest), or None."""
    inside = [i for i, f in enumerate(found)
              if f.box[0] <= x <= f.box[2] and f.box[1] <= y <= f.box[3]]
    if not inside:
        return None
    return min(inside, key=lambda i: (float(found[i].box[0] + found[i].box[2]) / 2 - x) ** 2
               + (float(found[i].box[1] + found[i].box[3]) / 2 - y) ** 2)


def reference_image(frame: np.ndarray, box: Sequence[float],
                    others: Sequence[Sequence[float]] = ()) -> np.ndarray:
    """The face in ``box`` with a margin of MARGIN face sides, on a grey square CANVAS face
    sides wide, centred; the parts of the other faces' boxes that fall in the margin are greyed,
    so that the renderer, which takes a reference picture's largest face, finds this one."""
    h, w = frame.shape[:2]
    x1, y1, x2, y2 = (float(v) for v in box)
    side = max(x2 - x1, y2 - y1, 1.0)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    reach = side / 2 + MARGIN * side
    left, top = max(0, int(math.floor(cx - reach))), max(0, int(math.floor(cy - reach)))
    right, bottom = min(w, int(math.ceil(cx + reach))), min(h, int(math.ceil(cy + reach)))
    crop = frame[top:bottom, left:right].copy()

    def inside(b: Sequence[float]) -> tuple[slice, slice]:
        a, c = max(left, int(b[0])), min(right, int(math.ceil(b[2])))
        t, d = max(top, int(b[1])), min(bottom, int(math.ceil(b[3])))
        return slice(t - top, max(t, d) - top), slice(a - left, max(a, c) - left)

    for other in others:
        crop[inside(other)] = GREY
    fy, fx = inside(box)          # the clicked face stays whole where another box overlapped it
    crop[fy, fx] = frame[top:bottom, left:right][fy, fx]
    size = max(int(math.ceil(CANVAS * side)), crop.shape[0], crop.shape[1])
    canvas = np.full((size, size, 3), GREY, np.uint8)
    ox = min(max(0, int(round(size / 2 - (cx - left)))), size - crop.shape[1])
    oy = min(max(0, int(round(size / 2 - (cy - top)))), size - crop.shape[0])
    canvas[oy:oy + crop.shape[0], ox:ox + crop.shape[1]] = crop
    return canvas


def frame_start(info: MediaInfo, t: float) -> float:
    """The ``-ss`` time that decodes the frame a player shows at ``t``: half a frame before the
    start of that frame (ffmpeg gives the first frame at or after it), at the probed rate."""
    if info.is_image:
        return 0.0
    fps = float(info.fps) if info.fps else 0.0
    if fps <= 0:
        return t
    index = math.floor(t * fps + 1e-6)
    return max(0.0, (index - 0.5) / fps)


def read_frame(path: Path, info: MediaInfo, at: float, work: Path, pick: Pick,
               label: str) -> np.ndarray:
    """One frame of the target from ``at`` seconds (a picture: its frame), as BGR: the
    renderer's decode arguments, one frame, into a raw file in ``work`` (removed after)."""
    version = ffmpeg_version()
    try:
        argv = decode_args(info, trim=(at, None) if at > 0 else None,
                           legacy_vsync=version is not None and version < (5, 1))
    except RenderError:
        argv = None
    size = info.width * info.height * 3
    if shutil.disk_usage(work).free < size + (1 << 20):
        raise disk_full()
    raw = work / f"{secrets.token_hex(16)}.part"
    data = b""
    if argv is not None:
        last = len(argv) - 1 - argv[::-1].index("-f")
        if "-frames:v" not in argv:
            argv[last:last] = ["-frames:v", "1"]
        argv[-1] = str(raw)                       # was pipe:1
        try:
            run_tool(argv, f"the frame at {at:.3f} s of {path.name}", timeout=FRAME_TIMEOUT_S,
                     writes=raw)
            data = raw.read_bytes() if raw.exists() else b""
        except RenderError as exc:
            log.warning("pick%d: %s", pick.n, exc)
            raise Refused(422, f"pick{pick.n}: the server cannot read the frame at "
                               f"{pick.t:.2f} s of the target {label!r}: pick another moment"
                               ) from None
        finally:
            raw.unlink(missing_ok=True)
    if len(data) < size:
        raise Refused(422, f"pick{pick.n} is at {pick.t:g} s, past the last frame of the target "
                           f"{label!r}")
    return np.frombuffer(data[:size], np.uint8).reshape(info.height, info.width, 3).copy()
