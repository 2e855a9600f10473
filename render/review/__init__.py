"""Review: which renders need a look (docs/review.md).

While a segment renders, :mod:`.recorder` notes what the face stage did with each selected face
(how it was found, its key points; on sampled frames the identity distance of the swapped face to
the source and its colour shift, :mod:`.measure`); :mod:`.store` keeps each segment's record
beside the committed segment; at assembly :mod:`.quality` links the faces into tracks over the
whole render (:mod:`.linking`) and judges each (:mod:`.verdict`) into the report's ``quality``
section. ``render review OUTPUT`` draws it: :mod:`render.review_sheet`.
"""
