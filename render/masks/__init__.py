"""Model and landmark masks (FaceFusion's face maskers): occlusion (xseg), region (a face parser,
bisenet) and area (the hull of landmark areas). Each is a :class:`render.faces.mask.PasteMask`
combined with the box mask by the per-pixel minimum.

Which crop each is computed on (``build.step_masks``): box and occlusion on the step's crop
before the processor runs, region and area on the swapper's result. The manifest contract of a
mask model picks the class that drives it (:mod:`.registry`).
"""
