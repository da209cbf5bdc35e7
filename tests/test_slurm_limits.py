"""A job over its partition's MaxTime is named before submission (issue 23, item 19); the
end-to-end case on a real cluster is tests/test_slurm.py's."""

from __future__ import annotations

import pytest

from lmstudy import slurm_limits


@pytest.mark.parametrize(("text", "minutes"), [
    ("infinite", None), ("UNLIMITED", None), ("n/a", None),
    ("30", 30), ("1:30", 1.5), ("2:00:00", 120), ("1-00:00:00", 1440), ("1-12", 2160), ("2-01:30", 2970),
])
def test_sinfo_time_limits_read_as_minutes(text, minutes):
    assert slurm_limits.minutes(text) == minutes


def test_the_first_job_over_its_partitions_limit_is_named_with_the_setting():
    limits = {"cpu": None, "gpu": 120.0}
    ok = [("time_model", "gpu", 100), ("report", "", 30)]
    assert slurm_limits.too_long(ok, limits, "cpu") == ""
    sentence = slurm_limits.too_long([*ok, ("time_model", "gpu", 240)], limits, "cpu")
    assert "time_model job with a time limit of 240 minutes on partition 'gpu'" in sentence
    assert "MaxTime is 120 minutes" in sentence and "lmstudy_max_runtime" in sentence
    # A job without a partition goes to the default one, whose limit applies.
    assert "partition 'cpu'" in slurm_limits.too_long([("report", "", 90)], {"cpu": 60.0}, "cpu")
