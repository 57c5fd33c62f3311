"""``replicas_agree``: every rank of the final attempt ends with the same model+optimizer digest."""

from __future__ import annotations

from collections import defaultdict

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome, rank_order


class ReplicasAgree(Check, kind="replicas_agree"):
    """Every rank of the final attempt wrote a final digest, and all of them are equal (DDP replicas; FSDP full-state digests)."""

    Config = CheckConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        h = outcome.history
        attempt = h.final_attempt()
        if attempt is None:
            return self.failed("the run wrote no final event, so there are no final states to compare")
        finals = [r for r in h.finals() if r.attempt == attempt]
        # Who must agree: every rank the attempt had (its start records, world_size, the harness's spawns),
        # not only the ranks that wrote a final: a rank that wrote none is a rank that was not compared.
        expected = h.attempt_ranks().get(str(attempt), set())
        world = max([int(r.world_size or 1) for r in finals] + [len(expected)])
        by_digest: dict[str, list[str]] = defaultdict(list)
        for r in sorted(finals, key=lambda r: str(r.rank)):
            by_digest[str(r.digest)].append(str(r.rank))
        reported = {str(r.rank) for r in finals}
        absent = sorted(({str(i) for i in range(world)} | {str(r) for r in expected}) - reported, key=rank_order)
        figures = {"attempt": attempt, "world_size": world,
                   "digests": {d[:12]: ranks for d, ranks in by_digest.items()}, "ranks_without_final": absent}
        blank = sorted(str(r.rank) for r in finals if not r.digest)
        if blank:
            return self.inconclusive(f"the final event of rank(s) {', '.join(blank)} carries no digest, so replicas "
                                     f"cannot be compared; emit final(step, digest=chaos.sdk.digest_state(...))",
                                     **figures)
        if len(by_digest) > 1:
            groups = "; ".join(f"ranks {', '.join(ranks)}: {d[:12]}" for d, ranks in by_digest.items())
            return self.failed(f"attempt {attempt}'s ranks ended with {len(by_digest)} different digests ({groups})",
                               **figures)
        if absent:
            return self.failed(f"rank(s) {', '.join(absent)} of {world} wrote no final event in attempt {attempt}",
                               **figures)
        return self.passed(f"all {world} ranks of attempt {attempt} ended with digest {next(iter(by_digest))[:12]}",
                           **figures)
