"""A torchft DDP loop: replica groups that keep training when one dies, and heal the one that comes back.

torchft's own example (train_ddp.py) on CPU/gloo with the reference workloads' model and synthetic data:
each replica group is one torchrun job of ``--nproc-per-node 1`` with ``REPLICA_GROUP_ID`` and
``NUM_REPLICA_GROUPS`` in its environment, and a lighthouse (``TORCHFT_LIGHTHOUSE``) forms the
quorum of the groups alive at each step. The harness's ``torchft`` target starts the lighthouse and
the groups; by hand::

    torchft_lighthouse --min_replicas 1 --heartbeat_timeout_ms 2000 --bind 127.0.0.1:29510 &
    export TORCHFT_LIGHTHOUSE=http://127.0.0.1:29510 NUM_REPLICA_GROUPS=2
    REPLICA_GROUP_ID=0 torchrun --standalone --nproc-per-node 1 --max-restarts 2 workloads/torchft_ddp.py &
    REPLICA_GROUP_ID=1 torchrun --standalone --nproc-per-node 1 --max-restarts 2 workloads/torchft_ddp.py

Each group starts from its own initial weights (seeded by seed + group), so a group that never healed
from a peer differs from it visibly. The data of a step is a pure function of (step, group): the
global batch of step s is the s-th slice of the seeded epoch permutations, and group g trains its g-th
part of it. A group that is down does not train its part: those samples are lost by design (drop-replica
recovery), and the steps torchft discarded (``should_commit`` false) say which samples they dropped.
The quorum is synchronous (``use_async_quorum=False``), so a heal lands before the step's data is
chosen and the step number it trains is the one it commits. Events: chaos.integrations.torchft.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # trainkit, from any cwd
if importlib.util.find_spec("chaos") is None:
    sys.path.insert(1, str(HERE.parent))  # chaos from the source tree

from trainkit import startup  # noqa: E402

startup.pause()  # before torch is imported; resumed once the model is wrapped (trainkit/startup.py)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from chaos import sdk  # noqa: E402
from chaos.integrations import torchft as chaos_torchft  # noqa: E402
from trainkit.data import SyntheticDataset  # noqa: E402
from trainkit.exit import exit_fast  # noqa: E402
from trainkit.model import build_model  # noqa: E402

log = logging.getLogger("torchft_ddp")


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--steps", type=int, default=60, help="committed steps to reach (torchft's current_step)")
    ap.add_argument("--seed", type=int, default=0, help="data order and, plus the group, each group's initial weights")
    ap.add_argument("--dataset-size", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8, help="samples per replica group per step")
    ap.add_argument("--in-dim", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--n-classes", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--step-sleep", type=float, default=0.05, help="seconds after each step (a real step's length)")
    ap.add_argument("--pg-timeout-s", type=float, default=5.0, help="gloo timeout of the replicas' process group")
    ap.add_argument("--timeout-s", type=float, default=30.0, help="torchft Manager timeout (quorum, commit, heal)")
    ap.add_argument("--start-together-s", type=float, default=0.0,
                    help="on the job's first start, wait up to this long for every replica group to reach the same "
                         "point before joining a quorum (0: no wait). The lighthouse forms the first quorum from the "
                         "groups heartbeating when it ticks: one whose start-up (imports) is slower finds the other "
                         "already training alone, and with min_replicas 1 starts over on its own from step 1")
    return ap.parse_args(argv)


def start_together(group: int, groups: int, wait_s: float) -> None:
    """A barrier of files in the run directory (CHAOS_RUN_DIR/torchft-start): each group marks itself there, then waits
    until every group has, or ``wait_s`` passed. A group started again later (a restart, a relaunch) finds every mark
    in place and goes straight on: only the job's first start waits."""
    import time

    run_dir = os.environ.get("CHAOS_RUN_DIR")
    if wait_s <= 0 or not run_dir:
        return
    marks = Path(run_dir) / "torchft-start"
    marks.mkdir(parents=True, exist_ok=True)
    (marks / f"rg{group}").touch()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if all((marks / f"rg{g}").exists() for g in range(groups)):
            return
        time.sleep(0.05)
    log.warning("replica group %d: not every group started within %.0f s; joining the quorum anyway", group, wait_s)


def step_indices(step: int, group: int, groups: int, batch: int, size: int, seed: int) -> tuple[int, list[int]]:
    """(epoch, indices) group ``group`` trains in ``step`` (1-based): the step's global batch is the next
    ``batch * groups`` positions of the seeded epoch permutations, and the group takes its part."""
    first = (step - 1) * batch * groups + group * batch
    out, epoch = [], first // size
    for pos in range(first, first + batch):
        e = pos // size
        perm = torch.randperm(size, generator=torch.Generator().manual_seed(seed * 1_000_003 + e))
        out.append(int(perm[pos % size]))
    return epoch, out


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s [%(name)s] %(message)s")
    from torchft import DistributedDataParallel, Manager, Optimizer, ProcessGroupGloo
    from torchft.checkpointing.pg_transport import PGTransport

    group = int(os.environ.get("REPLICA_GROUP_ID", "0"))
    groups = int(os.environ.get("NUM_REPLICA_GROUPS", "1"))
    dataset = SyntheticDataset(args.dataset_size, args.seed, args.in_dim, args.n_classes)
    model = build_model(args.in_dim, args.hidden, args.n_classes, 0.0, args.seed + group)
    inner = torch.optim.AdamW(model.parameters(), lr=args.lr)

    def load_state_dict(state: dict) -> None:
        model.load_state_dict(state["model"])
        inner.load_state_dict(state["optim"])

    def state_dict() -> dict:
        return {"model": model.state_dict(), "optim": inner.state_dict()}

    start_together(group, groups, args.start_together_s)
    pg = ProcessGroupGloo(timeout=timedelta(seconds=args.pg_timeout_s))
    manager = Manager(pg=pg, min_replica_size=1, load_state_dict=None, state_dict=state_dict,
                      replica_id=f"torchft_ddp_{group}", timeout=timedelta(seconds=args.timeout_s),
                      use_async_quorum=False, hostname="localhost",
                      checkpoint_transport=PGTransport(pg, timeout=timedelta(seconds=args.timeout_s),
                                                       device=torch.device("cpu")))
    report = chaos_torchft.Reporter(manager, replica_group=group, num_replica_groups=groups)
    manager.set_state_dict_fns(report.on_heal(load_state_dict), state_dict)
    ddp = DistributedDataParallel(manager, model)
    optimizer = Optimizer(manager, inner)
    report.start(dataset_size=len(dataset))
    startup.resume()
    while manager.current_step() < args.steps:
        optimizer.zero_grad()  # the quorum; a heal from a live peer lands here (synchronous quorum)
        report.after_quorum()
        step = manager.current_step() + 1
        epoch, indices = step_indices(step, group, groups, args.batch_size, args.dataset_size, args.seed)
        x, y = dataset.batch(indices)
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        committed = manager.should_commit()  # what Optimizer.step asks before it steps
        if committed:
            inner.step()
        report.step(step, committed, epoch=epoch, samples=indices, loss=float(loss.detach()),
                    params=model.parameters())
        if group == 0 and committed and step % 10 == 0:
            print(f"step {step} loss {float(loss.detach()):.6f} participants {manager.num_participants()}", flush=True)
        if args.step_sleep > 0:
            import time

            time.sleep(args.step_sleep)
    digest = sdk.digest_state(model.state_dict(), inner.state_dict())
    sdk.final(manager.current_step(), digest=digest, replica_group=group)
    print(f"replica group {group} final step {manager.current_step()} digest {digest}", flush=True)
    manager.shutdown(wait=False)
    return 0


if __name__ == "__main__":
    exit_fast(main())
