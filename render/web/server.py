"""The classroom's web app (FastAPI): the pages, their assets and the JSON API under ``/api/``.

Who is calling: a session cookie (``render_session``: signed, HTTP-only, SameSite=Strict) from
the sign-in, or ``Authorization: Bearer <token>`` for scripts (``render users token NAME`` or
``POST /api/tokens``). Every API route but the sign-in answers 401 without one of them. A request
that changes something with the cookie must carry the session's CSRF token in ``X-CSRF-Token``
(the pages' script sends it), and a request from another origin is refused. A student gets 404
for anything not theirs, exactly as for what does not exist. Credentials that are malformed in any
way (non-ASCII, wrong length) are simply wrong: 401/403. Every answer, a 500 included, carries the
security headers; a full disk at any step is 507. The OpenAPI description is at
``/openapi.json`` (the interactive docs would load their assets from a CDN, so there are none).
"""
from __future__ import annotations

import asyncio
import logging
import sqlite3
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..config import profile_names
from .accounts import (COOKIE, SESSION_MAX_S, PasswordRejected, Session, SignInRefused, User,
                       check_new_password, same_secret)
from .classroom import CONSENT, Classroom
from .errors import Refused, disk_full, out_of_space
from .extras import ranges
from .pages import STATIC, add_pages
from .results import add_result_routes
from .sheets import add_review_routes
from .uploads import drain, receive

log = logging.getLogger(__name__)

UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; object-src 'none'; "
     b"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]


@dataclass(frozen=True)
class Caller:
    user: User
    session: Session | None     # None when a script token was used


# -- request and answer bodies -------------------------------------------------------------------------
class SignIn(BaseModel):
    name: str = Field(max_length=64)
    password: str = Field(max_length=256)


class PasswordChange(BaseModel):
    current: str = Field(max_length=256)
    new: str = Field(max_length=256)


class SettingsUpdate(BaseModel):
    allowed_profiles: list[str] | None = None
    max_upload_mb: int | None = None
    max_clip_seconds: int | None = None
    max_queued_jobs: int | None = None
    retention_days: int | None = None


class SessionInfo(BaseModel):
    name: str
    role: str
    must_change: bool
    csrf: str | None = Field(None, description="send it back in X-CSRF-Token (cookie sessions)")


class Token(BaseModel):
    token: str


class SecureHeaders:
    """ASGI middleware: security headers on every answer, and no caching of API answers. It
    wraps the whole app (:class:`ClassroomApp`), so the 500 that Starlette's outermost error
    middleware sends for an unhandled exception carries them too."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        api = scope.get("path", "").startswith("/api/")

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", [])) + SECURITY_HEADERS
                if api:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class ClassroomApp(FastAPI):
    """FastAPI with :class:`SecureHeaders` outside every other middleware, the server-error one
    included (``add_middleware`` would put it inside that one)."""

    def build_middleware_stack(self):
        return SecureHeaders(super().build_middleware_stack())


def _same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another site."""
    origin = request.headers.get("origin")
    if origin is None:
        return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")
    host = request.headers.get("host", "")
    try:
        return urlsplit(origin).netloc == host
    except ValueError:          # not a URL at all (e.g. "http://[::1"): not this site either
        return False


def create_app(classroom: Classroom, *, maintenance_s: float = 600.0) -> FastAPI:
    accounts = classroom.accounts

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        classroom.ensure()

        async def upkeep() -> None:
            while True:
                try:
                    gone = await anyio.to_thread.run_sync(classroom.expire)
                    if gone:
                        log.info("retention: removed %d finished job(s)", len(gone))
                except Exception:  # noqa: BLE001 - upkeep never takes the server down
                    log.exception("upkeep failed")
                await asyncio.sleep(maintenance_s)

        task = asyncio.create_task(upkeep())
        try:
            yield
        finally:
            task.cancel()

    app = ClassroomApp(title="render classroom", version=__version__, lifespan=lifespan,
                       docs_url=None, redoc_url=None, openapi_url="/openapi.json",
                       description=__doc__.split("\n\n", 1)[1] if __doc__ else None)

    # -- errors: one line each ------------------------------------------------------------------
    @app.exception_handler(Refused)
    async def refused(request: Request, exc: Refused):
        return JSONResponse({"detail": str(exc)}, status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        parts = []
        for e in exc.errors():
            where = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
            parts.append(f"{where}: {e.get('msg')}" if where else str(e.get("msg")))
        return JSONResponse({"detail": "; ".join(parts) or "bad request"}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(OSError)
    @app.exception_handler(sqlite3.Error)
    async def storage_error(request: Request, exc: Exception):
        if not out_of_space(exc, classroom.state):
            raise exc                      # a fault of the server: the 500 below
        log.warning("%s %s refused: the disk of %s is full (%s)", request.method,
                    request.url.path, classroom.state, exc)
        return JSONResponse({"detail": str(disk_full("the request"))}, status_code=507)

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception):
        # Starlette logs the traceback after this answer is sent
        return JSONResponse({"detail": "internal server error: the server's log has the cause"},
                            status_code=500)

    # -- who is calling -------------------------------------------------------------------------
    def caller(request: Request) -> Caller:
        auth = request.headers.get("authorization")
        if auth:
            scheme, _, token = auth.partition(" ")
            user = accounts.token_user(token.strip()) if scheme.lower() == "bearer" else None
            if user is None:
                raise _unauthorized("the token is not valid (render users token NAME makes one)")
            return Caller(user, None)
        session = accounts.session(request.cookies.get(COOKIE))
        if session is None:
            raise _unauthorized("not signed in")
        if request.method in UNSAFE_METHODS:
            sent = request.headers.get("x-csrf-token", "")
            if not _same_origin(request) or not same_secret(sent, session.csrf):
                raise Refused(403, "missing or wrong CSRF token: reload the page and try again")
        return Caller(session.user, session)

    def member(c: Caller = Depends(caller)) -> Caller:
        if c.user.must_change:
            raise Refused(403, "change your one-time password first (POST /api/password)")
        return c

    def teacher(c: Caller = Depends(member)) -> Caller:
        if not c.user.teacher:
            raise Refused(403, "only the teacher can do this")
        return c

    # -- signing in -----------------------------------------------------------------------------
    @app.post("/api/session", response_model=SessionInfo, tags=["session"],
              summary="Sign in (sets the session cookie)")
    def sign_in(body: SignIn, request: Request, response: Response) -> SessionInfo:
        if not _same_origin(request):
            raise Refused(403, "sign in from the classroom page")
        address = request.client.host if request.client else "?"
        try:
            user = accounts.sign_in(body.name.strip().lower(), body.password, address)
        except SignInRefused as exc:
            if exc.retry_after is not None:
                return JSONResponse({"detail": str(exc)}, status_code=429,
                                    headers={"Retry-After": str(int(exc.retry_after) + 1)})
            raise _unauthorized(str(exc)) from None
        cookie, session = accounts.open_session(user)
        response.set_cookie(COOKIE, cookie, max_age=int(SESSION_MAX_S), path="/", httponly=True,
                            samesite="strict", secure=request.url.scheme == "https")
        return SessionInfo(name=user.name, role=user.role, must_change=user.must_change,
                           csrf=session.csrf)

    @app.get("/api/session", response_model=SessionInfo, tags=["session"],
             summary="Who is signed in (and the CSRF token of the session)")
    def who(c: Caller = Depends(caller)) -> SessionInfo:
        return SessionInfo(name=c.user.name, role=c.user.role, must_change=c.user.must_change,
                           csrf=c.session.csrf if c.session else None)

    @app.delete("/api/session", status_code=204, tags=["session"], summary="Sign out")
    def sign_out(request: Request, c: Caller = Depends(caller)) -> Response:
        if c.session is not None:
            accounts.close_session(c.session)
        response = Response(status_code=204)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict",
                               secure=request.url.scheme == "https")
        return response

    @app.post("/api/password", response_model=SessionInfo, tags=["session"],
              summary="Change the password (required after a one-time password)")
    def change_password(body: PasswordChange, c: Caller = Depends(caller)) -> SessionInfo:
        try:
            check_new_password(body.new)
            accounts.change_password(c.user, body.current, body.new)
        except PasswordRejected as exc:
            raise Refused(422, str(exc)) from None
        if c.session is not None:
            accounts.close_other_sessions(c.session)
        user = accounts.get(c.user.name) or c.user
        return SessionInfo(name=user.name, role=user.role, must_change=user.must_change,
                           csrf=c.session.csrf if c.session else None)

    @app.post("/api/tokens", response_model=Token, tags=["session"],
              summary="A token for scripts (replaces the old one): Authorization: Bearer TOKEN")
    def new_token(c: Caller = Depends(member)) -> Token:
        return Token(token=accounts.new_token(c.user.name))

    # -- the class ------------------------------------------------------------------------------
    @app.get("/api/settings", tags=["class"], summary="The class settings and limits")
    def get_settings(c: Caller = Depends(member)) -> dict[str, Any]:
        data = classroom.settings().to_dict()
        data["consent_statement"] = CONSENT
        data["extras"] = classroom.extras()
        #: the extras each allowed profile can have (a landmarker may differ between profiles)
        data["extras_by_profile"] = classroom.offer.by_profile(data["allowed_profiles"])
        data["extra_ranges"] = ranges()
        if c.user.teacher:
            data["profiles"] = profile_names()
        return data

    @app.put("/api/settings", tags=["class"], summary="Change the class settings (teacher)")
    def put_settings(body: SettingsUpdate, c: Caller = Depends(teacher)) -> dict[str, Any]:
        values = {k: v for k, v in body.model_dump().items() if v is not None}
        settings = classroom.save_settings(values)
        log.info("class settings changed by %s: %s", c.user.name, values)
        return {**settings.to_dict(), "consent_statement": CONSENT, "profiles": profile_names()}

    @app.get("/api/status", tags=["class"],
             summary="Device locks, queue and disk use (teacher)")
    def status(c: Caller = Depends(teacher)) -> dict[str, Any]:
        return classroom.status()

    @app.get("/api/users", tags=["class"], summary="The accounts (teacher)")
    def users(c: Caller = Depends(teacher)) -> list[dict[str, Any]]:
        return [{"name": u.name, "role": u.role, "disabled": u.disabled,
                 "must_change": u.must_change, "last_signin": u.last_signin}
                for u in accounts.users()]

    # -- jobs -----------------------------------------------------------------------------------
    @app.get("/api/jobs", tags=["jobs"],
             summary="Your jobs (the teacher: every job), newest first")
    def list_jobs(c: Caller = Depends(member)) -> list[dict[str, Any]]:
        return classroom.jobs_for(c.user)

    @app.post("/api/jobs", status_code=201, tags=["jobs"],
              summary="Upload a source face and a target, and queue the job",
              openapi_extra={"requestBody": {"required": True, "content": {
                  "multipart/form-data": {"schema": {
                      "type": "object", "required": ["source", "target", "consent"],
                      "properties": {
                          "source": {"type": "string", "format": "binary",
                                     "description": "image with the face to put in"},
                          "target": {"type": "string", "format": "binary",
                                     "description": "video (or image) to put it into"},
                          "profile": {"type": "string",
                                      "description": "one of the class's allowed profiles"},
                          "consent": {"type": "string", "enum": ["yes"],
                                      "description": CONSENT},
                          "upscale": {"type": "string", "enum": ["yes", "no"],
                                      "description": "upscale the whole frame x2 (last)"},
                          "background": {"type": "string", "enum": ["yes", "no"],
                                         "description": "remove the background: the result "
                                                        "is a WebM (a PNG for a picture) with "
                                                        "alpha"},
                          "expression": {"type": "string", "example": "yes", "description":
                                         "the target's expression back: yes or 0..100"},
                          "age": {"type": "integer", "minimum": -100, "maximum": 100,
                                  "description": "older (+) or younger (-); 0: unchanged"},
                          "voice": {"type": "string", "format": "binary", "description":
                                    "a voice (audio, or video with sound) the lips move to"},
                          "voice_mix": {"type": "string", "enum": ["replace", "mix"],
                                        "description": "the sound: the voice, or it over the "
                                                       "clip's (mix)"},
                          "source2": {"type": "string", "format": "binary",
                                      "description": "optional: a second photo (checked as "
                                                     "the source is)"},
                          "source2_is": {"type": "string",
                                         "enum": ["same-person", "second-person"],
                                         "description": "with source2: another photo of the "
                                                        "same person (their mean identity), or "
                                                        "a second person (needs pick1, pick2)"},
                          "pick1": {"type": "string", "example": "1.5,320,180",
                                    "description": "second-person: the face on the target that "
                                                   "becomes the source photo, as seconds,x,y "
                                                   "(pixels of the target's frame)"},
                          "pick2": {"type": "string", "example": "1.5,900,200",
                                    "description": "second-person: the face that becomes "
                                                   "source2, as seconds,x,y"}}}}}}})
    async def submit(request: Request, c: Caller = Depends(member)) -> JSONResponse:
        settings = await anyio.to_thread.run_sync(classroom.settings)
        try:
            await anyio.to_thread.run_sync(classroom.check_quota, c.user, settings)
        except Refused:
            await drain(request.stream())    # so that the browser sees the answer, not a reset
            raise
        received = await receive(request, classroom.incoming, max_file=settings.max_upload_bytes,
                                 min_free=classroom.min_free)
        view = await anyio.to_thread.run_sync(classroom.submit, c.user, received, settings)
        return JSONResponse(view, status_code=201)

    @app.get("/api/jobs/{job_id}", tags=["jobs"], summary="One job: state, queue position, progress")
    def get_job(job_id: str, c: Caller = Depends(member)) -> dict[str, Any]:
        return classroom.view(classroom.job_for(c.user, job_id), full=c.user.teacher)

    @app.post("/api/jobs/{job_id}/cancel", tags=["jobs"],
              summary="Cancel a queued job (at once) or a running one (within a segment)")
    def cancel_job(job_id: str, c: Caller = Depends(member)) -> dict[str, Any]:
        return classroom.cancel(c.user, job_id)

    @app.post("/api/jobs/{job_id}/retry", tags=["jobs"],
              summary="Queue a failed or cancelled job again (teacher)")
    def retry_job(job_id: str, c: Caller = Depends(member)) -> dict[str, Any]:
        return classroom.retry(c.user, job_id)

    @app.delete("/api/jobs/{job_id}", status_code=204, tags=["jobs"],
                summary="Delete a job that is not running, with all its files")
    def delete_job(job_id: str, c: Caller = Depends(member)) -> Response:
        classroom.delete(c.user, job_id)
        return Response(status_code=204)

    add_result_routes(app, classroom, member)
    add_review_routes(app, classroom, member)

    add_pages(app, accounts)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def _unauthorized(message: str) -> StarletteHTTPException:
    return StarletteHTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})
