"""Nothing of the run is left after teardown: no process, netns, link, nft table, container, network or mount named for it."""

from __future__ import annotations

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome
from chaos.safety import find_leftovers, run_tag


class NoOrphansConfig(CheckConfig):
    """No fields: everything named for the run is looked for."""


class NoOrphans(Check, kind="no_orphans"):
    """Nothing of the run is left after teardown: no process, netns, link, nft table, container, network or mount named for it."""

    Config = NoOrphansConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        # The same inventory `chaos cleanup` and the safety tests use: one definition of "nothing left".
        rid = run_tag(outcome.run_dir)
        if not outcome.history.of("launch"):
            # No launch record: the run created nothing, so "nothing left" proves no cleanup.
            return self.inconclusive(f"run {rid} has no launch record in harness.jsonl, so there was no "
                                     f"teardown to prove; judge a run the harness launched")
        left = [f"{item.kind}: {item.what}" for item in find_leftovers(outcome.run_dir)]
        if left:
            return self.failed(f"{len(left)} thing(s) of run {rid} left behind: {'; '.join(left)}; "
                               f"remove them with: chaos cleanup {outcome.run_dir}", leftovers=left)
        return self.passed(f"nothing of run {rid} left (processes, mounts, netns, links, nft tables, qdiscs, "
                           f"containers, docker networks, ledger actions)")
