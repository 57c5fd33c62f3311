"""The slurm target's two modes: what each accepts, and what a user's cluster refuses before launch."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from chaos.errors import CapabilityError
from chaos.faults.preempt import PreemptConfig
from chaos.targets.slurm import Slurm
from chaos.targets.slurm_config import REFUSED_ON_EXISTING, SlurmConfig


def test_existing_needs_a_shared_dir() -> None:
    with pytest.raises(ValidationError, match="needs shared_dir"):
        SlurmConfig(cluster="existing")
    c = SlurmConfig(cluster="existing", shared_dir="/shared", partition="staging", account="ml", qos="high",
                    time="00:20:00", term_before_end_s=120, sbatch_args=["--gres=gpu:8"], nodes=1)
    assert c.sbatch_options() == ["--partition=staging", "--account=ml", "--qos=high", "--time=00:20:00",
                                  "--signal=TERM@120", "--gres=gpu:8"]


@pytest.mark.parametrize("cfg, field", [
    ({"cluster": "existing", "shared_dir": "/s", "spare_nodes": 1}, "spare_nodes"),
    ({"cluster": "existing", "shared_dir": "/s", "requeue_delay_s": 30}, "requeue_delay_s"),
    ({"cluster": "local", "partition": "debug"}, "partition"),
    ({"partition": "debug", "shared_dir": "/s"}, "partition, shared_dir"),
])
def test_a_field_of_the_other_mode_is_an_error_naming_it(cfg, field) -> None:
    with pytest.raises(ValidationError, match=f"{field} only apply to cluster"):
        SlurmConfig(**cfg)


def test_the_local_cluster_sets_nothing_for_the_users_cluster() -> None:
    assert SlurmConfig().sbatch_options() == []
    assert Slurm(SlurmConfig()).partition == "chaos"


@pytest.mark.parametrize("kind", sorted(REFUSED_ON_EXISTING))
def test_faults_on_the_cluster_itself_are_refused_on_a_users_cluster(kind: str) -> None:
    target = Slurm(SlurmConfig(cluster="existing", shared_dir="/s"))
    with pytest.raises(CapabilityError, match=f"fault {kind} on an existing cluster"):
        target.admit(None, kind, None)  # type: ignore[arg-type]
    Slurm(SlurmConfig()).admit(None, kind, None)  # type: ignore[arg-type]  # the local cluster is the run's own


def test_preempt_on_a_users_cluster_needs_its_partition_and_leaves_gracetime_alone() -> None:
    bare = Slurm(SlurmConfig(cluster="existing", shared_dir="/s"))
    with pytest.raises(CapabilityError, match="preempt_partition"):
        bare.admit(None, "preempt", PreemptConfig())  # type: ignore[arg-type]
    target = Slurm(SlurmConfig(cluster="existing", shared_dir="/s", preempt_partition="urgent"))
    target.admit(None, "preempt", PreemptConfig())  # type: ignore[arg-type]
    with pytest.raises(CapabilityError, match="GraceTime"):
        target.admit(None, "preempt", PreemptConfig(grace_s=30))  # type: ignore[arg-type]


def test_drain_without_operator_rights_is_refused_naming_the_permission(monkeypatch) -> None:
    """A non-root user who is neither the SlurmUser nor an AdminLevel Operator cannot drain nodes."""
    import shutil as _shutil

    from chaos.runtime.shell import CommandResult

    target = Slurm(SlurmConfig(cluster="existing", shared_dir="/s"))

    class FakeControl:
        def run(self, *cmd, **kw):
            if cmd[:3] == ("scontrol", "show", "config"):
                return CommandResult(list(cmd), 0, "SlurmUser               = slurm(64030)\n", "")
            return CommandResult(list(cmd), 0, "None\n", "")  # sacctmgr: AdminLevel None

    monkeypatch.setattr("os.geteuid", lambda: 4242)
    monkeypatch.setattr("pwd.getpwuid", lambda uid: type("P", (), {"pw_name": "alice"})())
    monkeypatch.setattr(target, "_control", lambda run: FakeControl())
    monkeypatch.setattr(_shutil, "which", lambda name: f"/usr/bin/{name}")
    with pytest.raises(CapabilityError, match="operator rights.*alice has none"):
        target.admit(None, "xid", None)  # type: ignore[arg-type]
