"""Reference DDP workload under NVIDIA Resiliency Extension's in-process restart (``inprocess.Wrapper``).

    torchrun --standalone --nproc-per-node 2 --max-restarts 1 workloads/nvrx_inprocess.py --steps 60 --ckpt-every 10

The trainkit loop (ddp.py's) runs inside ``nvidia_resiliency_ext.inprocess.Wrapper``. When a rank raises (a failed
collective, an error in its step), the wrapper interrupts every rank, tears the process group down and calls the
loop again in the same processes: the ranks join a new process group, through a store whose keys carry the
wrapper's iteration (NVRx's optimal example: one base store for the job, a prefix per iteration, or the second
iteration's rendezvous reads the first one's keys), and resume from the last checkpoint. No process is restarted;
torchrun's own restart is the escalation when the in-process path gives up (the wrapper's hard timeout). Each
re-entry is reported (``chaos.integrations.nvrx.InProcess``) with its iteration and the exception that caused it.
On gloo the healthy rank is not interrupted inside its collective (NVRx aborts only NCCL's), so it waits out
``pg_timeout_s`` before it restarts: keep that short.
"""

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # trainkit, from any cwd
if importlib.util.find_spec("chaos") is None:
    sys.path.insert(1, str(HERE.parent))  # chaos.sdk from the source tree when not installed

from trainkit import startup  # noqa: E402

startup.pause()  # before torch is imported; Trainer.run resumes it once the model is wrapped

from dataclasses import dataclass  # noqa: E402
from typing import Optional  # noqa: E402

from trainkit.config import TrainConfig, parse_config  # noqa: E402
from trainkit.dist import DistEnv, init_distributed  # noqa: E402
from trainkit.exit import exit_fast  # noqa: E402
from trainkit.trainer import Trainer  # noqa: E402


@dataclass
class InProcessConfig(TrainConfig):
    soft_timeout_s: float = 30.0
    """inprocess.Wrapper's soft timeout: a rank whose main thread made no progress this long is interrupted."""

    hard_timeout_s: float = 60.0
    """inprocess.Wrapper's hard timeout: a rank that did not restart this long after the soft one is terminated
    (its process ends, and torchrun's own restart takes over)."""

    heartbeat_timeout_s: float = 30.0
    """inprocess.Wrapper's heartbeat timeout: a rank whose wrapper stopped heartbeating (its process gone or frozen)
    this long is declared dead by its peers (NVRx requires it below the barrier timeout)."""

    whole_world: bool = False
    """Train only at the full world size: no rank is active unless every rank is (NVRx's
    ActiveWorldSizeDivisibleBy(world size)), so when the wrapper ends a rank (its hard timeout) the others wait and
    torchrun's restart brings the job back whole. Off, NVRx's default rank assignment (ShiftRanks) lets the ranks
    left go on in process as a smaller world."""

    barrier_timeout_s: float = 90.0
    """How long the ranks wait for each other at the wrapper's barriers between iterations (NVRx requires soft <
    hard < barrier)."""


class InProcessTrainer(Trainer):
    """The reference loop for one iteration of the wrapper: its process group joins through ``store``."""

    def __init__(self, cfg: InProcessConfig, store, iteration: int) -> None:
        super().__init__(cfg)
        self.store = store
        self.iteration = iteration

    def join_group(self) -> DistEnv:
        import torch.distributed as dist

        return init_distributed(self.cfg.pg_timeout_s, store=dist.PrefixStore(f"iteration_{self.iteration}", self.store))


def main(argv: list[str] | None = None) -> int:
    import datetime
    import os

    import torch.distributed as dist
    from chaos.integrations.nvrx import InProcess

    inprocess = InProcess.require()
    cfg = parse_config(InProcessConfig, argv, description=__doc__.splitlines()[0])
    # One base store for every iteration, served by rank 0 on torchrun's MASTER_PORT (the harness gives each attempt a
    # fresh one); the wrapper's own store shares it (multi_tenant), so the job needs no port beyond torchrun's.
    port = int(os.environ["MASTER_PORT"])
    base = dist.TCPStore(os.environ["MASTER_ADDR"], port, int(os.environ["WORLD_SIZE"]),
                         is_master=int(os.environ["RANK"]) == 0, multi_tenant=True, wait_for_workers=True,
                         use_libuv=True, timeout=datetime.timedelta(seconds=cfg.barrier_timeout_s))
    report = InProcess()

    # The wrapper passes its CallWrapper only to an argument annotated with that type: without the annotation the
    # iteration is unknown and every iteration would rendezvous under the first one's keys.
    def train(call_wrapper: Optional[inprocess.CallWrapper] = None) -> int:
        iteration = report.entered(call_wrapper)
        try:
            return InProcessTrainer(cfg, base, iteration).run()
        except BaseException as exc:  # the wrapper's own interruption (RankShouldRestart) included
            report.failed(exc)
            raise

    seconds = datetime.timedelta
    wrapped = inprocess.Wrapper(
        store_kwargs={"port": port, "multi_tenant": True},
        soft_timeout=seconds(seconds=cfg.soft_timeout_s), hard_timeout=seconds(seconds=cfg.hard_timeout_s),
        heartbeat_timeout=seconds(seconds=cfg.heartbeat_timeout_s),
        barrier_timeout=seconds(seconds=cfg.barrier_timeout_s), completion_timeout=seconds(seconds=cfg.barrier_timeout_s),
        # abort: the default, which aborts NCCL's collectives (not gloo's) and destroys the groups. health_check:
        # CUDA's, as NVRx's examples use it; it passes on a host without a GPU.
        health_check=inprocess.health_check.CudaHealthCheck(),
        **({} if not cfg.whole_world else {"rank_assignment": inprocess.Compose(
            inprocess.rank_assignment.ActiveWorldSizeDivisibleBy(int(os.environ["WORLD_SIZE"])),
            inprocess.rank_assignment.ShiftRanks())}),
    )(train)
    return wrapped()


if __name__ == "__main__":
    exit_fast(main())
