"""``matches_golden``: the run ends where a fault-free run of the same workload config ends."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome, rank_order
from chaos.errors import ChaosError
from chaos.evidence.finals import finite_number, summarize_finals


class MatchesGoldenConfig(CheckConfig):
    loss_rtol: float = Field(default=0.05, ge=0)
    """Relative tolerance on the final loss, used only when the world size differs from the golden run's (digests cannot match then)."""
    world_size_change: Literal["inconclusive", "final_loss"] = "inconclusive"
    """What a run that ended at another world size than the golden run is held to, digests being unable to
    match: 'inconclusive' (the default) says no PASS, for one final loss within tolerance also passes a
    resume that lost the optimizer state or restarted the LR schedule; 'final_loss' opts into that weaker
    standard by name. A final loss outside the tolerance FAILs under either."""


class MatchesGolden(Check, kind="matches_golden"):
    """Final per-rank digests equal a fault-free run's (same world size: bit-exact; changed world size: loss within loss_rtol)."""

    Config = MatchesGoldenConfig

    def needs_golden(self, outcome: RunOutcome) -> bool:
        return bool(outcome.history.finals())

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        if outcome.golden is None:
            return CheckResult(self.kind, "error", "no golden run is available to this runner "
                                                   "(construct Runner with golden=Golden(experiment, runs_root))")
        mine = summarize_finals(outcome.history)
        if not mine["ranks"]:
            return self.failed("the run wrote no final event, so there is nothing to compare with the golden run")
        try:
            golden = outcome.golden()
        except ChaosError as exc:
            return CheckResult(self.kind, "error", str(exc))
        figures = {"world_size": mine["world_size"], "golden_world_size": golden["world_size"],
                   "final_step": mine["final_step"], "golden_final_step": golden["final_step"],
                   "final_loss": mine["final_loss"], "golden_final_loss": golden["final_loss"],
                   "golden_run": golden.get("run_dir")}
        diverged = _loss_problem(mine, "this run") or _loss_problem(golden, "the fault-free (golden) run")
        if diverged:
            # A NaN compares as "within tolerance" and matches a NaN golden digest alike: a diverged run,
            # on either side, proves nothing about the recovery and is the finding itself.
            return self.failed(f"{diverged}: a diverged run, not a match", **figures)
        if mine["final_step"] != golden["final_step"]:
            return self.failed(f"the run ended at step {mine['final_step']}, the fault-free run at step "
                               f"{golden['final_step']}: the same training did not happen", **figures)
        if mine["world_size"] == golden["world_size"]:
            return self._compare_digests(mine, golden, figures)
        return self._compare_loss(mine, golden, figures)

    def _compare_digests(self, mine: dict, golden: dict, figures: dict) -> CheckResult:
        figures["comparison"] = "digest"
        ranks = sorted(set(mine["ranks"]) | set(golden["ranks"]), key=rank_order)
        blank = [f"rank {r}" for r in ranks if not (mine["ranks"].get(r) or {}).get("digest")]
        blank_golden = [f"rank {r}" for r in ranks if not (golden["ranks"].get(r) or {}).get("digest")]
        if blank or blank_golden:
            whose = (f"this run's final event of {', '.join(blank)}" if blank
                     else f"the golden run's final event of {', '.join(blank_golden)}")
            return self.inconclusive(f"{whose} carries no digest, so the states cannot be compared; emit "
                                     f"final(step, digest=chaos.sdk.digest_state(model, optimizer))", **figures)
        differ = []
        for rank in ranks:
            got = (mine["ranks"].get(rank) or {}).get("digest")
            want = (golden["ranks"].get(rank) or {}).get("digest")
            if got != want:
                differ.append(f"rank {rank} {_short(got)} != golden {_short(want)}")
        figures["mismatched_ranks"] = differ
        steps = f"step {mine['final_step']} vs golden step {golden['final_step']}"
        if differ:
            loss = ""
            if mine["final_loss"] is not None and golden["final_loss"] is not None:
                loss = f"; final loss {mine['final_loss']:.6g} vs golden {golden['final_loss']:.6g}"
            return self.failed(f"final digests differ from the fault-free run ({len(differ)} of {len(ranks)} "
                               f"ranks: {'; '.join(differ[:2])}) at {steps}{loss}", **figures)
        return self.passed(f"all {len(ranks)} ranks' final digests bit-identical to the fault-free run "
                           f"(world size {mine['world_size']}, {steps})", **figures)

    def _compare_loss(self, mine: dict, golden: dict, figures: dict) -> CheckResult:
        figures["comparison"] = "loss"
        got, want = mine["final_loss"], golden["final_loss"]
        world = f"world size {mine['world_size']} vs golden {golden['world_size']}"
        if got is None or want is None:
            return self.failed(f"{world}, so digests cannot match, and the final loss is unknown "
                               f"(step events carry no 'loss')", **figures)
        rel = abs(got - want) / max(abs(want), 1e-12)
        figures["loss_rel_diff"] = rel
        text = (f"final loss {got:.6g} vs golden {want:.6g} (relative difference {rel:.3g}, "
                f"tolerance {self.config.loss_rtol:g}); compared losses because the {world}")
        if rel > self.config.loss_rtol:
            return self.failed(text, **figures)
        if self.config.world_size_change != "final_loss":
            return self.inconclusive(f"{text}: one final loss within tolerance does not prove the resume (a lost "
                                     f"optimizer state or a restarted LR schedule can land there too); set "
                                     f"matches_golden: {{world_size_change: final_loss}} to accept it", **figures)
        return self.passed(f"{text} (the weaker standard this experiment opted into: world_size_change: final_loss)",
                           **figures)


def _loss_problem(summary: dict, who: str) -> str:
    """What is wrong with a summary's final loss (non-finite, null, not a number), or ''."""
    problem = summary.get("final_loss_problem")
    if problem:
        return f"{who}: {problem}"
    loss = summary.get("final_loss")
    if loss is not None and not finite_number(loss):
        return f"{who}: the final loss is {loss!r}, not a finite number"
    return ""


def _short(digest: object) -> str:
    return "none" if digest is None else str(digest)[:12]
