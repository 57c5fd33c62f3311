"""tests/durations.py: the longest-first order of the suite, from a junit XML of a real pytest run."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import durations  # noqa: E402

TESTS = """
import pytest

class TestGroup:
    def test_in_class(self):
        pass

@pytest.mark.parametrize("n", [1, "a::b c"])
def test_param(n):
    pass

def test_skipped():
    pytest.skip("not here")
"""


def test_the_key_of_a_node_is_what_junit_calls_the_same_test(pytester: pytest.Pytester) -> None:
    pytester.mkpydir("pkg")
    (pytester.path / "pkg" / "test_mod.py").write_text(TESTS)
    xml = pytester.path / "out.xml"
    pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--junitxml={xml}")
    collected = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q")
    nodeids = [line for line in collected.outlines if "::" in line]
    assert len(nodeids) == 4, collected.outlines
    spelled = {f"{c.get('classname')}::{c.get('name')}" for c in ET.parse(xml).iter("testcase")}
    # A parameter with '::' in it is the one spelling that cannot be told apart; every other agrees.
    plain = [n for n in nodeids if "a::b" not in n]
    assert {durations.junit_key(n) for n in plain} <= spelled
    assert durations.junit_key("pkg/test_mod.py::TestGroup::test_in_class") == "pkg.test_mod.TestGroup::test_in_class"
    assert durations.junit_key("experiments/x.yaml::x") == "experiments.x.yaml::x"


def test_slowest_first_unknown_guessed_by_kind_ties_in_collection_order() -> None:
    nodeids = ["tests/unit/test_a.py::test_1", "tests/unit/test_a.py::test_2", "experiments/new.yaml::new",
               "tests/integration/test_b.py::test_new", "experiments/gameday.yaml::gameday",
               "tests/unit/test_a.py::test_slow_unit"]
    known = {"experiments.gameday.yaml::gameday": 100.0, "tests.unit.test_a::test_slow_unit": 12.0,
             "tests.unit.test_a::test_2": 0.0}
    order = [nodeids[i] for i in durations.longest_first(nodeids, known)]
    assert order == ["experiments/gameday.yaml::gameday", "experiments/new.yaml::new",
                     "tests/unit/test_a.py::test_slow_unit", "tests/integration/test_b.py::test_new",
                     "tests/unit/test_a.py::test_1", "tests/unit/test_a.py::test_2"]


def test_written_from_junit_skipped_and_short_unit_tests_left_out(tmp_path: Path, monkeypatch) -> None:
    xml = tmp_path / "s.xml"
    xml.write_text('<testsuites><testsuite name="p">'
                   '<testcase classname="experiments.a.yaml" name="a" time="40.04"/>'
                   '<testcase classname="tests.integration.test_b" name="fast" time="0.2"/>'
                   '<testcase classname="tests.unit.test_c" name="quick" time="0.3"/>'
                   '<testcase classname="tests.unit.test_c" name="slow" time="2.26"/>'
                   '<testcase classname="tests.unit.test_c" name="skip" time="0"><skipped/></testcase>'
                   '</testsuite></testsuites>')
    out = tmp_path / "durations.json"
    monkeypatch.setattr(durations, "FILE", out)
    assert durations.main([str(xml)]) == 0
    assert json.loads(out.read_text()) == {"experiments.a.yaml::a": 40.0, "tests.integration.test_b::fast": 0.2,
                                           "tests.unit.test_c::slow": 2.3}
    assert durations.load(out)["experiments.a.yaml::a"] == 40.0


def test_an_unreadable_file_orders_by_kind_alone(tmp_path: Path) -> None:
    bad = tmp_path / "durations.json"
    bad.write_text("{not json")
    assert durations.load(bad) == {} and durations.load(tmp_path / "missing.json") == {}
    for text in ("[1, 2]", '{"a": "slow"}', '{"a": null}'):
        bad.write_text(text)
        assert durations.load(bad) == {}, text


def test_an_xdist_group_suffix_is_not_part_of_the_key() -> None:
    """--dist loadgroup names a grouped test ``...::test_x@group``: its duration is still the test's."""
    assert durations.junit_key("tests/integration/test_k.py::test_x@host-kubernetes") == \
        "tests.integration.test_k::test_x"
    assert durations.junit_key("tests/unit/test_a.py::test_y[a@b]") == "tests.unit.test_a::test_y[a@b]"
