"""The face debugger: what the face stage saw in every frame, as JSON Lines (``debug.faces``) and
drawn into the output instead of the swap (``debug.overlay``).

One line per written frame: its number in the target, and for each face track in it the track id,
whether it is swapped (selected) and with which identity (``source``: 0, or the face map's
person), how it was found (detected, tracked by optical flow, filled
across a miss), the detection score, the box and the key points as found (``raw``) and as used
(``used``, after the stabilising filter), and the crop transform (2 x 3, frame to the first face
processor's crop) the chain aligned with. Lines are appended segment by segment as they are
rendered: a resumed render appends the segments it renders again (the last line of a frame wins).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import cv2
import numpy as np

from .face_window import DETECTED, FILLED, TRACKED, FrameFaces
from .faces import align

if TYPE_CHECKING:
    from .config.sections import Debug

#: BGR colour of a selected face by how it was found; faces not selected are grey
COLOURS = {DETECTED: (0, 200, 0), TRACKED: (0, 200, 255), FILLED: (0, 0, 255)}
GREY = (160, 160, 160)


def _round(a: np.ndarray) -> list:
    return np.round(np.asarray(a, np.float64), 3).tolist()


@dataclass
class FaceDebug:
    path: Path | None
    overlay: bool

    @classmethod
    def from_config(cls, debug: "Debug") -> "FaceDebug | None":
        if not debug.faces and not debug.overlay:
            return None
        return cls(Path(debug.faces).expanduser() if debug.faces else None, debug.overlay)

    def frames(self, entries: Sequence[FrameFaces], first_frame: int,
               crop: tuple[str, int] | None) -> None:
        """Append the lines of ``entries``; ``first_frame``: the target's frame number of the
        entry with index 0 (the segment's first decoded frame); ``crop``: (template, side) of
        the chain's first face step, whose transform each face records."""
        if self.path is None or not entries:
            return
        lines = []
        for entry in entries:
            faces = []
            for tid in sorted(entry.faces):
                f = entry.faces[tid]
                used = f.used if f.used is not None else f.raw
                item = {"track": tid, "selected": f.selected, "how": f.how,
                        **({"source": f.source} if f.selected else {}),
                        "score": round(float(f.raw.score), 4), "box": _round(used.box),
                        "raw": _round(f.raw.kps), "used": _round(used.kps)}
                if crop is not None:
                    item["transform"] = _round(align.estimate(used.kps, *crop))
                faces.append(item)
            lines.append(json.dumps({"frame": first_frame + entry.index, "faces": faces}))
        with open(self.path, "a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")

    @staticmethod
    def draw(entries: Sequence[FrameFaces]) -> None:
        """Draw every track of ``entries`` into its frame: the box, the raw key points (dots),
        the used ones (crosses) and the track id."""
        for entry in entries:
            for tid in sorted(entry.faces):
                f = entry.faces[tid]
                used = f.used if f.used is not None else f.raw
                colour = COLOURS[f.how] if f.selected else GREY
                x1, y1, x2, y2 = (int(round(float(v))) for v in used.box)
                cv2.rectangle(entry.frame, (x1, y1), (x2, y2), colour, 1, cv2.LINE_AA)
                for x, y in f.raw.kps:
                    cv2.circle(entry.frame, (int(round(x)), int(round(y))), 2, colour, -1)
                for x, y in used.kps:
                    cv2.drawMarker(entry.frame, (int(round(x)), int(round(y))), (255, 255, 255),
                                   cv2.MARKER_CROSS, 6, 1)
                cv2.putText(entry.frame, f"{tid} {f.how[0]}", (x1, max(10, y1 - 4)),
                            cv2.FONT_HERSHEY_SIMPLEX, 0.4, colour, 1, cv2.LINE_AA)
