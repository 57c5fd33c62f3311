"""Reading the job's state from ``scontrol show job -o``: what the harness decides "over" and "exit code" from."""

from __future__ import annotations

import pytest

from chaos.runtime.shell import Shell
from chaos.slurm.control import JobState, SlurmControl, parse_record

RUNNING = ("JobId=7 JobName=chaos-abc123 UserId=root(0) GroupId=root(0) Priority=4294901757 "
           "JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 ExitCode=0:0 "
           "NodeList=node[0-1] Comment=two words here Command=/runs/x/slurm-job.sh")


def test_parse_record_keeps_values_with_spaces() -> None:
    rec = parse_record(RUNNING)
    assert rec["JobState"] == "RUNNING"
    assert rec["NodeList"] == "node[0-1]"
    assert rec["Comment"] == "two words here"
    assert rec["Command"] == "/runs/x/slurm-job.sh"


def test_running_job_is_not_finished() -> None:
    job = JobState.parse(RUNNING)
    assert (job.job_id, job.state, job.nodes, job.restarts) == ("7", "RUNNING", "node[0-1]", 0)
    assert job.running and not job.finished


@pytest.mark.parametrize("state,exit_code,expected", [
    ("COMPLETED", "0:0", 0),
    ("FAILED", "3:0", 3),
    ("CANCELLED", "0:15", 128 + 15),
    ("NODE_FAIL", "0:0", 1),  # a failure with no code of its own still fails
    ("TIMEOUT", "0:0", 1),
])
def test_exit_status(state: str, exit_code: str, expected: int) -> None:
    job = JobState.parse(RUNNING.replace("JobState=RUNNING", f"JobState={state}").replace("ExitCode=0:0",
                                                                                             f"ExitCode={exit_code}"))
    assert job.finished
    assert job.shell_exit_code() == expected


def test_completing_and_requeued_jobs_are_not_over() -> None:
    completing = JobState.parse(RUNNING.replace("JobState=RUNNING", "JobState=COMPLETED+COMPLETING"))
    assert completing.state == "COMPLETED" and "COMPLETING" in completing.flags
    assert not completing.finished, "nodes still completing: the job's processes may still be alive"
    requeued = JobState.parse(RUNNING.replace("JobState=RUNNING", "JobState=PENDING")
                              .replace("Restarts=0", "Restarts=1").replace("NodeList=node[0-1]", "NodeList=(null)"))
    assert not requeued.finished and requeued.restarts == 1 and requeued.nodes == ""


def test_a_preempted_job_that_slurm_will_requeue_is_not_over() -> None:
    preempted = JobState.parse(RUNNING.replace("JobState=RUNNING", "JobState=PREEMPTED"))
    assert preempted.requeue and not preempted.finished
    final = JobState.parse(RUNNING.replace("JobState=RUNNING", "JobState=PREEMPTED").replace("Requeue=1", "Requeue=0"))
    assert final.finished and final.shell_exit_code() == 1


def test_garbage_is_not_a_job() -> None:
    with pytest.raises(ValueError):
        JobState.parse("slurm_load_jobs error: Invalid job id specified")
    with pytest.raises(ValueError):
        JobState.parse("")


def test_commands_carry_the_clusters_conf_and_namespace() -> None:
    shell = Shell(dry_run=True)
    ctl = SlurmControl(shell, conf="/r/slurm/slurm.conf", prefix=("nsenter", "--net=/run/netns/sw"))
    res = ctl.run("scontrol", "ping")
    assert res.argv == ["nsenter", "--net=/run/netns/sw", "scontrol", "ping"]
    assert ctl.env == {"SLURM_CONF": "/r/slurm/slurm.conf"}
