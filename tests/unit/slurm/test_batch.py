"""The job's scripts: valid bash, the attempt per requeue, the rendezvous on the allocation's first node."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from chaos.slurm.batch import BatchJob, fill, node_rendezvous
from chaos.slurm.minicluster import ClusterNode, ClusterSpec


def _job(tmp: Path, **kw) -> BatchJob:
    rdzv = node_rendezvous(nnodes="2", port=29400, rdzv_conf={"last_call_timeout": "2"})
    argv = ["python", "-m", "torch.distributed.run", "--rdzv-endpoint", f"{rdzv.host}:{rdzv.port}",
            "--rdzv-id", rdzv.run_id, "--local-addr", str(rdzv.local_addr), "--node-rank", str(rdzv.node_rank),
            "--rdzv-conf", ",".join(f"{k}={v}" for k, v in rdzv.rdzv_conf.items()), "train.py", "--name", "a b"]
    defaults = dict(name="chaos-abc123", nodes="2", output=str(tmp / "slurm-%j.out"), chdir=str(tmp),
                    node_script_path=str(tmp / "slurm-node.sh"), launch=0, rid="abc123", command=argv,
                    addresses={"node0": "10.1.2.10", "node1": "10.1.2.11"},
                    ifnames={"node0": "chnabc123n0", "node1": "chnabc123n1"})
    defaults.update(kw)
    return BatchJob(**defaults)


def test_placeholders_become_node_side_expansions() -> None:
    line = fill(["torchrun", "--rdzv-endpoint", "@RDZV_HOST@:29400", "--rdzv-conf", "is_host=@IS_HOST@", "x y"])
    assert line == "torchrun --rdzv-endpoint ${RDZV_HOST}:29400 --rdzv-conf is_host=${IS_HOST} 'x y'"


def test_scripts_are_valid_bash(tmp_path: Path) -> None:
    job = _job(tmp_path)
    for name, text in (("job.sh", job.job_script()), ("node.sh", job.node_script())):
        (tmp_path / name).write_text(text)
        res = subprocess.run(["bash", "-n", str(tmp_path / name)], capture_output=True, text=True)
        assert res.returncode == 0, f"{name}: {res.stderr}\n{text}"


def test_job_script_requeues_and_names_each_restart_its_own_attempt(tmp_path: Path) -> None:
    text = _job(tmp_path, launch=2, sbatch_args=["--time=00:10:00"]).job_script()
    assert "#SBATCH --requeue" in text and "#SBATCH --nodes=2" in text and "#SBATCH --time=00:10:00" in text
    assert "export CHAOS_LAUNCH=$(( 2 + ${SLURM_RESTART_COUNT:-0} ))" in text
    assert "srun --overlap" in text


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_node_script_resolves_each_node(tmp_path: Path) -> None:
    """Run the node script with Slurm's variables and `echo` in place of torchrun: what each node would exec."""
    job = _job(tmp_path, command=["echo", "@RDZV_HOST@", "@LOCAL_ADDR@", "@IS_HOST@", "@RDZV_ID@", "@NODE_RANK@"])
    script = tmp_path / "node.sh"
    script.write_text(job.node_script())
    out = {}
    for node, nodeid in (("node0", "0"), ("node1", "1")):
        env = {**os.environ, "SLURMD_NODENAME": node, "SLURM_NODEID": nodeid, "CHAOS_RDZV_HEAD": "node0",
               "CHAOS_RDZV_ID": "chaos-abc123-7-0"}
        res = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=True)
        out[node] = res.stdout.split()
    assert out["node0"] == ["10.1.2.10", "10.1.2.10", "true", "chaos-abc123-7-0", "0"]
    assert out["node1"] == ["10.1.2.10", "10.1.2.11", "false", "chaos-abc123-7-0", "1"]


def test_cluster_conf_is_the_runs_own(tmp_path: Path) -> None:
    spec = ClusterSpec(name="chaosabc123", controller_host="vm", controller_address="10.1.2.1",
                       nodes=(ClusterNode("node0", "10.1.2.10", "chaos-abc123-n0"),),
                       state=tmp_path / "state", logs=tmp_path / "logs", munge_socket=tmp_path / "state/munge/s",
                       requeue_delay_s=7)
    conf = spec.render()
    assert "SlurmctldHost=vm(10.1.2.1)" in conf
    assert f"AuthInfo=socket={tmp_path / 'state/munge/s'},cred_expire=7" in conf
    assert "NodeName=node0 NodeAddr=10.1.2.10" in conf
    settings = [line for line in conf.splitlines() if not line.startswith("#")]
    assert not [x for x in settings if "/etc/" in x], "nothing of the host's own Slurm configuration may be used"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_node_script_on_a_users_cluster_uses_slurms_node_addresses(tmp_path: Path) -> None:
    """No addresses of the run's own (cluster: existing): each node's NodeAddr, from scontrol, or its name."""
    job = _job(tmp_path, addresses={}, ifnames={}, command=["echo", "@RDZV_HOST@", "@LOCAL_ADDR@", "@IS_HOST@"])
    script = tmp_path / "node.sh"
    script.write_text(job.node_script())
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text('#!/bin/sh\n[ "$4" = gpu-a ] && echo "NodeName=gpu-a Arch=x86_64 NodeAddr=10.9.0.1 '
                                   'NodeHostName=gpu-a"\nexit 0\n')
    (fake / "scontrol").chmod(0o755)
    out = {}
    for node, nodeid in (("gpu-a", "0"), ("gpu-b", "1")):
        env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "SLURMD_NODENAME": node, "SLURM_NODEID": nodeid,
               "CHAOS_RDZV_HEAD": "gpu-a", "CHAOS_RDZV_ID": "x"}
        res = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=True)
        out[node] = res.stdout.split()
    assert out["gpu-a"] == ["10.9.0.1", "10.9.0.1", "true"]
    assert out["gpu-b"] == ["10.9.0.1", "gpu-b", "false"]  # no NodeAddr in its record: its name
    assert "GLOO_SOCKET_IFNAME" not in job.node_script()


def test_a_standalone_cluster_takes_free_ports_on_the_hosts_network(tmp_path: Path) -> None:
    from chaos.slurm.minicluster import standalone_spec

    spec = standalone_spec(tmp_path, "staging", node="stage0")
    conf = spec.render()
    assert f"SlurmctldPort={spec.ctld_port}" in conf and f"SlurmdPort={spec.slurmd_port}" in conf
    assert spec.ctld_port != 6817 and spec.nodes[0].netns is None
    assert "NodeName=stage0 NodeAddr=127.0.0.1" in conf
