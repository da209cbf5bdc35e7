"""Out of memory is a result: one helper tells it from a failure, for every measuring job."""

from __future__ import annotations

import pytest
import torch

from lmstudy.measure.devices import is_out_of_memory, out_of_memory_is_a_result


def test_out_of_memory_ends_the_block_as_a_result():
    with out_of_memory_is_a_result(torch.device("cpu")) as oom:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail")
    assert oom
    assert oom.fields() == {"status": "OOM", "error": "CUDA out of memory. Tried to allocate 2.00 GiB"}


def test_a_real_failed_allocation_on_the_cpu_is_out_of_memory():
    with out_of_memory_is_a_result() as oom:
        torch.empty(2**62, dtype=torch.uint8)
    assert oom and is_out_of_memory(RuntimeError(oom.message)), oom.message


def test_any_other_error_is_raised():
    with pytest.raises(ValueError), out_of_memory_is_a_result():
        raise ValueError("a bug")


def test_a_block_that_runs_through_is_no_result():
    with out_of_memory_is_a_result() as oom:
        pass
    assert not oom and oom.message is None


def test_what_was_measured_before_goes_along():
    error = torch.OutOfMemoryError("out of memory")
    error.trajectory = ([0.1, 0.2], [(1, 2), (3, 4)])
    with out_of_memory_is_a_result() as oom:
        raise error
    assert oom.trajectory == ([0.1, 0.2], [(1, 2), (3, 4)])
