"""Nothing of the run is left after teardown: no process, netns, link, nft table, container, network or mount named for it."""

from __future__ import annotations

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome
from chaos.evidence.harness_records import Cmd, Launch
from chaos.runtime.safety import find_leftovers, run_tag


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
        failed: list[tuple[str, str]] = []
        left = [f"{item.kind}: {item.what}" for item in find_leftovers(outcome.run_dir, failed=failed)]
        # A listing that failed is unknown, not empty, where the run could have made what it lists.
        unknown = [why for tool, why in failed if tool in tools_used(outcome)]
        if left:
            also = f"; and could not list: {'; '.join(unknown)}" if unknown else ""
            return self.failed(f"{len(left)} thing(s) of run {rid} left behind: {'; '.join(left)}; "
                               f"remove them with: chaos cleanup {outcome.run_dir}{also}", leftovers=left,
                               unlisted=unknown)
        if unknown:
            return self.inconclusive(f"nothing of run {rid} found, but a listing of what it used failed, so what "
                                     f"it holds is unknown: {'; '.join(unknown)}; fix the tool (a docker daemon "
                                     f"that is up, nft and ip as root) and run chaos cleanup --dry-run "
                                     f"{outcome.run_dir}", unlisted=unknown)
        return self.passed(f"nothing of run {rid} left (processes, mounts, netns, links, nft tables, qdiscs, "
                           f"containers, docker networks, ledger actions)")


def tools_used(outcome: RunOutcome) -> set[str]:
    """The listing tools whose objects this run could have made: every command the harness ran (its
    ``cmd`` records: ip, nft, tc, docker), and docker for a run on the docker target (the SDK, no CLI)."""
    h = outcome.history
    used = {str((r.argv or [""])[0]).rsplit("/", 1)[-1] for r in h.harness(Cmd)}
    if any(r.target == "docker" for r in h.harness(Launch)) or h.of("docker_image"):
        used.add("docker")
    return used
