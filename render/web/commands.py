"""``render serve`` (the classroom page) and ``render users`` (its accounts)."""
from __future__ import annotations

import ipaddress
import logging
import socket
import sys
from datetime import datetime
from typing import IO, Sequence

from ..config import load_config, parse_overrides
from ..errors import Interrupted, UsageError
from .accounts import ROLES, Accounts
from .db import Database

log = logging.getLogger(__name__)

SERVE_USAGE = ("usage: render serve [host=127.0.0.1] [port=8080] [min_free_mb=1024] "
               "[trusted_proxies=ADDR,NET/BITS] [key=value ...]")
USERS_USAGE = ("usage: render users add NAME [role=student|teacher] | list | disable NAME | "
               "enable NAME | reset NAME | token NAME   [state_dir=DIR]")


def _split(args: Sequence[str], own: dict[str, str]) -> tuple[dict[str, str], list[str], list[str]]:
    """(own options, render keys as key=value, bare words)."""
    opts, keys, words = dict(own), [], []
    for a in args:
        key, sep, value = a.partition("=")
        if not sep:
            words.append(a)
        elif key in opts:
            opts[key] = value
        else:
            keys.append(a)
    return opts, keys, words


def _whole(name: str, value: str, low: int, high: int) -> int:
    try:
        n = int(value)
    except ValueError:
        raise UsageError(f"{name}={value}: expected a whole number") from None
    if not low <= n <= high:
        raise UsageError(f"{name}={value}: expected {low} to {high}")
    return n


def trusted_proxies(value: str) -> list[str]:
    """The addresses and networks whose ``X-Forwarded-Proto`` and ``X-Forwarded-For`` count
    (a TLS-terminating reverse proxy in front of the page), each checked."""
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        try:
            out.append(str(ipaddress.ip_network(item, strict=False)) if "/" in item
                       else str(ipaddress.ip_address(item)))
        except ValueError:
            raise UsageError(f"trusted_proxies={value}: expected IP addresses or networks "
                             f"(10.0.0.1, 10.0.0.0/8, ::1), comma separated") from None
    return out


def listen(host: str, port: int) -> socket.socket:
    """A listening socket, or one clear error (port taken, address not here)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"host={host}: {exc.strerror}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(False)
    return sock


def serve_main(args: Sequence[str]) -> int:
    import uvicorn

    from .classroom import Classroom
    from .server import create_app

    opts, keys, words = _split(args, {"host": "127.0.0.1", "port": "8080", "min_free_mb": "1024",
                                      "trusted_proxies": ""})
    if words:
        raise UsageError(f"unexpected argument {words[0]!r}; {SERVE_USAGE}")
    overrides = parse_overrides(keys)
    cfg = load_config(overrides)
    port = _whole("port", opts["port"], 0, 65535)
    min_free = _whole("min_free_mb", opts["min_free_mb"], 0, 1 << 30) * 1024 * 1024
    proxies = trusted_proxies(opts["trusted_proxies"])
    classroom = Classroom(cfg, overrides, min_free=min_free)
    classroom.ensure()
    if not any(u.teacher for u in classroom.accounts.users()):
        log.warning("no teacher account yet: render users add NAME role=teacher")
    sock = listen(opts["host"], port)
    host, port = sock.getsockname()[:2]
    log.info("classroom page at http://%s:%d/ (state %s, spool %s, locks %s)",
             f"[{host}]" if ":" in host else host, port, cfg.state_path, cfg.spool_path,
             cfg.lock_path)
    if proxies:
        log.info("X-Forwarded-Proto and X-Forwarded-For are taken from %s only",
                 ", ".join(proxies))
    # uvicorn's proxy-headers middleware: from a trusted address, X-Forwarded-Proto: https makes
    # the request https (so the session cookie is Secure) and X-Forwarded-For its client address
    config = uvicorn.Config(create_app(classroom), log_config=None, access_log=False,
                            server_header=False, proxy_headers=bool(proxies),
                            forwarded_allow_ips=proxies or None, timeout_graceful_shutdown=5,
                            lifespan="on")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except (Interrupted, KeyboardInterrupt):   # uvicorn stopped gracefully, then re-raised it
        pass
    finally:
        sock.close()
    log.info("classroom page stopped")
    return 0


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "never"


def users_main(args: Sequence[str], stream: IO[str] | None = None) -> int:
    stream = stream or sys.stdout
    opts, keys, words = _split(args, {"role": "student"})
    cfg = load_config(parse_overrides(keys))
    accounts = Accounts(Database(cfg.state_path))
    verb, names = (words[0], words[1:]) if words else ("list", [])
    if verb == "list" and not names:
        users = accounts.users()
        if not users:
            stream.write(f"no accounts in {cfg.state_path} yet: render users add NAME "
                         f"role=teacher\n")
            return 0
        stream.write(f"{'NAME':<20} {'ROLE':<8} {'STATE':<22} LAST SIGN-IN\n")
        for u in users:
            state = "disabled" if u.disabled else "one-time password" if u.must_change else "active"
            stream.write(f"{u.name:<20} {u.role:<8} {state:<22} {_when(u.last_signin)}\n")
        return 0
    if verb not in ("add", "disable", "enable", "reset", "token") or len(names) != 1:
        raise UsageError(USERS_USAGE)
    name = names[0].lower()
    if verb == "add":
        if opts["role"] not in ROLES:
            raise UsageError(f"role={opts['role']}: expected student or teacher")
        password = accounts.add(name, opts["role"])
        stream.write(f"added {opts['role']} {name}; one-time password: {password}\n"
                     f"(to be changed at the first sign-in)\n")
    elif verb in ("disable", "enable"):
        accounts.set_disabled(name, verb == "disable")
        stream.write(f"{name} {verb}d" + (": every session and token ended\n"
                                          if verb == "disable" else "\n"))
    elif verb == "reset":
        password = accounts.reset(name)
        stream.write(f"{name}: new one-time password: {password}\n(sessions and tokens ended; "
                     f"to be changed at the next sign-in)\n")
    else:
        token = accounts.new_token(name)
        stream.write(f"{token}\n")
    return 0
