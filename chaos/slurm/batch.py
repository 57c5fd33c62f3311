"""The job's two scripts, kept in the run directory so a user can read and resubmit exactly what ran.

``slurm-job.sh`` is the sbatch script: it names the attempt (CHAOS_LAUNCH grows with
SLURM_RESTART_COUNT, so a requeued job's events never mix with the failed one's), picks the
rendezvous host (the allocation's first node) and starts one ``slurm-node.sh`` per node with srun.
``slurm-node.sh`` runs torchrun on its node with c10d rendezvous on that host.

The torchrun command line is the one every other target uses (chaos.runtime.launch.workload_argv), built
with placeholders for what only the node knows at run time (its address, whether it is the
rendezvous host), which the script fills from Slurm's variables.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from chaos.runtime.launch import Rendezvous

# Placeholders survive shlex.join unquoted (only [\w@%+=:,./-]) and become shell expansions.
_SLOTS = {"@RDZV_HOST@": "${RDZV_HOST}", "@LOCAL_ADDR@": "${LOCAL_ADDR}", "@IS_HOST@": "${IS_HOST}",
          "@RDZV_ID@": "${CHAOS_RDZV_ID}", "@NODE_RANK@": "${SLURM_NODEID}"}


def node_rendezvous(*, nnodes: str, port: int, rdzv_conf: dict[str, str]) -> Rendezvous:
    """The rendezvous every node's torchrun gets, with the per-node parts left as placeholders."""
    return Rendezvous(standalone=False, host="@RDZV_HOST@", port=port, nnodes=nnodes,
                      node_rank="@NODE_RANK@",  # type: ignore[arg-type]  # filled by the node script
                      run_id="@RDZV_ID@", local_addr="@LOCAL_ADDR@",
                      rdzv_conf={"is_host": "@IS_HOST@", **rdzv_conf})


def fill(argv: list[str]) -> str:
    """``argv`` as a shell command line whose placeholders expand on the node."""
    line = shlex.join(argv)
    for slot, expansion in _SLOTS.items():
        line = line.replace(slot, expansion)
    return line


PREEMPTION_WRAPPER = """\
# Slurm preempts with SIGTERM to every task, then SIGKILL after the partition's GraceTime, and
# requeues only a job it had to kill: one that saves and exits within the grace (what a good
# workload does) would end FAILED and never run again. So, as submitit and Lightning do, the job
# requeues itself once its ranks have stopped after a SIGTERM, unless it was cancelled.
term=
trap 'term=1; kill -TERM "$child" 2>/dev/null' TERM
{command} &
child=$!
set +e
wait "$child"; rc=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; rc=$?; done
if [ -n "$term" ]; then
  if [ "${{SLURM_NODEID:-0}}" = 0 ] && scontrol show job -o "$SLURM_JOB_ID" | grep -q 'JobState=RUNNING '; then
    echo "chaos: node $node stopped after SIGTERM (exit $rc): scontrol requeue $SLURM_JOB_ID"
    scontrol requeue "$SLURM_JOB_ID" || true
  fi
  exit 143
fi
exit "$rc"
"""


@dataclass(frozen=True)
class BatchJob:
    """Everything the two scripts say; ``job_script``/``node_script`` render them."""

    name: str
    nodes: str
    """sbatch --nodes: ``N`` or ``MIN-MAX`` (elastic: Slurm may start the job on fewer after a loss)."""
    output: str
    chdir: str
    node_script_path: str
    launch: int
    rid: str
    command: list[str]
    """The node's torchrun argv, with placeholders (see ``node_rendezvous``)."""
    addresses: dict[str, str] = field(default_factory=dict)
    """Node name -> address on the run's network (the local cluster); empty: use the node's host name."""
    ifnames: dict[str, str] = field(default_factory=dict)
    """Node name -> interface gloo must use (GLOO_SOCKET_IFNAME); empty: gloo's own choice."""
    sbatch_args: list[str] = field(default_factory=list)

    def job_script(self) -> str:
        directives = [f"--job-name={self.name}", f"--nodes={self.nodes}", "--ntasks-per-node=1",
                      "--cpus-per-task=1", "--requeue", f"--output={self.output}", f"--chdir={self.chdir}",
                      *self.sbatch_args]
        return "\n".join([
            "#!/bin/bash",
            "# Written by the chaos harness. Resubmit by hand with: SLURM_CONF=<the run's slurm.conf> sbatch <this file>",
            *[f"#SBATCH {shlex.quote(d)}" for d in directives],
            "set -euo pipefail",
            "# One attempt per Slurm (re)start: a requeued job's events never mix with the failed one's.",
            f"export CHAOS_LAUNCH=$(( {self.launch} + ${{SLURM_RESTART_COUNT:-0}} ))",
            'export CHAOS_RDZV_HEAD="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
            f'export CHAOS_RDZV_ID="chaos-{self.rid}-${{SLURM_JOB_ID}}-${{SLURM_RESTART_COUNT:-0}}"',
            'echo "chaos: job $SLURM_JOB_ID restart ${SLURM_RESTART_COUNT:-0} on $SLURM_JOB_NODELIST,'
            ' rendezvous on $CHAOS_RDZV_HEAD"',
            # Without --overlap a fault's `srun --overlap --jobid` step could not join the running one.
            f"exec srun --overlap --ntasks-per-node=1 {shlex.quote(self.node_script_path)}",
            "",
        ])

    def node_script(self) -> str:
        def table(name: str, values: dict[str, str]) -> str:
            body = " ".join(f"[{shlex.quote(k)}]={shlex.quote(v)}" for k, v in values.items())
            return f"declare -A {name}=({body})"

        lines = ["#!/bin/bash", "# One node of the job (started by srun from slurm-job.sh).", "set -euo pipefail",
                 'node="$SLURMD_NODENAME"', 'export CHAOS_HOST="$node"']
        if self.addresses:
            lines += [table("ADDR", self.addresses),
                      'RDZV_HOST="${ADDR[$CHAOS_RDZV_HEAD]}"', 'LOCAL_ADDR="${ADDR[$node]}"']
        else:
            # A cluster of the user's: the address Slurm itself reaches a node at (NodeAddr), which
            # need not be what its name resolves to; the name when the record has none.
            lines += ['node_addr() { local a; a="$(scontrol show node -o "$1" 2>/dev/null | grep -o \'NodeAddr=[^ ]*\' | cut -d= -f2 || true)";'
                      ' echo "${a:-$1}"; }',
                      'RDZV_HOST="$(node_addr "$CHAOS_RDZV_HEAD")"', 'LOCAL_ADDR="$(node_addr "$node")"']
        if self.ifnames:
            lines += [table("IFNAME", self.ifnames),
                      "# gloo resolves the host name otherwise, which is not this node's address.",
                      'export GLOO_SOCKET_IFNAME="${IFNAME[$node]}"']
        lines += ['IS_HOST=false; [ "$node" = "$CHAOS_RDZV_HEAD" ] && IS_HOST=true',
                  *PREEMPTION_WRAPPER.format(command=fill(self.command)).splitlines(), ""]
        return "\n".join(lines)
