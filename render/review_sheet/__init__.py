"""``render review OUTPUT``: the contact sheet of a render's quality section (docs/review.md).

:mod:`.reports` reads the output's report, :mod:`.frames` seeks the frames to look at in the
output, :mod:`.sheet` draws them as tiles above each track's timeline (:mod:`.timeline`), and
:mod:`.command` is the command. Apart from :mod:`render.review`, which records while rendering,
so the render path never imports what reads reports and draws.
"""
