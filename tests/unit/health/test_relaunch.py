"""The relaunch policy: a launch that excluded a device is followed by a smaller one without it."""

from chaos.health.exclusions import add_exclusion
from chaos.health.relaunch import next_launch, relaunch
from tests.unit.health.runctx import make_run  # noqa: F401  (fixture)


def _exclude(run, device: int, attempt: str = "0.0") -> None:
    add_exclusion(run.run_dir / "excluded_devices.json", {"device": device, "code": 79, "attempt": attempt})


def test_no_exclusion_no_relaunch(make_run) -> None:
    assert next_launch(make_run(), 1) is None


def test_an_exclusion_in_this_launch_relaunches_without_the_device(make_run) -> None:
    run = make_run(nproc=4)
    _exclude(run, 2)
    change = next_launch(run, 1)
    assert change is not None and (change.nproc_per_node, change.visible) == (3, [0, 1, 3])
    relaunch(run, change)
    assert run.target.launches == [(1, 3, {"CUDA_VISIBLE_DEVICES": "0,1,3"})]
    # The next exclusion is counted against the devices still visible, and only once.
    _exclude(run, 3, attempt="1.0")
    change = next_launch(run, 1)
    assert change is not None and change.visible == [0, 1]
    assert [r["ev"] for r in run.log.records] == ["launch"]


def test_a_successful_exit_or_an_old_exclusion_does_not_relaunch(make_run) -> None:
    run = make_run()
    _exclude(run, 1)
    assert next_launch(run, 0) is None  # the job finished anyway
    run.launch_no = 1
    assert next_launch(run, 1) is None  # recorded by an earlier launch, already left out


def test_the_last_device_is_never_excluded_into_an_empty_job(make_run) -> None:
    run = make_run(nproc=1)
    _exclude(run, 0)
    assert next_launch(run, 1) is None


def test_user_visible_devices_are_respected(make_run) -> None:
    run = make_run(nproc=2, env='{CUDA_VISIBLE_DEVICES: "4,6"}')
    _exclude(run, 6)
    assert next_launch(run, 1).visible == [4]  # type: ignore[union-attr]
