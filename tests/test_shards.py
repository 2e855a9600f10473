"""One video sharded over plain processes: any order, two at once, one twice; the same bytes as
one process; other settings refused; a missing segment named at assembly."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from render.standins import media as mf
from conftest import cli_env, model_args, run_cli


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return mf.make_clip(tmp_path_factory.mktemp("shardclip") / "clip.mp4", width=480, height=270,
                        seconds=4.0)


def keys(workdir: Path, standin_models: Path, clip, out: Path, *extra: str,
         signing: list[str] = ()) -> list[str]:
    return [*signing, "profile=low", "segment.seconds=0.52", f"source={workdir / 'in' / 'source.jpg'}",
            f"target={clip.path}", f"output={out}", "progress=off", "lock.device=none",
            *model_args(standin_models, workdir / "cache"), *extra]


@pytest.fixture(scope="module")
def single(tmp_path_factory, standin_models, clip, signing):
    d = tmp_path_factory.mktemp("single")
    (d / "in").mkdir()
    mf.make_source_image(d / "in" / "source.jpg")
    out = d / "out" / "clip.mp4"
    r = run_cli(*keys(d, standin_models, clip, out, signing=signing))
    assert r.returncode == 0, r.stderr
    return sha(out)


def test_shards_in_any_order_assemble_to_the_single_process_bytes(workdir, standin_models, clip,
                                                                  single, signing):
    out = workdir / "out" / "clip.mp4"
    k = keys(workdir, standin_models, clip, out, signing=signing)
    # shard 2 first, then 0 and 3 at once, then 1, then 2 again (it skips its finished segments)
    assert run_cli(*k, "shard=2/4").returncode == 0
    both = [subprocess.Popen([sys.executable, "-m", "render", *k, f"shard={i}/4"], env=cli_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in (0, 3)]
    for p in both:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    # the index from the scheduler's variable: a Kubernetes Indexed Job's, then a Slurm array's
    r = run_cli(*k, "shard.count=4", JOB_COMPLETION_INDEX="1")
    assert r.returncode == 0, r.stderr
    r = run_cli(*k, "shard.count=4", "--verbose", SLURM_ARRAY_TASK_ID="2")
    assert r.returncode == 0 and "0 segments rendered, 2 were done" in r.stderr, r.stderr
    assert not out.exists(), "a shard must not assemble"
    r = run_cli("assemble", *k)
    assert r.returncode == 0, r.stderr
    assert sha(out) == single
    assert not [p for p in out.parent.iterdir() if ".render-" in p.name]


def test_a_shard_with_other_settings_is_refused(workdir, standin_models, clip):
    out = workdir / "out" / "clip.mp4"
    assert run_cli(*keys(workdir, standin_models, clip, out), "shard=0/4").returncode == 0
    r = run_cli(*keys(workdir, standin_models, clip, out, "mask.padding=0.1"), "shard=1/4")
    assert r.returncode == 2
    line = r.stderr.strip().splitlines()[-1]
    assert "holds segments of another job" in line and "refusing to mix" in line


def test_assembling_with_missing_segments_names_them_and_their_shards(workdir, standin_models, clip):
    out = workdir / "out" / "clip.mp4"
    k = keys(workdir, standin_models, clip, out)
    for i in (0, 1, 3):
        assert run_cli(*k, f"shard={i}/4").returncode == 0
    r = run_cli("assemble", *k, "shard.count=4")
    assert r.returncode == 5
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("render: error: cannot assemble clip.mp4: 2 of 8 segments are not done:")
    assert "4 (frames 52-64, shard 2 of 4)" in line and "5 (frames 65-77, shard 2 of 4)" in line
    assert [p.name for p in out.parent.iterdir() if not p.name.startswith(".")] == []


def test_shard_index_needs_a_source(workdir, standin_models, clip):
    out = workdir / "out" / "clip.mp4"
    r = run_cli(*keys(workdir, standin_models, clip, out), "shard.count=4")
    assert r.returncode == 2 and "SLURM_ARRAY_TASK_ID" in r.stderr
    r = run_cli(*keys(workdir, standin_models, clip, out), "shard=4/4")
    assert r.returncode == 2 and "outside 0..3" in r.stderr
    r = run_cli(*keys(workdir, standin_models, clip, out), "shard=x")
    assert r.returncode == 2 and "expected I/N" in r.stderr


def test_one_segment_is_the_finished_file_linked_into_place(workdir, standin_models, clip, signing):
    """A plan of one segment encodes the finished file in the segment's pass (audio, tags, the
    output's muxer): shard 1 of 2 has nothing to do, the assembly in another process links it into
    place, and the bytes are those of one process; the committed segment stays until then."""
    d1 = workdir / "one"
    (d1 / "in").mkdir(parents=True)
    mf.make_source_image(d1 / "in" / "source.jpg")
    whole = d1 / "out" / "clip.mp4"
    r = run_cli(*keys(d1, standin_models, clip, whole, "segment.seconds=10", signing=signing))
    assert r.returncode == 0, r.stderr

    out = workdir / "out" / "clip.mp4"
    k = keys(workdir, standin_models, clip, out, "segment.seconds=10", signing=signing)
    assert run_cli(*k, "shard=1/2").returncode == 0
    assert run_cli(*k, "shard=0/2").returncode == 0 and not out.exists()
    (work,) = [p for p in out.parent.iterdir() if ".render-" in p.name]
    (seg,) = work.glob("seg-*.mp4")
    kinds = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_type",
                            "-of", "csv=p=0", str(seg)], capture_output=True, text=True).stdout.split()
    assert kinds == ["video", "audio"]
    seg_sha = sha(seg)
    r = run_cli("assemble", *k)
    assert r.returncode == 0, r.stderr
    assert sha(out) == sha(whole) != seg_sha          # signed: the C2PA manifest added
    assert not work.exists()
    # unmarked, the output is the segment's very bytes
    plain = workdir / "out" / "plain.mp4"
    k = keys(workdir, standin_models, clip, plain, "segment.seconds=10", "mark.enabled=false")
    assert run_cli(*k, "shard=0/1").returncode == 0
    (seg,) = [p for p in plain.parent.iterdir() if ".plain.mp4.render-" in p.name][0].glob("seg-*.mp4")
    seg_sha = sha(seg)
    assert run_cli("assemble", *k).returncode == 0
    assert sha(plain) == seg_sha


def test_a_finished_segment_that_fails_the_output_checks_is_rendered_again(workdir, standin_models,
                                                                           clip):
    """A one-segment plan's committed segment is the output itself: one that fails the output's
    checks (its audio cut short after the commit, its record rewritten to match) is un-committed,
    so that the next run renders it again instead of failing the same way for ever."""
    out = workdir / "out" / "clip.mp4"
    k = keys(workdir, standin_models, clip, out, "segment.seconds=10", "mark.enabled=false")
    assert run_cli(*k, "shard=0/1").returncode == 0
    (work,) = [p for p in out.parent.iterdir() if ".render-" in p.name]
    (seg,) = work.glob("seg-*.mp4")
    short = work / "short.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(seg), "-map", "0", "-c:v", "copy",
                    "-c:a", "aac", "-af", "atrim=0:1", "-f", "mp4", str(short)], check=True)
    short.replace(seg)
    side = work / f"{seg.name}.json"
    record = json.loads(side.read_text())
    record.update(sha256=sha(seg), bytes=seg.stat().st_size)
    side.write_text(json.dumps(record))
    r = run_cli("assemble", *k)
    assert r.returncode == 5, r.stderr
    assert "audio lasts" in r.stderr.strip().splitlines()[-1], r.stderr
    assert not seg.exists() and not side.exists() and not out.exists()
    r = run_cli(*k, "--verbose")
    assert r.returncode == 0, r.stderr
    assert f"{clip.frame_count} frames decoded)" in r.stderr, r.stderr     # rendered again
    assert run_cli("verify", str(out)).returncode == 0
