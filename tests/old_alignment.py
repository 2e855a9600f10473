"""Run ``render`` as it was before issue 38 (``python old_alignment.py ARGS...``): the LMEDS fit
and alignment version 1, so a test can leave work folders, shards and reports made before the
change and check that the current code never mixes them into its output."""
import sys

import cv2
import numpy as np

from render.faces import align


def _lmeds(kps: np.ndarray, template: str, size: int) -> np.ndarray:
    dst = align.template_points(template, size)
    matrix, _ = cv2.estimateAffinePartial2D(kps.astype(np.float32), dst, method=cv2.LMEDS)
    return matrix.astype(np.float32)


align.VERSION = "1"
align.estimate = _lmeds

from render.cli import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
