"""The package's layout, measured from every import: modules per room, long modules, and import circles.

A room is a module directly in ``chaos/`` or a whole subpackage (``chaos.faults``). Every import counts:
top level, inside functions, and under ``TYPE_CHECKING`` (a reader follows those too). Prints the
counts and each circle (strongly connected component) between modules and between rooms; with
``--check`` exits 1 when the layout breaks the limits of issue 33 (no circle between modules or
rooms, at most ``--max-top`` modules directly in chaos/, none over ``--max-lines`` lines, every
subpackage's ``__init__`` with a docstring).

    python ci/layout.py [--check]
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "chaos"


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The package module an imported name lives in (``chaos.a.b.C`` -> ``chaos.a.b``)."""
    while name:
        if name in mods:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package modules it imports, anywhere in its file."""
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                names = [f"{prefix}.{a.name}" for a in node.names] + [prefix]
            for name in names:
                if not name.startswith(PACKAGE):
                    continue
                target = _resolve(name, mods)
                if target and target != mod:
                    graph[mod].add(target)
    # "from chaos.x import y" also names chaos.x.y when y is a module; the prefix alone names chaos.x.
    return graph


def room(mod: str) -> str:
    parts = mod.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else mod


def rooms_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        r = room(mod)
        out.setdefault(r, set())
        for d in deps:
            if room(d) != r:
                out[r].add(room(d))
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out, key=len, reverse=True)


def problems(root: Path = ROOT, max_top: int = 12, max_lines: int = 450) -> tuple[list[str], dict[str, object]]:
    mods = modules(root)
    graph = imports(mods)
    mod_circles = circles(graph)
    room_circles = circles(rooms_graph(graph))
    top = [m for m, p in mods.items() if m.count(".") == 1 and p.name != "__init__.py"]
    lines = {m: len(p.read_text().splitlines()) for m, p in mods.items()}
    long = sorted((m for m, n in lines.items() if n > max_lines), key=lambda m: -lines[m])
    undocumented = [m for m, p in mods.items() if p.name == "__init__.py" and ast.get_docstring(ast.parse(p.read_text())) is None]
    found = []
    found += [f"import circle between modules: {' <-> '.join(c)}" for c in mod_circles]
    found += [f"import circle between rooms ({len(c)}): {', '.join(c)}" for c in room_circles]
    if len(top) > max_top:
        found.append(f"{len(top)} modules directly in chaos/ (at most {max_top})")
    found += [f"{m}: {lines[m]} lines (at most {max_lines})" for m in long]
    found += [f"{m}: a package without a docstring saying what it owns" for m in undocumented]
    figures = {"modules": len(mods), "top_level": len(top), "module_circles": [len(c) for c in mod_circles],
               "room_circles": [len(c) for c in room_circles], "rooms": len(rooms_graph(graph)),
               "long": {m: lines[m] for m in long}}
    return found, figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the layout breaks a limit")
    ap.add_argument("--max-top", type=int, default=12)
    ap.add_argument("--max-lines", type=int, default=450)
    args = ap.parse_args()
    found, figures = problems(max_top=args.max_top, max_lines=args.max_lines)
    for key, value in figures.items():
        print(f"{key}: {value}")
    for line in found:
        print(f"- {line}")
    return 1 if args.check and found else 0


if __name__ == "__main__":
    sys.exit(main())
