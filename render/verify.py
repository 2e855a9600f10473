"""``render verify REPORT [rerender=N]``: check an output against its report.

One line per check on stdout and a one-line verdict; exit 0 only when every check holds, 1 when
one fails (a mismatch names the file and both hashes). Checks:

- the output, the target, the source (and reference) and every model named in the report hash to
  the SHA-256 the report records;
- the report's config hashes to its recorded hash (an edited config fails), and is valid here;
- this installation's versions equal those that went into the job key, and the job key computed
  here from the files, the config and the versions equals the report's;
- the synthetic-media marks the report says were made are present (metadata tag) and valid (C2PA);
- ``rerender=N``: N segments, chosen deterministically (spread evenly over the render), rendered
  again into a temp folder: their bytes equal the report's segment hashes.
"""
from __future__ import annotations

import logging
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Sequence

from . import mark as marking
from . import report as reports
from .config import config_from_values
from .errors import RenderError, UsageError
from .files import sha256_file
from .plan import config_hash
from .versions import installation

log = logging.getLogger(__name__)


@dataclass
class Check:
    ok: bool
    line: str


def pick_segments(count: int, n: int) -> list[int]:
    """``n`` segment indices spread evenly over ``count`` (the middle one for n=1)."""
    n = max(0, min(n, count))
    return sorted({int((k + 0.5) * count / n) for k in range(n)}) if n else []


def _hash_check(what: str, path: str | None, expected: str | None) -> Check:
    if not path or not expected:
        return Check(False, f"{what}: not recorded in the report")
    p = Path(path)
    if not p.is_file():
        return Check(False, f"{what} {p}: missing")
    got = sha256_file(p)
    if got != expected:
        return Check(False, f"{what} {p}: SHA-256 mismatch: report {expected}, file {got}")
    return Check(True, f"{what} {p.name}: SHA-256 {got[:16]}… matches")


def checks(data: dict[str, Any], *, rerender: int = 0, overrides: dict[str, str] | None = None,
           output_path: Path | None = None) -> list[Check]:
    """``output_path``: the file the report describes, when it is not (or no longer) at the path
    the report recorded: the one beside the report, by name (see :func:`main`)."""
    out: list[Check] = []
    if data.get("status") != "done":
        out.append(Check(False, f"report status is {data.get('status')!r}, not done: "
                                f"{data.get('error') or ''}".rstrip(": ")))
    output = dict(data.get("output") or {})
    if output_path is not None:
        output["path"] = str(output_path)
    out.append(_hash_check("output", output.get("path"), output.get("sha256")))
    target = data.get("target") or {}
    out.append(_hash_check("target", target.get("path"), target.get("sha256")))
    out += _source_checks(data)
    if data.get("reference"):
        ref = data["reference"]
        out.append(_hash_check("reference", ref.get("path"), ref.get("sha256")))
    for m in data.get("models") or ():
        out.append(_hash_check(f"model {m.get('name')}", m.get("file"), m.get("sha256")))

    # the config: unedited, and valid on this installation
    config = data.get("config") or {}
    recorded = data.get("config_hash")
    if config_hash(config) != recorded:
        out.append(Check(False, f"config: hash mismatch (edited?): report {recorded}, "
                                f"config {config_hash(config)}"))
        cfg = None
    else:
        try:
            values = dict(config)
            values.update(overrides or {})
            cfg = config_from_values(values, data.get("config_explicit") or ())
            out.append(Check(True, f"config: hash {recorded[:16]}… matches, valid here"))
        except RenderError as exc:
            cfg = None
            out.append(Check(False, f"config: not valid on this installation: {exc}"))

    # versions and the job key
    here = installation()
    recorded_versions = data.get("versions") or {}
    differ = [f"{k} {here.get(k)!r} here, {v!r} in the report" for k, v in recorded_versions.items()
              if here.get(k) != v]
    out.append(Check(not differ, "versions: " + ("; ".join(differ) if differ else
                                               ", ".join(f"{k} {v}" for k, v in
                                                         recorded_versions.items()
                                                         if k in ("render", "onnxruntime")) +
                                               " … match")))

    # marks
    marks = data.get("marks") or {}
    if marks.get("enabled") and output.get("path") and Path(output["path"]).is_file():
        out_path = Path(output["path"])
        tag = marking.read_tag(out_path)
        out.append(Check(bool(tag and tag.startswith(marking.TAG_PREFIX)),
                         f"metadata tag: {tag!r}" if tag else "metadata tag: missing"))
        c2pa = marks.get("c2pa") or {}
        if c2pa.get("signed"):
            try:
                info = marking.read_manifest(out_path)
                ok = info.present and info.valid and info.synthetic
                out.append(Check(ok, f"C2PA manifest: {info.describe()}"
                                     + (f", digital source type {info.digital_source_type.rsplit('/', 1)[-1]}"
                                        if info.digital_source_type else "")))
            except marking.C2paUnavailable as exc:
                out.append(Check(False, f"C2PA manifest: cannot be checked here: {exc}"))
        else:
            out.append(Check(True, f"C2PA manifest: none ({c2pa.get('reason', 'not signed')})"))
    elif not marks.get("enabled"):
        out.append(Check(True, "marks: off for this render (mark.enabled=false, or "
                               "debug.overlay=true)"))

    if cfg is not None:
        out += _rerun_checks(data, cfg, rerender)
    return out


def _source_checks(data: dict[str, Any]) -> list[Check]:
    """Each source image (and each face map reference) still has the bytes it had; a report
    without the per-image rows has its one source's."""
    people = (data.get("face_map") or {}).get("people")
    if people:
        return [_hash_check(what, row.get("path"), row.get("sha256"))
                for person in people
                for what, row in [("face map reference", person.get("reference") or {})] +
                [("source", r) for r in person.get("sources") or ()]]
    rows = data.get("sources") or [data.get("source") or {}]
    return [_hash_check("source", r.get("path"), r.get("sha256")) for r in rows]


def _job_sources(data: dict[str, Any], cfg) -> tuple[Path, ...]:
    if cfg.select.mode == "map":
        from .sources import read_face_map
        return read_face_map(cfg.select.map).sources
    rows = data.get("sources") or [data["source"]]
    return tuple(Path(r["path"]) for r in rows)


def _rerun_checks(data: dict[str, Any], cfg, rerender: int) -> list[Check]:
    """Recompute the job key here (models loaded, nothing rendered) and re-render N segments."""
    from .jobs import Job
    from .renderer import Renderer

    out: list[Check] = []
    target = Path(data["target"]["path"])
    try:
        sources = _job_sources(data, cfg)
    except RenderError as exc:
        return [Check(False, f"job key: {exc}")]
    output = Path(data["output"]["path"]) if data.get("output") else None
    if not target.is_file() or not all(p.is_file() for p in sources) or output is None:
        return [Check(False, "job key: the target, source or output is missing")]
    tmp = Path(tempfile.mkdtemp(prefix="render-verify-"))
    job = Job(sources[0], target, tmp / output.name, sources)
    try:
        renderer = Renderer(cfg)
        plan = renderer.plan(job)
        same = plan.key == data.get("job_key")
        out.append(Check(same, f"job key: {plan.key[:16]}… " + ("matches" if same else
                                f"here, {str(data.get('job_key'))[:16]}… in the report")))
        if rerender and same and plan.kind == "video":
            recorded = {s["index"]: s["sha256"] for s in data.get("segments") or ()}
            chosen = pick_segments(len(plan.segments), rerender)
            result = renderer.executor(job, plan).run(
                chosen, assemble=False)
            got = {r.index: r.sha256 for r in result.segments}
            for i in chosen:
                seg = plan.segments[i]
                want = recorded.get(i)
                ok = want is not None and got.get(i) == want
                out.append(Check(ok, f"segment {i} (frames {seg.start}-{seg.end - 1}) re-rendered: "
                                     + ("bytes match" if ok else
                                        f"SHA-256 mismatch: report {want}, re-render {got.get(i)}")))
        elif rerender and plan.kind == "image":
            out.append(Check(True, "rerender: an image has no segments; the output hash was checked"))
    except RenderError as exc:
        out.append(Check(False, f"job key: cannot plan the render here: {exc}"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(args: Sequence[str], stream: IO[str] | None = None) -> int:
    stream = stream or sys.stdout
    paths = [a for a in args if "=" not in a]
    opts = dict(a.split("=", 1) for a in args if "=" in a)
    if len(paths) != 1:
        raise UsageError("usage: render verify REPORT [rerender=N] [key=value ...]")
    path = Path(paths[0])
    if path.suffix != ".json" and Path(str(path) + reports.SUFFIX).is_file():
        path = Path(str(path) + reports.SUFFIX)     # the output's name works too
    rerender = opts.pop("rerender", "0")
    if not rerender.isdigit():
        raise UsageError("rerender=N needs a whole number of segments, 0 or more")
    data = reports.load(path)
    # the output is the file beside its report (OUTPUT.report.json), wherever the pair was moved
    # or copied to; the path recorded inside is where it was made
    beside = path.with_name(path.name[:-len(reports.SUFFIX)]) \
        if path.name.endswith(reports.SUFFIX) and len(path.name) > len(reports.SUFFIX) else None
    results = checks(data, rerender=int(rerender), overrides=opts, output_path=beside)
    for c in results:
        stream.write(f"{'ok  ' if c.ok else 'FAIL'} {c.line}\n")
    failed = [c for c in results if not c.ok]
    if failed:
        stream.write(f"verify: FAILED: {len(failed)} of {len(results)} checks failed "
                     f"({path.name})\n")
        return 1
    stream.write(f"verify: OK: all {len(results)} checks hold ({path.name})\n")
    return 0
