"""The loop over torchdata's StatefulDataLoader without its state in the checkpoint: the resume starts the
epoch over, which ``exactly_once`` must catch (experiments/stateful-loader-rank-kill.yaml is the loop that
saves it, and passes)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(__import__("importlib").util.find_spec("torchdata") is None,
                                 reason='needs torchdata: pip install -e ".[stateful]" (scripts/setup.sh does)')]


def test_resuming_without_the_loaders_state_trains_samples_twice(tmp_path: Path) -> None:
    from chaos.spec.load import load_experiment
    from chaos.run.runner import Runner

    doc = yaml.safe_load((ROOT / "experiments" / "stateful-loader-rank-kill.yaml").read_text())
    doc["name"] = "stateful-loader-no-state"
    doc["workload"]["script"] = str(ROOT / "workloads" / "stateful_loader.py")
    doc["workload"]["args"]["no_loader_state"] = True
    doc["checks"] = [{"completes": {"min_restarts": 1}}, {"exactly_once": {}}]
    path = tmp_path / "no-state.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    report = Runner(load_experiment(path), runs_root=tmp_path / "runs", golden=None).run()
    v = {r.kind: r for r in report.checks}
    detail = "\n".join(f"{r.kind}: {r.verdict} {r.reason}" for r in report.checks)
    assert v["completes"].verdict == "pass", detail
    assert v["exactly_once"].verdict == "fail" and "duplicated" in v["exactly_once"].reason, detail
    assert report.exit_code == 1
