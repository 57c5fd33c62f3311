"""The torchft target's bookkeeping: when the job is over while a replica group is down, and what a dry run says."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from chaos.faults.replica_down import ReplicaDownConfig
from chaos.targets.base import Node
from chaos.targets.torchft import Torchft, TorchftConfig


class _Proc:
    def __init__(self, code):
        self.code = code

    def poll(self):
        return self.code


def test_a_group_that_is_still_to_come_back_keeps_the_job_open() -> None:
    """The late joiner: rg0 finished while rg1 is down for a while; the job is not over until rg1 came back and
    ended too. A group taken down for good (lost, not returning) does not decide the job's exit code."""
    target = Torchft(TorchftConfig(replica_groups=2))
    target.nodes = [Node("rg0", 0, proc=_Proc(0)), Node("rg1", 1, proc=_Proc(-9), info={"lost": True, "returning": True})]
    assert target.exit_code() is None
    target.nodes[1].info["returning"] = False
    assert target.exit_code() == 0
    target.nodes[1] = Node("rg1", 1, proc=_Proc(None))
    assert target.exit_code() is None
    target.nodes[1] = Node("rg1", 1, proc=_Proc(1))
    assert target.exit_code() == 1


def test_configs_refuse_what_cannot_be_played() -> None:
    with pytest.raises(ValidationError):
        TorchftConfig(replica_groups=0)
    with pytest.raises(ValidationError, match="replica-down takes SIGKILL"):
        ReplicaDownConfig(group=1, signal="SIGSTOP")
    assert ReplicaDownConfig(group=1, signal="term").signal == "SIGTERM"
