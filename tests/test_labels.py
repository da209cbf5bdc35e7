"""One vocabulary and one order of sizes for every section (lmstudy.report.labels)."""

from __future__ import annotations

import pandas as pd
import pytest

from lmstudy.report import labels


@pytest.fixture
def config_order():
    labels.use_size_order(["small", "medium", "large", "xl", "2.7B"])
    yield
    labels.use_size_order([])


def test_sizes_follow_the_config_not_the_data(config_order):
    assert labels.size_order(["2.7B", "small", "2.7B", "medium"]) == ["small", "medium", "2.7B"]


def test_a_size_the_config_does_not_list_comes_last_as_seen(config_order):
    assert labels.size_order(["tiny", "xl", "oversized"]) == ["xl", "tiny", "oversized"]


def test_a_frame_sorts_by_the_config_order(config_order):
    frame = labels.order_sizes(pd.DataFrame({"size": ["2.7B", "large", "small"], "x": [1, 2, 3]}))
    assert list(frame.sort_values("size")["size"]) == ["small", "large", "2.7B"]


def test_without_a_config_order_sizes_keep_the_order_seen():
    assert labels.size_order(["b", "a", "b"]) == ["b", "a"]
