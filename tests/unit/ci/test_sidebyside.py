"""ci/bench/sidebyside.py: the order alternates trial by trial, and each figure gets both spreads and their ratio."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("sidebyside", ROOT / "ci" / "bench" / "sidebyside.py")
sidebyside = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sidebyside)


def test_which_setting_goes_first_alternates() -> None:
    order: list[bool] = []
    runs = sidebyside.alternate(3, lambda setting: (order.append(setting), (1.0,))[1])
    assert order == [True, False, False, True, True, False]
    assert len(runs[True]) == len(runs[False]) == 3


def test_columns_are_each_figures_spreads_and_the_ratio_of_medians() -> None:
    runs = {True: [(1.0, 10.0), (3.0, 30.0), (2.0, 20.0)], False: [(4.0, 5.0), (4.0, 5.0), (4.0, 5.0)]}
    assert sidebyside.columns(runs) == ["2.00 (1.00-3.00)", "4.00 (4.00-4.00)", "0.50",
                                       "20.00 (10.00-30.00)", "5.00 (5.00-5.00)", "4.00"]
    assert sidebyside.columns(runs, digits=1)[0] == "2.0 (1.0-3.0)"
