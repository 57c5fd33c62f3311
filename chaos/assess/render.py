"""The card as the user reads it: a terminal table, report.md, report.html (one self-contained page, like a run's),
and card.json (the same rows as data)."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape as rich_escape
from rich.table import Table

from chaos.report.html import CSS, _table

HEAD = ["failure class", "survived", "work lost", "recovery", "exactly-once", "checkpoint integrity", "finding"]
STYLE = {"yes": "bold green", "no": "bold red", "only by luck": "bold red", "not tested": "yellow",
         "not run": "dim", "error": "bold magenta", "?": "yellow", "not proven": "yellow"}
COLOUR = {"yes": "#2e7d32", "no": "#c62828", "only by luck": "#c62828", "not tested": "#b7791f", "not run": "#777",
          "error": "#8e24aa", "?": "#b7791f", "not proven": "#b7791f"}


def _lost(row: dict[str, Any]) -> str:
    parts = []
    if row.get("lost_steps") is not None:
        parts.append(f"{row['lost_steps']} steps")
    if row.get("lost_s") is not None:
        parts.append(f"{row['lost_s']:.1f} s")
    return ", ".join(parts) or "-"


def _recovery(row: dict[str, Any]) -> str:
    return "-" if row.get("recovery_s") is None else f"{row['recovery_s']:.1f} s"


def cells(row: dict[str, Any]) -> list[str]:
    finding = row["finding"] + (f" Remedy: {row['remedy']}." if row.get("remedy") else "")
    return [row["failure_class"], row["survived"], _lost(row), _recovery(row), row.get("exactly_once") or "-",
            row.get("integrity") or "-", finding]


def observation_lines(card: dict[str, Any]) -> list[str]:
    o = card["observation"]
    protocol = ("speaks the event protocol" if o["speaks_protocol"] else
                "does not speak the event protocol: " + (o["step_regex_note"] or "no step counter found"))
    saves = (f"saved at steps {', '.join(map(str, o['saves'][:8]))}{' ...' if len(o['saves']) > 8 else ''} "
             f"(every {o['save_every']} steps, {o['save_s']} s each)" if o["saves"] else
             f"checkpoint files seen: {', '.join(o['files'][:4])}" if o["files"] else "no checkpoint seen")
    return [f"job: {card['job']}",
            f"stack (from its source): {', '.join(o['stack']) or 'plain PyTorch'}; world size {o['world_size'] or '?'}",
            f"the job {protocol}",
            f"fault-free run: {o['wall_s']:.1f} s, {o['final_step']} steps, step {o['step_s']} s ({o['step_s_how']}), "
            + (f"start-up {o['startup_s']} s" if o["startup_s"] is not None else "start-up not seen"),
            saves,
            "samples per step traced" if o["samples_traced"] else "samples per step not traced (exactly-once "
                                                                   "cannot be judged)"]


def print_card(card: dict[str, Any], console: Console) -> None:
    table = Table(title="resilience report card", show_lines=False)
    for h in HEAD:
        table.add_column(h, overflow="fold")
    for row in card["rows"]:
        c = [rich_escape(x) for x in cells(row)]
        c[1] = f"[{STYLE.get(row['survived'], '')}]{c[1]}[/]"
        table.add_row(*c)
    console.print(table)
    if card.get("scale"):
        s = card["scale"]
        console.print(f"at {s['gpus']} GPUs (MTBF {s['mtbf_h']} h): expected goodput {s['goodput']:.1%} "
                      f"(restart {s['restart_s']} s, save {s['save_s']} s every {s['interval_s']} s; {s['source']})")
    elif card.get("scale_note"):
        console.print(rich_escape(card["scale_note"]))


def markdown(card: dict[str, Any]) -> str:
    out = [f"# Resilience report card: {card['job']}", ""]
    out += [f"- {line}" for line in observation_lines(card)] + [""]
    out += ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    for row in card["rows"]:
        out.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells(row)) + " |")
    out.append("")
    out += _scale_md(card)
    out += ["## Experiments", "", "Each row's experiment is kept as a YAML file: run them again with "
            "`pytest <folder>` or `chaos run <file>`.", ""]
    for row in card["rows"]:
        where = f"`{row['experiment']}`" if row.get("experiment") else "(none)"
        out.append(f"- {row['failure_class']}: {where}" + (f", run in `{row['run_dir']}`" if row.get("run_dir") else ""))
        for c in row.get("checks") or []:
            out.append(f"  - {c['check']}: {c['verdict'].upper()} {c['reason']}")
    return "\n".join(out) + "\n"


def _scale_md(card: dict[str, Any]) -> list[str]:
    s = card.get("scale")
    if not s:
        return [f"At scale: {card.get('scale_note') or 'not asked for (--project-gpus N)'}", ""]
    lines = [f"## At {s['gpus']} GPUs", "",
             f"Expected goodput **{s['goodput']:.1%}**: a failure every {s['mtbf_h']} h ({s['source']}), each "
             f"costing a restart of {s['restart_s']} s and half a save interval of {s['interval_s']} s; each save "
             f"holds training {s['save_s']} s.", ""]
    lines += [f"- {k}: {v}" for k, v in s["how"].items()]
    return lines + [""]


def html(card: dict[str, Any]) -> str:
    title = f"Resilience report card: {card['job']}"
    rows = []
    for row in card["rows"]:
        c = [escape(x) for x in cells(row)]
        c[1] = (f'<span class="v" style="background:{COLOUR.get(row["survived"], "#555")}">{c[1]}</span>')
        rows.append(c)
    s = card.get("scale")
    scale = (f"<h2>At {s['gpus']} GPUs</h2><p>Expected goodput <b>{s['goodput']:.1%}</b>: a failure every "
             f"{s['mtbf_h']} h ({escape(s['source'])}), restart {s['restart_s']} s, save {s['save_s']} s every "
             f"{s['interval_s']} s.</p><ul>" + "".join(f"<li>{escape(k)}: {escape(v)}</li>" for k, v in s["how"].items())
             + "</ul>") if s else f"<p>{escape(card.get('scale_note') or '')}</p>"
    experiments = "".join(
        f"<li>{escape(r['failure_class'])}: <code>{escape(r.get('experiment') or '(none)')}</code></li>"
        for r in card["rows"])
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            f"<header style='background:#263238'><h1>{escape(title)}</h1></header><main>"
            "<ul id='observation'>" + "".join(f"<li>{escape(x)}</li>" for x in observation_lines(card)) + "</ul>"
            f"<h2>Card</h2>{_table(HEAD, rows)}{scale}<h2>Experiments</h2><ul>{experiments}</ul>"
            "</main></body></html>")


def write(card: dict[str, Any], out: Path) -> list[Path]:
    paths = []
    for name, text in (("card.json", json.dumps(card, indent=1, default=str)), ("report.md", markdown(card)),
                       ("report.html", html(card))):
        path = out / name
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
        paths.append(path)
    return paths
