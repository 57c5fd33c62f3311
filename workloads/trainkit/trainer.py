"""The training loop shared by the reference workloads, wired to the chaos event protocol."""

from __future__ import annotations

import logging
import signal
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from chaos import sdk
from chaos.health.exclusions import exclusions_path
from chaos.health.monitor import EXCLUDE_EXIT, my_device, record_exclusion
from chaos.health.monitor import stop_torchrun as stop_launcher
from chaos.health.link import LinkMonitor
from chaos.health.straggler import Straggler, StragglerDetector
from torch import nn

from .checkpoint import CheckpointFormat, CheckpointManager
from .config import TrainConfig
from .data import GlobalCursorSampler, SyntheticDataset
from .dist import DistEnv, GroupComm, destroy_distributed, init_distributed
from .formats import AppState, DdpFormat
from .guard import ExcludeDevice, NonFiniteGuard, NonFiniteStep, RollBack, SkipStep
from .replicas import ReplicaCheck
from .model import build_model
from .rng import seed_rank
from . import startup
from .exit import exit_fast
from .sigterm import SigtermWatch

log = logging.getLogger("trainkit")


class Trainer:
    """One rank's training run: set up, resume, train to ``cfg.steps``, report, tear down.

    Subclasses (the FSDP workload, the deliberately broken fixtures) override the ``build_*``
    and ``parallelize`` hooks rather than the loop.
    """

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.env: DistEnv | None = None
        self.step = 0
        self.health: Any = None
        self.heartbeats: Any = None
        """NVRx rank heartbeats (cfg.nvrx_heartbeats), started once the process group is up."""
        self.sigterm = SigtermWatch(cfg.sigterm_grace_s, self._sigterm_overdue)
        """Set by the SIGTERM handler; the ranks agree on it in the step's all-reduce (see ``train``)."""
        self.preempted = False
        self.ejected = False
        """A straggler was ejected (straggler_policy eject): the launch stops for the scheduler to relaunch without it."""

    # ---- hooks --------------------------------------------------------------------------------

    def parallelize(self, model: nn.Module) -> nn.Module:
        from torch.nn.parallel import DistributedDataParallel as DDP

        env = self.env
        assert env is not None
        return DDP(model, device_ids=[env.local_rank] if env.device.type == "cuda" else None)

    def build_format(self) -> CheckpointFormat:
        return DdpFormat()

    def build_sampler(self) -> GlobalCursorSampler:
        return GlobalCursorSampler(self.cfg.dataset_size, self.cfg.seed, self.cfg.batch_size)

    def build_checkpointer(self, comm: GroupComm) -> Any:
        async_comm = GroupComm(dist.new_group(backend="gloo")) if self.cfg.async_save else None
        return CheckpointManager(
            self.cfg.ckpt_dir, self.build_format(), comm, keep=self.cfg.ckpt_keep,
            retries=self.cfg.ckpt_retries, retry_wait_s=self.cfg.ckpt_retry_wait_s, async_comm=async_comm,
            write_delay_s=self.cfg.ckpt_write_delay_s, read_delay_s=self.cfg.ckpt_read_delay_s,
            commit_delay_s=self.cfg.ckpt_commit_delay_s, start_delay_s=self.cfg.ckpt_start_delay_s,
        )

    def build_replica_check(self) -> ReplicaCheck | None:
        env = self.env
        assert env is not None
        if not self.cfg.replica_check_every:
            return None
        return ReplicaCheck(self.cfg.replica_check_every, env.rank, env.local_rank, env.world_size)

    def final_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Full (unsharded) model and optimizer state, keyed by parameter name, for the digest."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        return get_state_dict(self.model, self.optimizer, options=StateDictOptions(full_state_dict=True))

    # ---- run ----------------------------------------------------------------------------------

    def join_group(self) -> DistEnv:
        """Join the process group (torchrun's rendezvous; an in-process restart brings its own store)."""
        return init_distributed(self.cfg.pg_timeout_s)

    def run(self) -> int:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s [%(name)s] %(message)s",
                            stream=sys.stderr)
        if self.cfg.save_on_sigterm:
            # Only a flag here: the save is a collective, and a handler runs between two bytecodes of
            # whatever the main thread was doing (possibly inside the previous save).
            self.sigterm.install()
        try:
            self.env = self.join_group()
            self.setup()
            if self.cfg.nvrx_heartbeats:
                from chaos.integrations.nvrx import Heartbeats

                self.heartbeats = Heartbeats.start()
            startup.resume()  # the collector was paused through imports and set-up (trainkit/startup.py)
            self.train()
            if self.preempted:
                self.checkpointer.close()
                return 128 + signal.SIGTERM  # what dying of the signal would have said, with the state saved
            if self.ejected:
                self.checkpointer.close()
                return EXCLUDE_EXIT
            self.finish()
        except torch.OutOfMemoryError as exc:
            # Named before the rank dies of it: the journal says why this rank stopped, and its exit makes
            # torchrun stop the peers at once instead of leaving them in the next collective.
            sdk.health(source="trainer", code="oom", device=my_device(self.env.local_rank) if self.env else -1,
                       action="exit", step=self.step + 1, message=str(exc).splitlines()[0][:200])
            log.error("rank %s ran out of memory in step %d; exiting for a restart", self.env.rank if self.env else "?",
                      self.step + 1)
            raise
        except Exception:
            log.exception("rank %s failed at step %d", self.env.rank if self.env else "?", self.step)
            raise
        finally:
            if self.heartbeats is not None:
                self.heartbeats.stop()
            if self.health is not None:
                self.health.stop()
            destroy_distributed()
        return 0

    def _sigterm_overdue(self) -> None:
        log.error("rank %s: SIGTERM %.1f s ago and the loop never reached the end of step %d (blocked in a "
                  "collective?); exiting without a save", self.env.rank if self.env else "?",
                  self.cfg.sigterm_grace_s, self.step + 1)
        exit_fast(128 + signal.SIGTERM)

    def setup(self) -> None:
        cfg, env = self.cfg, self.env
        assert env is not None
        self.dataset = SyntheticDataset(cfg.dataset_size, cfg.seed, cfg.in_dim, cfg.n_classes)
        sdk.start(dataset_size=len(self.dataset), device=str(env.device), local_rank=env.local_rank)
        # GPU health monitor, only when the harness (or an operator) names XID sources in CHAOS_XID_SOURCE.
        from chaos import health

        self.health = health.start_from_env(rank=env.rank, local_rank=env.local_rank)
        model = build_model(cfg.in_dim, cfg.hidden, cfg.n_classes, cfg.dropout, cfg.seed).to(env.device)
        self.model = self.parallelize(model)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=cfg.lr_step, gamma=cfg.lr_gamma)
        self.sampler = self.build_sampler()
        seed_rank(cfg.seed, env.rank)
        self.app = AppState(self.model, self.optimizer, self.scheduler, self.sampler, cfg.seed, env.rank)
        self.checkpointer = self.build_checkpointer(GroupComm())
        self.step, _path = self.checkpointer.resume(self.app)

    def train(self) -> None:
        cfg, env = self.cfg, self.env
        assert env is not None
        self.model.train()
        detector = (StragglerDetector(env.world_size, factor=cfg.straggler_factor, window=cfg.straggler_window)
                    if cfg.straggler_factor > 0 else None)
        links = (LinkMonitor(env.world_size, every=cfg.link_probe_every, nbytes=cfg.link_probe_kb * 1024,
                             factor=cfg.link_factor) if cfg.link_probe_every > 0 else None)
        # Own time: the part of a step outside collectives (the backward's gradient all-reduce and the
        # step's all-reduce below). A straggler's grows; its peers spend the difference waiting.
        guard = NonFiniteGuard(cfg.nonfinite, env.rank, env.local_rank, env.world_size,
                               exclude_after=cfg.nonfinite_exclude_after, strikes_dir=cfg.ckpt_dir)
        replicas = self.build_replica_check()
        params = [p for p in self.model.parameters() if p.requires_grad]
        mark = time.monotonic()
        while self.step < cfg.steps:
            batch = self.sampler.next_batch(env.rank, env.world_size)
            x, y = self.dataset.batch(batch.indices)
            x, y = x.to(env.device), y.to(env.device)
            out = self.model(x)
            if batch.indices:
                loss_sum = F.cross_entropy(out, y, reduction="sum")
            else:
                # No samples on this rank (short last step of an epoch): still run backward so the
                # gradient all-reduce / reduce-scatter happens, with a zero loss tied to every parameter.
                loss_sum = out.sum() * 0.0
            # DDP and FSDP average gradients over ranks; scaling by world_size / global batch makes
            # the update the mean over the whole global batch, however it is split across ranks.
            before_backward = time.monotonic()
            (loss_sum * (env.world_size / batch.global_size)).backward()
            after_backward = time.monotonic()
            skipped = False
            if guard.on:
                try:
                    guard.check(self.step + 1, loss_sum, params)
                except ExcludeDevice:
                    self.stop_for_exclusion()
                    return
                except SkipStep:
                    skipped = True
                except RollBack:
                    self.roll_back()
                    mark = time.monotonic()
                    continue
            if not skipped:
                self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.scheduler.step()
            self.step += 1
            # The preemption flag rides in the step's all-reduce: SIGTERM reaches the ranks at different
            # moments, and all of them must stop after the same step to save one consistent checkpoint.
            # So does each rank's own time, in its own slot, when straggler detection is on.
            parts = [loss_sum.detach().reshape(1).float(),
                     torch.tensor([1.0 if self.sigterm.is_set() else 0.0], device=loss_sum.device)]
            if detector is not None:
                own = torch.zeros(env.world_size, device=loss_sum.device)
                own[env.rank] = (before_backward - mark) + (time.monotonic() - after_backward)
                parts.append(own)
            total = torch.cat(parts)
            dist.all_reduce(total)
            mark = time.monotonic()
            loss = total[0].item() / batch.global_size
            stop = total[1].item() > 0
            if stop:
                self.sigterm.reached_stop()  # every rank agreed: what follows (the save) is not bounded
            # A skipped step consumed its batch without training on it: said so, the samples are not counted as used.
            sdk.step(self.step, epoch=batch.epoch, samples=batch.indices, loss=loss, **({"skipped": True} if skipped else {}))
            named = detector.observe(self.step, total[2:].tolist()) if detector is not None else None
            if named is not None and self.on_straggler(named):
                return
            # A collective at the same step on every rank, after the step's own: all ranks join it.
            slow_link = links.probe(self.step) if links is not None else None
            if slow_link is not None:
                self.on_slow_link(slow_link, links)
            if env.rank == 0 and cfg.log_every and self.step % cfg.log_every == 0:
                print(f"step {self.step} epoch {batch.epoch} loss {loss:.6f}", flush=True)
            # checkpoint_due() is a collective: every rank agrees to save now when a degrading GPU asks.
            health_due = self.health is not None and self.health.checkpoint_due()
            periodic = bool(cfg.ckpt_every) and self.step % cfg.ckpt_every == 0
            # Before any save (periodic, health, preemption; every rank agreed on each), and every N steps: a
            # corrupted replica must never be committed.
            if replicas is not None and (replicas.due(self.step) or periodic or health_due or stop):
                replicas.check(self.step, params)
            if periodic or health_due:
                # Named so a judge can tell the save the health alert asked for from the periodic one.
                # Passed only when set: a user's checkpointer with save(step, app) keeps working.
                with self.sigterm.saving():
                    self.checkpointer.save(self.step, self.app, **({"reason": "health"} if health_due else {}))
            if stop:
                if not (periodic or health_due):
                    self.checkpointer.save(self.step, self.app, reason="preempt")
                log.warning("rank %d: SIGTERM, saved step %d and stopping", env.rank, self.step)
                self.preempted = True
                return
            if cfg.step_sleep > 0:
                time.sleep(cfg.step_sleep)

    def roll_back(self) -> None:
        """Every rank reloads the last committed checkpoint in-process (the guard's rollback), so the steps after it
        are trained again from state the bad step never touched. The same load as a restart's resume: it names the
        checkpoint in ``ckpt_load``, which starts a new segment of this attempt's lineage."""
        self.optimizer.zero_grad(set_to_none=True)
        self.checkpointer.wait()  # a save still being written may be the newest one to go back to
        step, path = self.checkpointer.resume(self.app)
        if path is None:
            # Nothing committed yet: the starting state is gone from this process, and only a restart rebuilds it.
            raise NonFiniteStep(f"step {self.step + 1} is not finite and no checkpoint was committed yet to roll back "
                                f"to; exiting for a restart from the start")
        log.warning("rank %d: rolled back from step %d to the checkpoint of step %d", self.env.rank if self.env else -1,
                    self.step, step)
        self.step = step

    def on_straggler(self, named: Straggler) -> bool:
        """Every rank names the same straggler at the same step. The straggler reports itself (the health
        convention: the rank that owns the device); with policy eject all ranks save this step and the
        straggler records its device as excluded and stops the launch. True when training must stop."""
        env, cfg = self.env, self.cfg
        assert env is not None
        eject = cfg.straggler_policy == "eject"
        device = my_device(env.local_rank)
        if env.rank == named.rank:
            sdk.health(source="straggler", code="slow_rank", device=device, action="exclude" if eject else "alert",
                       slow_rank=named.rank, ratio=named.ratio, own_s=named.own_s, peers_s=named.peers_s,
                       window=cfg.straggler_window, step=named.step)
        log.warning("rank %d is a straggler: own time %.4f s per step, %.2fx its peers' (%s)", named.rank,
                    named.own_s, named.ratio, "ejecting it" if eject else "alert only")
        if not eject:
            return False
        self.checkpointer.save(self.step, self.app, reason="straggler")
        if env.rank == named.rank:
            record_exclusion(str(exclusions_path()), device=device, code="straggler", rank=env.rank)
        self.stop_for_exclusion()
        return True

    def stop_for_exclusion(self) -> None:
        """Every rank stops the launch together (a straggler ejected after its save; a persistent NaN with no save,
        its last checkpoint committed before it): restarting in place would bring the device straight back, and
        the scheduler (the harness's runner here) relaunches without it. Every rank stops its own agent after
        the barrier, before any of them exits: an agent that saw a worker exit first would restart the group in
        place."""
        dist.barrier()
        stop_launcher()
        self.ejected = True

    def on_slow_link(self, named: Straggler, links: LinkMonitor) -> None:
        """Every rank names the same slow link at the same probe; its sender reports it (alert only: leaving
        a node out is the scheduler's call, with the node's name in the event)."""
        env = self.env
        assert env is not None
        if env.rank == named.rank:
            sdk.health(source="link", code="slow_link", device=my_device(env.local_rank), action="alert",
                       slow_rank=named.rank, to_rank=(named.rank + 1) % env.world_size, ratio=named.ratio,
                       link_s=named.own_s, peers_s=named.peers_s, probe_bytes=links.nbytes, step=named.step)
        log.warning("rank %d's link to rank %d is slow: %.4f s per probe, %.2fx its peers'", named.rank,
                    (named.rank + 1) % env.world_size, named.own_s, named.ratio)

    def finish(self) -> None:
        self.checkpointer.close()
        model_state, optim_state = self.final_state()
        digest = sdk.digest_state(model_state, optim_state)
        sdk.final(self.step, digest=digest)
        if self.env and self.env.rank == 0:
            print(f"final step {self.step} digest {digest}", flush=True)
        # Leave together: a rank that tears its process group down while a peer's gloo pairs are
        # still talking to it can make the peer abort at exit ("terminate called without an active
        # exception", SIGABRT), which torchrun answers with a needless restart of a finished job.
        dist.barrier()
