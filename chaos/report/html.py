"""report.html: one self-contained page per run (images inlined): verdicts, timeline, badput, game-day plan, projection.

Built from journal.json and the run directory alone, so any finished run can be rendered again. No
script, no external asset: it opens from an e-mail attachment or a CI artifact store as it is.
"""

from __future__ import annotations

import base64
import io
from html import escape
from pathlib import Path
from typing import Any

from chaos.evidence.events import History
from chaos.evidence.goodput import CAUSES, HOW
from chaos.evidence.outcome import VERDICTS, look
from chaos.evidence.recovery import describe_landing
from chaos.report.journal import Journal
from chaos.report.terminal import recovery_columns
from chaos.report.timeline import plot_timeline

COLOURS = {
    "productive": "#2e7d32", "slow": "#9ccc65", "recompute": "#ef6c00", "ckpt_save": "#1565c0",
    "startup": "#78909c", "detection": "#c62828", "restart": "#8e24aa", "ckpt_load": "#00838f",
    "shutdown": "#b0bec5", "unrecovered": "#212121",
}
VERDICT_COLOURS = {v.label: v.colour for v in VERDICTS.values()}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
main{max-width:1180px;margin:0 auto;padding:0 24px 48px}
header{padding:18px 24px;color:#fff}
header h1{margin:0;font-size:24px} header p{margin:4px 0 0;opacity:.92}
h2{margin:28px 0 8px;font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
th,td{border:1px solid #e2e2e2;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f1f3f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
.v{font-weight:700;color:#fff;padding:1px 6px;border-radius:3px}
img{max-width:100%;background:#fff;border:1px solid #e2e2e2}
.facts span{display:inline-block;margin-right:18px} .dim{color:#666} .swatch{display:inline-block;width:11px;
height:11px;border-radius:2px;margin-right:6px;vertical-align:-1px}
"""


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return base64.b64encode(buf.getvalue()).decode()


def badput_picture(goodput: dict[str, Any]) -> str | None:
    """A base64 PNG: where the wall time went (one bar per cause) over when it went (a ribbon in run time)."""
    segments = goodput.get("segments") or []
    if not segments:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seconds = goodput["seconds"]
    causes = [c for c in CAUSES if seconds.get(c, 0) > 0]
    fig, (bars, ribbon) = plt.subplots(2, 1, figsize=(11, 4.2), dpi=110, gridspec_kw={"height_ratios": [3, 1]})
    wall = goodput["wall_s"] or 1.0
    bars.barh(causes, [seconds[c] for c in causes], color=[COLOURS[c] for c in causes])
    for i, c in enumerate(causes):
        bars.annotate(f"{seconds[c]:.1f} s ({seconds[c] / wall:.1%})", (seconds[c], i), xytext=(4, 0),
                      textcoords="offset points", va="center", fontsize=8)
    bars.invert_yaxis()
    bars.set_xlabel("seconds of wall time")
    bars.set_title(f"goodput {goodput.get('goodput') or 0:.1%} of {wall:.0f} s: where the time went")
    bars.grid(axis="x", alpha=0.3)
    for t0, t1, cause, _fault in segments:
        ribbon.barh(0, t1 - t0, left=t0, color=COLOURS.get(cause, "#999"), height=1.0)
    ribbon.set_xlim(0, wall)
    ribbon.set_yticks([])
    ribbon.set_xlabel("seconds since launch")
    fig.tight_layout()
    data = _png(fig)
    plt.close(fig)
    return data


def _timeline_picture(run_dir: Path, journal: Journal) -> str | None:
    try:
        path = plot_timeline(History.from_run_dir(run_dir), journal, run_dir / "timeline.png")
    except Exception:  # a run without records still gets its page, without this picture
        return None
    return base64.b64encode(path.read_bytes()).decode()


def _verdict(word: str) -> str:
    return f'<span class="v" style="background:{VERDICT_COLOURS.get(word, "#555")}">{escape(word)}</span>'


def _table(head: list[str], rows: list[list[str]], numeric: set[int] = frozenset()) -> str:  # type: ignore[assignment]
    out = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>")
    return "".join(out) + "</table>"


def _n(v: Any, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v) if isinstance(v, (int, float)) else escape(str(v))


def render_html(journal: Journal, run_dir: Path) -> str:
    verdict = journal.word
    name = journal.experiment
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(name)}: {escape(verdict)}</title>"
             f"<style>{CSS}</style></head><body>",
             f'<header id="verdict" style="background:{VERDICT_COLOURS.get(verdict, "#555")}">'
             f"<h1>{escape(name)}: {escape(verdict)}</h1><p>{escape(journal.description)}</p></header><main>"]
    g = journal.goodput or {}
    parts.append('<p class="facts">' + "".join(f"<span>{escape(x)}</span>" for x in [
        f"wall {journal.wall_s:.1f} s", f"workload exit {journal.workload_exit_code}",
        f"attempts {len(journal.attempts)}", f"max step {journal.max_step}",
        f"goodput {g['goodput']:.1%}" if g.get("goodput") is not None else "goodput -"]) + "</p>")
    for d in journal.diagnostics:
        parts.append(f"<p><b>{escape(d)}</b></p>")

    parts.append('<h2 id="checks">Checks</h2>')
    parts.append(_table(["check", "verdict", "reason"], [
        [escape(c.kind), _verdict(look(c.verdict).label), escape(c.reason)] for c in journal.checks]))

    timeline = _timeline_picture(run_dir, journal)
    parts.append('<h2 id="timeline">Timeline</h2>')
    parts.append(f'<img id="timeline-img" alt="timeline" src="data:image/png;base64,{timeline}">' if timeline
                 else "<p class='dim'>no timeline: the run has no records to plot</p>")

    if journal.faults:
        cols = recovery_columns([f.recovery for f in journal.faults])
        parts.append('<h2 id="faults">Faults and reactions</h2>')
        rows = []
        for f in journal.faults:
            status = "injected" if f.injected else (f.error or f.status.replace("_", " "))
            rate = f.recovery.get("step_rate") or {}
            rows.append([escape(f.label), escape(f.kind), escape(status), *[_n(f.recovery.get(c)) for c in cols],
                         f"{rate['ratio']:.0%} of {rate['before']:.1f}/s" if rate else "-"])
        parts.append(_table(["fault", "kind", "status", *cols, "step rate while it acted"], rows,
                            numeric=set(range(3, 4 + len(cols)))))
        landings = [text for f in journal.faults if (text := describe_landing(f.label, f.recovery))]
        if landings:
            parts.append('<ul id="landings">' + "".join(f"<li>{escape(t)}</li>" for t in landings) + "</ul>")

    if g and not g.get("problems"):
        picture = badput_picture(g)
        parts.append('<h2 id="badput">Goodput and badput</h2>')
        if picture:
            parts.append(f'<img id="badput-img" alt="badput" src="data:image/png;base64,{picture}">')
        wall = g.get("wall_s") or 1.0
        parts.append(_table(["cause", "seconds", "share", "how it was measured"], [
            [f'<span class="swatch" style="background:{COLOURS[c]}"></span>{escape(c)}', _n(g["seconds"][c]),
             f"{g['seconds'][c] / wall:.1%}", escape(HOW[c])] for c in CAUSES], numeric={1, 2}))
        if g.get("by_fault"):
            parts.append("<h3>What each fault cost</h3>")
            kinds = [c for c in CAUSES if any(c in bill for bill in g["by_fault"].values())]
            parts.append(_table(["fault", *kinds, "total"], [
                [escape(label), *[_n(bill.get(k)) for k in kinds], _n(sum(bill.values()))]
                for label, bill in g["by_fault"].items()], numeric=set(range(1, len(kinds) + 2))))
    elif g.get("problems"):
        parts.append(f"<h2 id='badput'>Goodput</h2><p>not computed: {escape('; '.join(g['problems']))}</p>")

    parts += _gameday_sections(journal)
    if journal.commands:
        parts.append("<h2>Commands the harness ran</h2><pre>" + escape("\n".join(journal.commands)) + "</pre>")
    parts.append("</main></body></html>")
    return "\n".join(parts)


def _gameday_sections(journal: Journal) -> list[str]:
    plan = journal.gameday
    if not plan:
        return []
    out = ['<h2 id="gameday">Game day</h2>',
           f"<p>Mix <b>{escape(plan['mix'])}</b> ({escape(plan['source'])}), played at <b>{plan['gpus']:,} GPUs</b>: "
           f"{plan['expected_faults']:.1f} faults expected over the span, compressed {plan['compression']:,.0f}x "
           f"into {plan['window_s']:g} s of this run; {sum(s['fired'] for s in plan['schedule'])} of "
           f"{len(plan['schedule'])} drawn faults struck.</p>"]
    mix = next((c for c in journal.checks if c.kind == "fault_mix"), None)
    if mix and mix.figures.get("categories"):
        out.append("<h3>By category</h3>")
        out.append(_table(["category", "drawn", "struck", "not reached", "failed", "MTTR (regain_s, median)"], [
            [escape(c), str(r["scheduled"]), str(r["injected"]), str(r["not_reached"]), str(r["failed"]),
             _n(r.get("mttr_s"))] for c, r in sorted(mix.figures["categories"].items())],
            numeric={1, 2, 3, 4, 5}))
    out.append("<h3>Schedule (seeded)</h3>")
    out.append(_table(["due at (s)", "cluster day", "fault", "root cause", "struck", "played as"], [
        [_n(s["at_s"], "{:.1f}"), _n(s["day"], "{:.2f}"), escape(s["label"]), escape(s["cause"]),
         "yes" if s["fired"] else "no", escape(s["why"])] for s in plan["schedule"]], numeric={0, 1}))
    p = journal.projection
    out.append('<h2 id="projection">Projection to scale</h2>')
    if not p:
        out.append("<p>No projection: the run measured no interrupting fault or no checkpoint save to build it on.</p>")
        return out
    out.append(f"<p>Restart cost R = <b>{p['restart_s']:.2f} s</b> ({escape(p['measured_by']['restart_s'])}); "
               f"save stall delta = <b>{p['save_s']:.3f} s</b> ({escape(p['measured_by']['save_s'])}); checkpoint "
               f"interval used tau = <b>{p['interval_s']:.2f} s</b> ({escape(p['measured_by']['interval_s'])}).</p>")
    out.append(_table(["GPUs", "MTBF (h)", "goodput at tau used", "Young tau* (s)", "Daly tau* (s)",
                       "goodput at Young tau*", "gain"], [
        [f"{r['gpus']:,}", _n(r["mtbf_h"], "{:.3f}"), f"{r['goodput_used']:.2%}", _n(r["tau_young_s"], "{:.1f}"),
         _n(r["tau_daly_s"], "{:.1f}"), f"{r['goodput_young']:.2%}", f"{r['gain'] * 100:+.2f} points"]
        for r in p["rows"]], numeric=set(range(7))))
    played = p.get("played")
    if played:
        out.append(f"<p>The model on this run: {played['interruptions']} interruptions, one every "
                   f"{played['mtbf_s']:.1f} s of training, costing {played['restart_s']:.2f} s each, predict goodput "
                   f"<b>{played['predicted']:.1%}</b>; measured <b>{played['measured']:.1%}</b> (outside start-up "
                   f"and shut-down).</p>")
    out.append(f"<p class='dim'>Model: {escape(p['model'])}. Assumptions: {escape(p['assumptions'])}.</p>")
    return out
