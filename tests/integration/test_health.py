"""The xid fault's refusals. The xid experiments themselves (a real DDP job, a real monitor in each rank,
the harness judging the action) run as items of `pytest experiments/`: their health_action check
asserts the action per XID (exit and restart for 13, exclusion and a relaunch without the device at
the smaller world size for 79, a checkpoint off the periodic schedule for 92 without a restart)."""

from pathlib import Path

import pytest

from chaos.spec.load import load_experiment
from chaos.run.runner import Runner

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


@pytest.mark.parametrize("sink", ["kmsg"])
def test_the_real_kernel_log_is_refused_without_opt_in(tmp_path: Path, sink: str) -> None:
    text = (EXPERIMENTS / "xid-13-restart.yaml").read_text().replace("sink: file", f"sink: {sink}")
    exp = load_experiment(EXPERIMENTS / "xid-13-restart.yaml", text=text)
    from chaos.errors import CapabilityError

    with pytest.raises(CapabilityError, match="allow_kmsg"):
        Runner(exp, runs_root=tmp_path).run()
