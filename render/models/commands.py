"""``render models list | fetch | verify | convert``.

The lead's CLI calls :func:`main` with the resolved folders, the extra manifest paths and the
models each profile needs; tables go to stdout, logs through :mod:`logging`, failures raise
:class:`UsageError` (exit 2) or :class:`ModelError` (exit 4).
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Mapping, Sequence, TextIO

from render.errors import ModelError, UsageError

from .manifest import LOCAL_MANIFEST_NAME, Manifest, ModelEntry, load_manifest, nearest, \
    read_manifest_file, write_local_entries
from .store import ModelStore, default_stamp_dir, pinned_at_first_fetch

log = logging.getLogger(__name__)

USAGE = ("usage: render models list [dir=DIR] | fetch [profile=P|all] [NAME ...] [dir=DIR] "
         "[from=FOLDER] | verify [NAME ...] [dir=DIR] | convert NAME fp16|int8 [calibrate=CLIP] "
         "[detect=NAME] [dir=DIR]")
COMMANDS = ("list", "fetch", "verify", "convert", "help")
_KEYS = {"list": {"dir"}, "fetch": {"dir", "profile", "from"}, "verify": {"dir"},
         "convert": {"dir", "calibrate", "detect"}, "help": set()}
NON_COMMERCIAL = "NON-COMMERCIAL"
#: the status of an entry whose pin ``render models fetch`` takes (render.models.fetch)
NOT_PINNED = "not pinned yet: taken at the first fetch (FaceFusion publishes a CRC32 only)"


def _parse(command: str, args: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    keys: dict[str, str] = {}
    names: list[str] = []
    for arg in args:
        if "=" in arg:
            key, value = arg.split("=", 1)
            if key not in _KEYS[command]:
                allowed = ", ".join(f"{k}=" for k in sorted(_KEYS[command])) or "none"
                raise UsageError(f"`render models {command}` does not take {key}= (it takes "
                                 f"{allowed}): {USAGE}")
            if not value:
                raise UsageError(f"{key}= needs a value: {USAGE}")
            keys[key] = value
        else:
            names.append(arg)
    return keys, names


def _mb(size: int | None) -> str:
    if not size:
        return "?"
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"


def licence_text(entry: ModelEntry) -> str:
    return entry.licence if entry.commercial_use else f"{entry.licence} [{NON_COMMERCIAL}]"


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() + "\n")


def _usage_by_model(manifest: Manifest, profiles: Mapping[str, Sequence[tuple[str, str]]]) \
        -> dict[str, list[str]]:
    used: dict[str, list[str]] = {}
    for profile, required in sorted(profiles.items()):
        for name, precision in required:
            try:
                target = manifest.resolve(name, precision).name
                label = profile
            except ModelError:
                target = name
                label = f"{profile} (needs {precision}: convert)"
            labels = used.setdefault(target, [])
            if label not in labels:
                labels.append(label)
    return used


def cmd_list(manifest: Manifest, store: ModelStore, profiles, out: TextIO) -> int:
    used = _usage_by_model(manifest, profiles)
    rows = [["NAME", "SIZE", "LICENCE", "STATUS", "PROFILES"]]
    for entry in manifest:
        status = store.status(entry)
        if not entry.sha256:
            status += f" ({NOT_PINNED})"
        elif pinned_at_first_fetch(entry):
            status += " (pinned at first fetch)"
        elif not entry.confirmed:
            status += " (pin unconfirmed)"
        if entry.source:
            status += f" (converted from {entry.source})"
        rows.append([entry.name, _mb(entry.size), licence_text(entry), status,
                     ", ".join(used.get(entry.name, [])) or "-"])
    out.write(f"models folder: {store.models_dir}\n")
    _table(rows, out)
    out.write(f"Models marked [{NON_COMMERCIAL}] may not be used commercially; check each "
              f"licence before using the output.\n")
    return 0


def _profile_requirements(spec: str, profiles: Mapping[str, Sequence[tuple[str, str]]]) \
        -> list[tuple[str, str]]:
    wanted: list[tuple[str, str]] = []
    for profile in [p.strip() for p in spec.split(",") if p.strip()]:
        if profile == "all":
            chosen = sorted(profiles)
        elif profile in profiles:
            chosen = [profile]
        else:
            close = nearest(profile, profiles)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise UsageError(f"unknown profile {profile!r}: {hint}known profiles: "
                             f"{', '.join(sorted(profiles)) or 'none'} (or profile=all)")
        for name in chosen:
            for item in profiles[name]:
                if tuple(item) not in wanted:
                    wanted.append(tuple(item))  # type: ignore[arg-type]
    return wanted


def _raise_first(errors: list[ModelError], what: str) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ModelError(f"{len(errors)} models failed to {what} (see the log above); first: "
                         f"{errors[0]}")


def cmd_fetch(keys: dict[str, str], names: list[str], manifest: Manifest, store: ModelStore,
              profiles, out: TextIO, *, fetch_options: Mapping | None = None) -> int:
    from . import convert as convert_mod
    from .fetch import copy_from, fetch
    from .first_fetch import first_fetch

    folder = Path(keys["from"]).expanduser() if "from" in keys else None
    if folder is not None and not folder.is_dir():
        raise UsageError(f"from={folder} is not a folder: give the folder that holds the model files")
    if folder is not None and (folder / LOCAL_MANIFEST_NAME).is_file():
        overlay = read_manifest_file(folder / LOCAL_MANIFEST_NAME)
        if overlay:
            path = write_local_entries(store.models_dir, overlay.values())
            log.info("added %d manifest entries from %s to %s", len(overlay), folder, path)
            manifest = load_manifest(store.models_dir, [p for p in manifest.files[1:]
                                                        if p != path])
            store = ModelStore(store.models_dir, manifest, store.stamp_dir)
    spec = keys.get("profile")
    if spec is None and not names:
        if not profiles:
            raise UsageError(f"name the models to fetch or a profile: {USAGE}")
        log.info("no models named: fetching what every profile needs (profile=all)")
        spec = "all"
    targets: list[ModelEntry] = [manifest.get(name) for name in names]
    conversions: list[ModelEntry] = []
    for name, precision in (_profile_requirements(spec, profiles) if spec else []):
        try:
            targets.append(manifest.resolve(name, precision))
        except ModelError:
            source = manifest.get(name)
            targets.append(source)
            conversions.append(source)
    unique: dict[str, ModelEntry] = {}
    while targets:
        entry = targets.pop(0)
        if entry.name not in unique:
            unique[entry.name] = entry
            targets += [manifest.get(need) for need in entry.needs]   # a swapper's converter
    options = dict(fetch_options or {})
    pinned: dict[str, ModelEntry] = {}  # pins taken by this fetch, by name

    def bring(entry: ModelEntry) -> None:
        here = folder is not None and (folder / entry.file).is_file()
        if not entry.sha256:
            new = first_fetch(entry, store.models_dir, folder=folder if here else None,
                              stamp_dir=store.stamp_dir, **options)
            pinned[entry.name] = new
            out.write(f"{entry.name}: verified {store.path(new)} against FaceFusion's CRC32 and "
                      f"pinned at first fetch (sha256 {new.sha256}, {new.size} bytes) in "
                      f"{new.origin}\n")
            return
        if here:
            copy_from(entry, folder, store.models_dir, stamp_dir=store.stamp_dir)
        else:
            fetch(entry, store.models_dir, stamp_dir=store.stamp_dir, **options)
        out.write(f"{entry.name}: verified {store.path(entry)}\n")

    errors: list[ModelError] = []
    failed: set[str] = set()
    for entry in unique.values():
        try:
            if entry.source and not entry.urls and store.status(entry) == "missing" \
                    and not (folder is not None and (folder / entry.file).is_file()):
                # a converted file that is gone: make it again from its source
                source = manifest.get(entry.source)
                if source.name not in unique:
                    bring(source)
                conversions.append(source)
                continue
            bring(entry)
        except ModelError as exc:
            log.error("%s", exc)
            errors.append(exc)
            failed.add(entry.name)
    done: set[str] = set()
    for source in conversions:
        source = pinned.get(source.name, source)
        if source.name in done or source.name in failed:
            continue
        done.add(source.name)
        try:
            new = convert_mod.convert(source, "fp16", store.models_dir, manifest,
                                      stamp_dir=store.stamp_dir)
            out.write(f"{new.name}: converted from {source.name}, verified {store.path(new)}\n")
        except ModelError as exc:
            log.error("%s", exc)
            errors.append(exc)
    _raise_first(errors, "fetch")
    return 0


def cmd_verify(names: list[str], manifest: Manifest, store: ModelStore, out: TextIO) -> int:
    entries = [manifest.get(n) for n in names] if names else manifest.entries()
    rows = [["NAME", "STATUS", "PATH"]]
    errors: list[ModelError] = []
    bad: list[str] = []
    for entry in entries:
        path = store.path(entry)
        if not names and not path.exists():
            rows.append([entry.name, "missing", str(path)])
            continue
        try:
            store.verify(entry, force=True)
            rows.append([entry.name, "verified", str(path)])
        except ModelError as exc:
            errors.append(exc)
            bad.append(entry.name)
            rows.append([entry.name, "NOT PINNED" if not entry.sha256 else
                         "missing" if not path.exists() else "CORRUPT", str(path)])
    _table(rows, out)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ModelError(f"{len(errors)} models failed verification ({', '.join(bad)}): run "
                         f"`render models fetch {' '.join(bad)}`")
    return 0


def cmd_convert(keys: Mapping[str, str], names: list[str], manifest: Manifest,
                store: ModelStore, cache_dir: Path, out: TextIO) -> int:
    from .convert import convert

    if len(names) == 1:
        names = [names[0], "fp16"]
    if len(names) != 2:
        raise UsageError(f"convert takes one model name and a precision: {USAGE}")
    if names[1] == "int8":
        from ..config import SCHEMA
        from .quantize import convert_int8

        calibrate = Path(keys["calibrate"]).expanduser() if "calibrate" in keys else None
        new = convert_int8(manifest.get(names[0]), store.models_dir, manifest, store,
                           detector=manifest.get(keys.get("detect",
                                                          SCHEMA["detect.model"].default)),
                           embedder=manifest.get(SCHEMA["embed.model"].default),
                           calibrate=calibrate, cache_dir=cache_dir)
        gate = ", ".join(f"{k} {v:g}" for k, v in new.fidelity.items())
        out.write(f"{new.name}: {store.path(new)} (sha256 {new.sha256}), quantised from "
                  f"{names[0]}; fidelity gate passed ({gate}) on {new.calibration}; entry "
                  f"written to {new.origin}\n")
        return 0
    if "calibrate" in keys or "detect" in keys:
        raise UsageError(f"calibrate= and detect= are for int8 conversions: {USAGE}")
    new = convert(manifest.get(names[0]), names[1], store.models_dir, manifest,
                  stamp_dir=store.stamp_dir)
    out.write(f"{new.name}: {store.path(new)} (sha256 {new.sha256}), converted from {names[0]} "
              f"with {new.converter}; entry written to {new.origin}\n")
    return 0


def main(argv: list[str], *, models_dir: Path, cache_dir: Path, manifest_paths: list[Path],
         profiles: dict[str, list[tuple[str, str]]], out: TextIO | None = None,
         fetch_options: Mapping | None = None) -> int:
    """Run one ``render models`` command; return the exit status (errors are raised)."""
    out = out or sys.stdout
    if not argv or argv[0] in ("help", "-h", "--help"):
        out.write(USAGE + "\n")
        return 0
    command, args = argv[0], list(argv[1:])
    if command not in COMMANDS:
        close = nearest(command, COMMANDS, 1)
        hint = f"did you mean `render models {close[0]}`? " if close else ""
        raise UsageError(f"unknown models command {command!r}: {hint}{USAGE}")
    keys, names = _parse(command, args)
    if command == "list" and names:
        raise UsageError(f"`render models list` takes no model names: {USAGE}")
    models_dir = Path(keys.get("dir", models_dir)).expanduser()
    manifest = load_manifest(models_dir, [Path(p) for p in manifest_paths])
    store = ModelStore(models_dir, manifest, default_stamp_dir(Path(cache_dir).expanduser()))
    if command == "list":
        return cmd_list(manifest, store, profiles, out)
    if command == "fetch":
        return cmd_fetch(keys, names, manifest, store, profiles, out, fetch_options=fetch_options)
    if command == "verify":
        return cmd_verify(names, manifest, store, out)
    return cmd_convert(keys, names, manifest, store, Path(cache_dir).expanduser(), out)
