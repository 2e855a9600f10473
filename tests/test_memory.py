"""Memory strategies: a profile's explicit values over the strategy's; the C heap's tuning."""
from __future__ import annotations

from render.config import load_config
from render.memory import STRATEGIES, strategy


def test_explicit_values_override_the_strategy(tmp_path):
    cfg = load_config({"profile": "low", "execution.frames_in_flight": "0",
                       "execution.batch_size": "0", "execution.gpu_mem_limit_mb": "1000"}, env={})
    s = strategy(cfg.execution)
    assert s.frames_in_flight == STRATEGIES["low"].frames_in_flight
    assert s.batch_size == STRATEGIES["low"].batch_size and s.gpu_mem_limit_mb == 1000
    cfg = load_config({"profile": "low", "execution.memory_strategy": "high",
                       "execution.frames_in_flight": "0"}, env={})
    assert strategy(cfg.execution).frames_in_flight == STRATEGIES["high"].frames_in_flight


def test_tune_allocator_serves_frame_sized_blocks_from_the_heap():
    """After tune_allocator, allocating and freeing 3 MB frames again and again faults no new pages
    (glibc's default maps each such block afresh and faults every page of it in)."""
    import subprocess
    import sys
    code = """
import resource, numpy as np
from render.memory import tune_allocator
def faults():
    m0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(40):
        a = np.empty(1_000_000 * 3 - 7, np.uint8); a[::4096] = 1; del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - m0
before = faults()
assert tune_allocator()
faults()
print(before, faults())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = map(int, out.stdout.split())
    assert before >= 40 and after < 10, (before, after)   # before: at least one fault per frame
