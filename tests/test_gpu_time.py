"""The per-process GPU measures read from the profiler's events in memory equal what its trace holds.

Every measuring process records the GPU's busy time and kernels per step from one profiled step
(lmstudy.measure.gpu_time.gpu_measures). It reads the profiler's own events instead of writing a
Chrome trace and parsing it back (kernel_breakdown's way): these tests profile a real step, write
its trace too, and check that both ways give the same sum and the same count. On a CPU the events
are operators ("cpu_op"), on a GPU kernels, copies and sets: the same fields (the kind, the
duration), so what is checked here on operators is what a GPU run reads from kernels.
(tools/gpu_check_39.sh compares the two ways on a GPU.)
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from lmstudy.analyse.nsys.torch_trace import load_trace  # noqa: E402
from lmstudy.measure.gpu_time import GPU_ACTIVITIES, activity_totals, gpu_measures  # noqa: E402


def _profiled(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    x = torch.randn(32, 64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        model(x).sum().backward()
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    return prof.profiler.kineto_results.events(), load_trace(trace)


def test_the_events_in_memory_give_the_sum_and_count_the_trace_gives(tmp_path):
    events, trace = _profiled(tmp_path)
    ops = [e for e in trace if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    assert len(ops) > 5  # a real step: matmuls, the ReLU, the backward's operators
    total_ms, count = activity_totals(events, ("cpu_op",))
    assert count == len(ops)
    # The trace's durations are microseconds with nanosecond decimals: equal to the ns, op by op.
    assert total_ms == pytest.approx(sum(e["dur"] for e in ops) / 1e3, abs=1e-6 * len(ops))


def test_only_the_named_kinds_count(tmp_path):
    events, _ = _profiled(tmp_path)
    # A CPU profile has no kernel, copy or set: no GPU time, no kernels (not an operator's time).
    assert activity_totals(events, GPU_ACTIVITIES) == (0.0, 0)
    assert activity_totals(events, ("cpu_op",))[1] > 0


def test_events_that_do_not_say_their_kind_fall_back_to_the_trace():
    class Old:  # an event of a PyTorch without activity_type(): the trace path measures instead
        def duration_ns(self):
            return 1

    assert activity_totals([Old()]) is None


def test_a_cpu_step_has_no_gpu_measures():
    assert gpu_measures(lambda: None, torch.device("cpu")) == {"gpu_busy_ms": None, "kernels_per_step": None}
