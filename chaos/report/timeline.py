"""The run as a picture: training progress per attempt over time, with faults, checkpoints and reactions marked."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from chaos.evidence.events import History, attempt_key

if TYPE_CHECKING:
    from chaos.report.journal import Journal


def plot_timeline(history: History, journal: "Journal", dest: Path) -> Path:
    """Write ``dest`` (PNG): step vs seconds since launch, one colour per attempt."""
    import matplotlib

    matplotlib.use("Agg")  # headless: game-day servers have no display
    import matplotlib.pyplot as plt

    launches = history.of("launch")
    t0 = launches[0].t if launches else (history.records[0].t if history.records else 0.0)
    fig, ax = plt.subplots(figsize=(11, 4.5), dpi=110)
    for attempt in sorted({str(r.attempt) for r in history.of("step")}, key=attempt_key):
        steps = [r for r in history.of("step", attempt=attempt) if r.rank in (0, None)]
        ax.plot([r.t - t0 for r in steps], [r.step for r in steps], lw=1.6, label=f"attempt {attempt}")
    commits = history.of("ckpt_commit")
    if commits:
        ax.scatter([r.t - t0 for r in commits], [r.step for r in commits], marker="s", s=18,
                   color="black", zorder=3, label="checkpoint committed")
    for ev, marker, colour in (("ckpt_reject", "x", "red"), ("ckpt_error", "v", "orange"), ("health", "*", "purple")):
        recs = history.of(ev)
        if recs:
            # By name, as the three kinds share no step attribute: the protocol gives a health event none (a workload
            # may add one).
            ax.scatter([r.t - t0 for r in recs], [r.get("step") or 0 for r in recs], marker=marker, s=50,
                       color=colour, zorder=4, label=ev)
    for fault in journal.faults:
        if fault.t_inject is None:
            continue  # never fired: nothing to mark
        x = fault.t_inject - t0
        ax.axvline(x, color="red", ls="--", lw=1)
        ax.annotate(fault.label, (x, ax.get_ylim()[1]), rotation=90, va="top", ha="right", fontsize=8, color="red")
        if fault.t_revert and fault.details.get("duration_s"):
            ax.axvspan(x, fault.t_revert - t0, color="red", alpha=0.07)
    ax.set_xlabel("seconds since launch")
    ax.set_ylabel("optimizer step")
    ax.set_title(f"{journal.experiment}: exit {journal.exit_code}")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(dest)
    plt.close(fig)
    return dest
