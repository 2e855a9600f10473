"""The classroom's HTML pages: each one sends whoever may not see it to where they belong (the
sign-in, the password change, or their own page). The pages are static files; their scripts
call the JSON API."""
from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, RedirectResponse

from .accounts import COOKIE, Accounts, Session

STATIC = Path(__file__).resolve().parent / "static"


def add_pages(app: FastAPI, accounts: Accounts) -> None:
    def page_session(request: Request) -> Session | None:
        return accounts.session(request.cookies.get(COOKIE))

    def page(name: str) -> FileResponse:
        return FileResponse(STATIC / name, media_type="text/html",
                            headers={"cache-control": "no-store"})

    def member_page(request: Request, name: str, *, teacher: bool = False):
        s = page_session(request)
        if s is None or s.user.must_change or (teacher and not s.user.teacher):
            return RedirectResponse("/", status_code=303)
        return page(name)

    @app.get("/", include_in_schema=False)
    def home(request: Request):
        s = page_session(request)
        if s is None:
            return RedirectResponse("/signin", status_code=303)
        if s.user.must_change:
            return RedirectResponse("/password", status_code=303)
        return RedirectResponse("/teacher" if s.user.teacher else "/student", status_code=303)

    @app.get("/signin", include_in_schema=False)
    def signin_page():
        return page("signin.html")

    @app.get("/password", include_in_schema=False)
    def password_page(request: Request):
        if page_session(request) is None:
            return RedirectResponse("/signin", status_code=303)
        return page("password.html")

    @app.get("/student", include_in_schema=False)
    def student_page(request: Request):
        return member_page(request, "student.html")

    @app.get("/tokens", include_in_schema=False)
    def tokens_page(request: Request):
        return member_page(request, "tokens.html")

    @app.get("/teacher", include_in_schema=False)
    def teacher_page(request: Request):
        return member_page(request, "teacher.html", teacher=True)
