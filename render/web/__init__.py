"""The classroom: a web page in front of the job spool (``render serve``) and its accounts
(``render users``).

Students sign in, upload a source face and a target, and get a job in the same spool that
``render work`` empties under the device lock; the page follows the job's progress and hands back
the output and its report. Everything the page keeps lives in the state folder
(``Config.state_path``)::

    state_dir/classroom.db      accounts (slow salted password hashes), sessions, script tokens,
                                failed sign-ins, class settings, the uploaded files' records
    state_dir/secret            the key that signs the session cookies (mode 0600)
    state_dir/incoming/         uploads being received (``<random id>.part``; removed on any error)
    state_dir/files/<folder>/   one submission: source.<ext>, target.<ext> (named by role, never by
                                the uploaded name; a second photo source2.<ext>, for a second
                                person with reference1.png, reference2.png: the faces clicked)
                                and out/ with the output, its report, the work folder of its
                                segments and, once asked for, the review picture
                                (result.mp4.review.png)

Modules: :mod:`.db` (the SQLite file), :mod:`.accounts` (users, passwords, sessions, tokens,
sign-in throttling), :mod:`.settings` (the class settings), :mod:`.errors` (refusals with their
HTTP status, and what reads as a full disk), :mod:`.uploads` (streaming multipart reception within the
limits, probing, the face check), :mod:`.picks` (the second photo: the same person, or a second
person's face clicked on the target), :mod:`.classroom` (jobs of the page on the spool, retention),
:mod:`.views` (a job as the pages show it), :mod:`.verdicts` (the review's verdict of a done job),
:mod:`.results` (its files), :mod:`.sheets` (its review picture, made once when first asked for),
:mod:`.server` (the FastAPI app), :mod:`.commands` (``render serve`` and ``render users``).
"""
from __future__ import annotations

from typing import Sequence


def serve_main(args: Sequence[str]) -> int:
    from .commands import serve_main as main

    return main(args)


def users_main(args: Sequence[str]) -> int:
    from .commands import users_main as main

    return main(args)
