"""Configuration: profiles + overrides → one validated object; errors name file, key, expectation."""
from pathlib import Path

import pytest

from render import config as c
from render.models.needs import required_models
from render.errors import ConfigError, UsageError


def test_profiles_load_and_differ():
    low, mod, high = (c.load_config({"profile": p}, env={}) for p in ("low", "moderate", "high"))
    assert low.swap.precision == "fp16" and high.swap.precision == "fp32"
    assert low.detect.size < high.detect.size == 640
    assert low.mask.type == "box" and high.mask.type == "feather"
    assert not low.enhance.enabled and high.enhance.enabled
    from render.memory import strategy
    assert strategy(low.execution).frames_in_flight < strategy(mod.execution).frames_in_flight \
        < strategy(high.execution).frames_in_flight
    assert low.execution.memory_strategy == "low"


def test_each_profile_says_what_card_it_is_for():
    for name in c.profile_names():
        first = c.profile_path(name).read_text().splitlines()[0]
        assert first.startswith("#") and ("GB" in first), first


def test_overrides_are_typed_and_win():
    cfg = c.load_config({"profile": "low", "detect.size": "640", "enhance.enabled": "yes",
                         "execution.providers": "cuda,cpu", "mask.blur": "0.5"}, env={})
    assert cfg.detect.size == 640 and cfg.enhance.enabled is True
    assert cfg.execution.providers == ("cuda", "cpu") and cfg.mask.blur == 0.5


def test_a_number_key_that_the_machine_can_choose_takes_auto():
    assert c.load_config({"execution.parallel_segments": "auto"}, env={}) \
        .execution.parallel_segments == 0
    assert c.load_config({"execution.parallel_segments": "3"}, env={}) \
        .execution.parallel_segments == 3
    assert "execution.parallel_segments=auto" in c.help_text()


def test_config_is_immutable():
    cfg = c.load_config({}, env={})
    with pytest.raises(Exception):
        cfg.detect.size = 1  # type: ignore[misc]


def test_environment_defaults_are_below_the_command_line():
    cfg = c.load_config({}, env={"RENDER_MODELS_DIR": "/m", "RENDER_CACHE_DIR": "/c"})
    assert cfg.models_dir == Path("/m") and cfg.cache_path == Path("/c")
    cfg = c.load_config({"models.dir": "/x"}, env={"RENDER_MODELS_DIR": "/m"})
    assert cfg.models_dir == Path("/x")


@pytest.mark.parametrize("key,value,expect", [
    ("detect.size", "abc", "detect.size: expected an integer between 128 and 1280 (a multiple of 32)"),
    ("detect.size", "650", "a multiple of 32"),
    ("detect.score", "1.5", "detect.score: expected a number between 0 and 1"),
    ("swap.precision", "int4", "swap.precision: expected one of fp32, fp16, int8, auto, got 'int4'"),
    ("enhance.enabled", "maybe", "expected true or false"),
    ("execution.providers", "cuda,gpu", "expected a list of tensorrt|cuda|cpu"),
    # nan is no number: it passed every min/max comparison (detect.score=nan swapped no face,
    # segment.seconds=nan was an internal error)
    ("detect.score", "nan", "detect.score: expected a number between 0 and 1, got nan"),
    ("segment.seconds", "NaN", "segment.seconds: expected a number between 0.5 and 3600"),
    ("lock.timeout", "inf", "lock.timeout: expected a number, got inf"),
    ("execution.parallel_segments", "many",
     "execution.parallel_segments: expected an integer between 0 and 64 or auto, got 'many'"),
])
def test_bad_values_name_key_and_expectation(key, value, expect):
    with pytest.raises(ConfigError) as e:
        c.load_config({key: value}, env={})
    assert expect in str(e.value) and "command line" in str(e.value)


def test_unknown_key_names_nearest():
    with pytest.raises(UsageError) as e:
        c.parse_overrides(["detect.sise=3"])
    assert "unknown key 'detect.sise'" in str(e.value) and "detect.size" in str(e.value)
    with pytest.raises(UsageError) as e:
        c.parse_overrides(["size=3"])
    assert "detect.size" in str(e.value)
    with pytest.raises(UsageError):
        c.parse_overrides(["novalue"])


def test_unknown_profile_lists_profiles():
    with pytest.raises(ConfigError) as e:
        c.load_config({"profile": "ultra"}, env={})
    assert "unknown profile 'ultra'" in str(e.value) and "low" in str(e.value)


def test_profile_file_errors_name_the_file(tmp_path):
    p = tmp_path / "mine.yaml"
    p.write_text("detect:\n  size: 999\n")
    with pytest.raises(ConfigError) as e:
        c.load_config({"profile": str(p)}, env={})
    assert str(p) in str(e.value) and "detect.size" in str(e.value)
    p.write_text("detect:\n  colour: red\n")
    with pytest.raises(ConfigError) as e:
        c.load_config({"profile": str(p)}, env={})
    assert str(p) in str(e.value) and "detect.colour" in str(e.value)
    p.write_text("detect: [1, 2\n")
    with pytest.raises(ConfigError) as e:
        c.load_config({"profile": str(p)}, env={})
    assert "not valid YAML" in str(e.value)


@pytest.mark.parametrize("text,expect", [
    ("2-5", c.Trim(2.0, 5.0, "s")), ("1.5-", c.Trim(1.5, None, "s")),
    ("10f-40f", c.Trim(10, 40, "f")), ("", None)])
def test_trim(text, expect):
    assert c.parse_trim(text) == expect


@pytest.mark.parametrize("text", ["5-2", "a-b", "3f-4s", "-"])
def test_bad_trim(text):
    with pytest.raises(ConfigError):
        c.parse_trim(text)


def test_help_lists_every_key_with_its_default():
    cfg = c.load_config({"profile": "low"}, env={})
    text = c.help_text(cfg)
    for key in c.SCHEMA:
        assert f"  {key}=" in text
    assert "detect.size=320" in text and "swap.precision=fp16" in text


def test_required_models_follow_the_profile():
    assert ("inswapper_128", "fp16") in required_models(c.load_config({"profile": "low"}, env={}))
    high = required_models(c.load_config({"profile": "high"}, env={}))
    assert ("gfpgan_1.4", "fp32") in high


def test_profile_auto_picks_by_gpu_memory_and_falls_back_to_the_cpu():
    from render.config import load_config
    from render.gpus import Gpu, auto_profile

    for mib, name in ((4096, "low"), (8192, "moderate"), (24576, "high"), (143771, "high")):
        chosen, cpu_only, why = auto_profile([Gpu(0, "Card", mib)], cuda=True)
        assert (chosen, cpu_only) == (name, False) and f"GPU 0 (Card, {mib / 1024:.0f} GiB)" in why
    assert auto_profile([Gpu(0, "Card", 24576)], cuda=False)[:2] == ("low", True)   # no CUDA in ORT
    assert auto_profile([], cuda=True)[:2] == ("low", True)                        # no GPU, no NVML
    cfg = load_config({"profile": "auto"}, env={}, auto=lambda: auto_profile([], cuda=True))
    assert cfg.profile == "low" and cfg.execution.providers == ("cpu",)     # the one chosen
    assert cfg.swap.precision == "auto" and cfg.detect.size == 320   # int8 where gated, on VNNI
    cfg = load_config({"profile": "auto"}, env={},
                      auto=lambda: auto_profile([Gpu(0, "Card", 8192)], cuda=True))
    assert cfg.execution.memory_strategy == "moderate" and "cuda" in cfg.execution.providers
    # on this machine (no NVIDIA GPU): low on the CPU
    assert load_config({"profile": "auto"}, env={}).execution.providers == ("cpu",)
