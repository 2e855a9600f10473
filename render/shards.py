"""Beyond one machine: a shard renders its share of a plan's segments into the shared work
folder; ``assemble`` joins them as a local render does."""
from __future__ import annotations

import logging
import os
from typing import Mapping

from .batch import device_lock
from .config import Config
from .errors import RenderFailed, UsageError
from .execute import ExecResult
from .work_folder import AlreadyDone
from .interrupts import StopToken
from .jobs import single_job
from .renderer import Renderer, RenderResult
from .segments import shard_of, shard_segments

log = logging.getLogger(__name__)


#: where an array task's index comes from: Slurm arrays, Kubernetes Indexed Jobs
INDEX_VARIABLES = ("SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX")


def shard_index(cfg: Config, env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(index, count) of this shard: ``shard.index``, else the scheduler's task index."""
    env = os.environ if env is None else env
    count = cfg.shard.count
    index = cfg.shard.index
    if index < 0:
        for var in INDEX_VARIABLES:
            if env.get(var, "").strip():
                try:
                    index = int(env[var])
                except ValueError:
                    raise UsageError(f"{var}={env[var]!r} is not a shard index") from None
                break
        else:
            raise UsageError(f"shard.count={count} needs the shard's index: shard=I/{count}, "
                             f"shard.index=I, or {' / '.join(INDEX_VARIABLES)} from the scheduler")
    if not 0 <= index < count:
        raise UsageError(f"shard index {index} is outside 0..{count - 1} (shard.count={count})")
    return index, count


def render_shard(cfg: Config, *, stop: StopToken | None = None) -> ExecResult:
    """Render this shard's segments of the plan into the shared work folder, then exit; a re-run
    skips the segments already committed. Refused when the work folder holds another job's plan.
    ``stop`` is asked between and within segments (:class:`~render.execute.Hooks`)."""
    index, count = shard_index(cfg)
    job = single_job(cfg, "a shard")
    owner = {"job": f"shard-{index}-of-{count}", "target": job.target.name}
    with device_lock(cfg, owner) as held:
        renderer = Renderer(cfg, device_id=held.device.ordinal if held is not None else None)
        plan = renderer.plan(job)
        if plan.kind != "video":
            raise UsageError("only videos are sharded: render an image in one process")
        mine = shard_segments(len(plan.segments), count, index)
        log.info("shard %d of %d: segments %s of %d", index, count,
                 f"{mine[0]}-{mine[-1]}" if mine else "none", len(plan.segments))
        result = renderer.executor(job, plan, stop=stop).run(mine, assemble=False,
                                                             refuse_other=True)
    log.info("shard %d of %d done: %d segments rendered, %d were done", index, count,
             result.rendered, len(mine) - result.rendered)
    return result


def assemble(cfg: Config) -> RenderResult | None:
    """Join the committed segments of every shard, mux the audio once, verify and commit — as a
    local render does. Names the missing segments and their shards when some are not done."""
    job = single_job(cfg, "assemble")
    renderer = Renderer(cfg)
    plan = renderer.plan(job)
    if plan.kind != "video":
        raise UsageError("only videos are sharded: render an image in one process")
    executor = renderer.executor(job, plan)
    missing = executor.missing()
    if missing:
        count = cfg.shard.count
        where = (lambda s: f", shard {shard_of(s.index, len(plan.segments), count)} of {count}") \
            if count else (lambda s: "")
        raise RenderFailed(
            f"cannot assemble {job.output.name}: {len(missing)} of {len(plan.segments)} segments "
            f"are not done: " + ", ".join(f"{s.index} (frames {s.start}-{s.end - 1}{where(s)})"
                                          for s in missing[:12])
            + (" ..." if len(missing) > 12 else ""))
    try:
        return renderer.render(job, segments=[])
    except AlreadyDone as done:
        log.info("%s", done)
        return None
