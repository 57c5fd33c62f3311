"""The baseline gate's host-speed scaling (chaos.report.baseline, issue 56 item 7): only what the host's speed
moves is scaled, and scaling may excuse a slower host but never condemn a faster one.

These sit beside the health gate's tests because this is the CI gate's own rule; chaos.report.baseline's general
tests are in tests/unit/report/test_baseline.py.
"""

from __future__ import annotations

import pytest

from chaos.report.baseline import build_baseline, compare, markdown_summary
from chaos.report.journal import Journal


def run(probe_s: float | None, path: str = "runs/x", wall_s: float = 30.0, held: tuple[float, float] | None = None,
        **recovery: float) -> Journal:
    """One passing run of a hang experiment: ``recovery`` overrides its figures; ``held`` a timed fault's
    (t_inject, t_release)."""
    figures = {"detect_s": 10.0, "restart_s": 2.0, "resume_s": 14.0, "regain_s": 14.5, "lost_steps": 0, **recovery}
    t_inject, t_release = held or (1.0, None)
    return Journal.model_validate({
        "experiment": "nccl-hang", "exit_code": 0, "wall_s": wall_s, "run_dir": path,
        "host_speed": {} if probe_s is None else {"probe_s": probe_s},
        "faults": [{"index": 0, "kind": "hang", "label": "hang#0", "t_inject": t_inject, "t_release": t_release,
                    "recovery": figures}],
        "checkpoints": {"saves": 4, "save_s_median": 0.04, "bytes_median": 1000}})


def change(result, figure: str):
    return next(c for c in result.changes if c.figure == figure)


def test_issue_56_a_hangs_detect_s_on_a_faster_host_is_no_regression() -> None:
    """Issue 56's numbers: detect_s 10.3 s measured on a host 1.5x faster, against a bound of 13.1 s. The hang is
    detected by the collective's timeout, which no host speed moves: scaled, 10.3 became 15.5 and FAILed the gate."""
    base = build_baseline([run(0.15, detect_s=10.48, path=p) for p in "abc"])
    result = compare("nccl-hang", [run(0.10, detect_s=10.3)], base)
    detect = change(result, "hang#0.detect_s")
    assert detect.bound == pytest.approx(13.1)
    assert "1.50x faster" in result.speed
    assert detect.now == pytest.approx(10.3), "a timeout's figure is compared as measured, never scaled"
    assert not detect.regressed and result.regressions == [], [c.describe() for c in result.regressions]


def test_a_figure_no_worse_than_its_baseline_as_measured_never_regresses_on_a_faster_host() -> None:
    """A CPU-bound figure is scaled up on a faster host; the same restart as the baseline's, as measured, must
    not FAIL because the host got faster (wall_s too: it holds the fault's duration)."""
    base = build_baseline([run(0.15, restart_s=4.0, wall_s=30.0, path=p) for p in "abc"])
    result = compare("nccl-hang", [run(0.10, restart_s=4.0, wall_s=29.0)], base)
    restart = change(result, "hang#0.restart_s")
    assert restart.now == pytest.approx(6.0) and restart.measured == pytest.approx(4.0)
    assert restart.now > restart.bound == pytest.approx(5.0)
    assert result.regressions == [], [c.describe() for c in result.regressions]
    md = markdown_summary([result])
    assert "| nccl-hang | hang#0.restart_s | 6 | 4 | +50 % | ok |" in md
    assert "hang#0.restart_s is over its bound only when scaled (6 > 5); ok as measured (4 within 5)" in md


def test_a_scaled_cpu_figure_still_regresses_when_truly_worse() -> None:
    """The other direction: the fix must not make a false PASS. Guards existing behaviour."""
    base = build_baseline([run(0.10, restart_s=2.0, path=p) for p in "abc"])
    # Equal speed, a restart 3 s slower: REGRESSED.
    equal = compare("nccl-hang", [run(0.10, restart_s=5.0)], base)
    assert "hang#0.restart_s" in {c.figure for c in equal.regressions}
    # A slower host (1.3x): scaled down, a real regression is still over the bound.
    slower = compare("nccl-hang", [run(0.13, restart_s=5.0 * 1.3)], base)
    assert change(slower, "hang#0.restart_s").now == pytest.approx(5.0)
    assert "hang#0.restart_s" in {c.figure for c in slower.regressions}
    # A faster host (1.5x): worse as measured and at the baseline's speed: REGRESSED.
    faster = compare("nccl-hang", [run(0.10 / 1.5, restart_s=4.0)], base)
    assert "hang#0.restart_s" in {c.figure for c in faster.regressions}


def test_a_slower_host_does_not_excuse_a_longer_timeout() -> None:
    """A wait is not scaled down either: a hang detected 4 s later (a longer timeout) on a host 1.4x slower was
    scaled back under its bound, a false PASS."""
    base = build_baseline([run(0.10, detect_s=10.0, path=p) for p in "abc"])
    result = compare("nccl-hang", [run(0.14, detect_s=14.0, resume_s=14.0 * 1.4)], base)
    assert change(result, "hang#0.detect_s").now == pytest.approx(14.0)
    assert {c.figure for c in result.regressions} == {"hang#0.detect_s"}


def test_wall_s_scales_all_but_a_timed_faults_held_time() -> None:
    """A timed fault held for 20 s is 20 s on any host: only the rest of wall_s is scaled."""
    base = build_baseline([run(0.10, wall_s=30.0, held=(1.0, 21.0), path=p) for p in "abc"])
    slower = compare("nccl-hang", [run(0.15, wall_s=20.0 + 10.0 * 1.5, held=(1.0, 21.0))], base)
    assert change(slower, "wall_s").now == pytest.approx(30.0)
    assert slower.regressions == []
    # The held time itself grew by 10 s (a longer duration_s): the slower host does not hide it.
    longer = compare("nccl-hang", [run(0.15, wall_s=30.0 + 10.0 * 1.5, held=(1.0, 31.0))], base)
    assert "wall_s" in {c.figure for c in longer.regressions}


def test_the_report_names_the_figures_compared_as_measured() -> None:
    base = build_baseline([run(0.15, path=p, held=(1.0, 21.0), requeue_s=12.0) for p in "abc"])
    result = compare("nccl-hang", [run(0.10, held=(1.0, 21.0), requeue_s=12.0)], base)
    for text in (result.speed, markdown_summary([result])):
        assert "as measured" in text
        assert "hang#0.detect_s" in text and "hang#0.requeue_s" in text
        assert "wall_s" in text  # its held time
        assert "hang#0.restart_s" not in text.split("as measured", 1)[1].split("\n", 1)[0]


def test_every_timing_figure_is_classified_and_an_unknown_one_is_compared_as_measured() -> None:
    from chaos.report.baseline import RECOVERY, SCALED, UNSCALED, scales

    for metric in [m for m in RECOVERY if m.endswith("_s")] + ["wall_s", "badput_s", "save_s"]:
        assert (metric in SCALED) != (metric in UNSCALED), metric
    assert scales("hang#0.restart_s") and scales("ckpt.save_s") and scales("badput_s")
    assert not scales("hang#0.detect_s") and not scales("hang#0.requeue_s")
    assert not scales("hang#0.some_new_wait_s"), "unknown: compared as measured"
    assert not scales("ckpt.bytes") and not scales("hang#0.lost_steps")
