"""Model and landmark masks (FaceFusion's face maskers): occlusion (xseg), region (a face parser,
bisenet), area (the hull of landmark areas) and keep (the target's own mouth, ``keep.py``). Each
is a :class:`render.faces.mask.PasteMask` combined with the box mask by the per-pixel minimum.

Which crop each is computed on (``build.step_masks``): box and occlusion on the step's crop
before the processor runs, region and area on the swapper's result, keep on a swapper's crop
before it runs. The manifest contract of a mask model picks the class that drives it
(:mod:`.registry`).
"""
