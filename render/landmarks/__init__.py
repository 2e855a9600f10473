"""Face landmarks (FaceFusion's face landmarkers): 68 points per face.

- ``landmark.model`` (2dfan4): 68 points and a score from the frame; when the score is above
  ``landmark.score`` the 5 points derived from them place every crop of the chain instead of the
  detector's 5 (:mod:`.refine`).
- ``landmark.estimator`` (fan_68_5): 68 points estimated from the detector's 5, for the area
  masks when no landmarker runs.

The manifest contract of a landmark model picks the class that drives it (:mod:`.registry`).
"""
