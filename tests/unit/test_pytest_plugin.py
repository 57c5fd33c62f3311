"""The pytest plugin: experiment files become test items, verdicts become pass/fail, and -n 2 has no cross-talk."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "fake_torchrun.py"


def exp_text(name: str, max_restarts: int) -> str:
    return f"""\
name: {name}
workload:
  command: [{sys.executable}, {FAKE}, --steps, "20", --step-sleep, "0.02"]
faults:
  - kind: kill-rank
    rank: 1
    trigger: {{at_step: 6}}
checks:
  - completes: {{max_restarts: {max_restarts}, min_step: 20}}
timeout_s: 60
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    exp = pytester.mkdir("experiments")
    (exp / "good-one.yaml").write_text(exp_text("good-one", 1))
    (exp / "good-two.yaml").write_text(exp_text("good-two", 2))
    (exp / "too-many-restarts.yaml").write_text(exp_text("too-many-restarts", 0))
    (exp / "typo.yaml").write_text(exp_text("typo", 1).replace("kill-rank", "kil-rank"))
    (pytester.path / "notes.yaml").write_text("not: an experiment\n")  # outside experiments/: not collected
    return pytester


def test_experiments_are_collected_and_judged(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("experiments", "-p", "no:cacheprovider", "--chaos-runs-dir", "runs")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "*completes: needed 1 restarts, more than the allowed 0*",
        "*typo.yaml:5 faults[[]0[]].kind: unknown fault 'kil-rank'*Did you mean 'kill-rank'?*",
    ])
    assert len(list((suite.path / "runs").iterdir())) == 3


def test_parallel_runs_do_not_collide(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("experiments", "-n", "2", "-p", "no:cacheprovider",
                                        "--chaos-runs-dir", "runs")
    result.assert_outcomes(passed=2, failed=2)
    run_dirs = sorted(p.name for p in (suite.path / "runs").iterdir())
    assert len(run_dirs) == len(set(run_dirs)) == 3


def test_a_known_failure_is_expected_only_exactly_as_recorded() -> None:
    from types import SimpleNamespace as NS

    from chaos.spec.experiment import KnownFailure
    from chaos.pytest_plugin import known_failure_matches

    known = KnownFailure(checks=["exactly_once", "matches_golden"], reason="reshuffled epoch", upstream="u/1",
                         signature={"exactly_once": r"\d+ duplicated", "matches_golden": "digests differ"})
    reasons = {"exactly_once": "44 duplicated (e.g. index 0 epoch 1)", "matches_golden": "final digests differ"}

    def report(**verdicts):
        return NS(checks=[NS(kind=k, verdict=v, reason=reasons.get(k, "")) for k, v in verdicts.items()],
                  revert_failures=[])

    ok, why = known_failure_matches(known, report(completes="pass", exactly_once="fail", matches_golden="fail"))
    assert ok and "reshuffled epoch" in why and "u/1" in why
    # Fixed upstream: the checks pass, which is news, not an expected failure.
    assert not known_failure_matches(known, report(completes="pass", exactly_once="pass", matches_golden="pass"))[0]
    # Another check failing too, or one that could not be judged, is not the recorded failure.
    assert not known_failure_matches(known, report(completes="fail", exactly_once="fail", matches_golden="fail"))[0]
    assert not known_failure_matches(known, report(completes="inconclusive", exactly_once="fail",
                                                   matches_golden="fail"))[0]
    assert not known_failure_matches(known, report(exactly_once="fail"))[0]
    # Issue 32 item 18: a new bug in the same check (exactly_once now loses samples) is news, not the known one.
    reasons["exactly_once"] = "4 missing (e.g. index 3 epoch 1)"
    ok, why = known_failure_matches(known, report(completes="pass", exactly_once="fail", matches_golden="fail"))
    assert not ok and "exactly_once failed otherwise ('4 missing" in why


def test_a_known_failure_without_a_signature_per_check_is_refused() -> None:
    from pydantic import ValidationError

    from chaos.spec.experiment import KnownFailure

    with pytest.raises(ValidationError, match="known_failure.signature has no pattern for matches_golden"):
        KnownFailure(checks=["exactly_once", "matches_golden"], reason="r", signature={"exactly_once": "dup"})
    with pytest.raises(ValidationError, match="not in known_failure.checks"):
        KnownFailure(checks=["exactly_once"], reason="r", signature={"exactly_once": "dup", "completes": "x"})
    with pytest.raises(ValidationError, match="not a regular expression"):
        KnownFailure(checks=["exactly_once"], reason="r", signature={"exactly_once": "(dup"})


def test_the_junit_xml_records_the_worker_count_beside_the_host_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    # The controller's session start, with a stand-in for pytest's junit writer: ci/bench/suite_cpu.py reads both.
    from types import SimpleNamespace

    from _pytest.junitxml import xml_key

    import suite_telemetry
    from suite_telemetry import HOST_SPEED_PROPERTY, WORKERS_PROPERTY, pytest_sessionstart

    recorded: list[tuple[str, object]] = []
    xml = SimpleNamespace(add_global_property=lambda name, value: recorded.append((name, value)))
    monkeypatch.setattr(suite_telemetry, "import_torch_cpu_s", lambda: 1.25)

    def session(numprocesses: object) -> SimpleNamespace:
        config = SimpleNamespace(option=SimpleNamespace(numprocesses=numprocesses), stash={xml_key: xml})
        return SimpleNamespace(config=config)

    pytest_sessionstart(session(3))
    assert recorded == [(WORKERS_PROPERTY, 3), (HOST_SPEED_PROPERTY, 1.25)]
    recorded.clear()
    pytest_sessionstart(session(None))  # no xdist: no worker count, the host speed still
    assert recorded == [(HOST_SPEED_PROPERTY, 1.25)]


def test_the_host_kubernetes_group_runs_on_one_worker(pytester: pytest.Pytester) -> None:
    """The suite sends every run on this host's one local Kubernetes to one worker (``--dist loadgroup``, the
    xdist_group the plugin sets): spread over workers they queue in the cluster's lock and hold the others idle.
    pytest 9.2 silently broke that grouping (pytest-dev/pytest-xdist#1386: the group rides on a nodeid suffix that
    pytest's structured node ids no longer take; pyproject pins pytest below 9.2): this says so if it breaks again."""
    pytester.makepyfile(test_grouped="""
        import os
        import pytest
        from chaos.pytest_plugin import HOST_KUBERNETES

        @pytest.mark.xdist_group(HOST_KUBERNETES)
        @pytest.mark.parametrize("i", range(6))
        def test_kube(i):
            print("WORKER", os.environ["PYTEST_XDIST_WORKER"], i)

        @pytest.mark.parametrize("i", range(6))
        def test_free(i):
            pass
    """)
    result = pytester.runpytest_subprocess("-n", "3", "--dist", "loadgroup", "-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=12)
    kube = [line for line in result.stdout.lines if "PASSED" in line and "test_kube[" in line]
    workers = {line.split("]")[0].strip("[") for line in kube}
    assert len(kube) == 6 and len(workers) == 1, "\n".join(kube)
    assert all("@" + "host-kubernetes" in line for line in kube), "\n".join(kube)
