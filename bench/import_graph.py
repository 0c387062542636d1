"""engram's import graph, measured from the source with `ast` (nothing is imported or run). Prints one JSON object.

    .venv/bin/python bench/import_graph.py [REPO_ROOT] [--detail] [--lazy]

Counted, for the package `engram` under REPO_ROOT (default: the current directory):

- import circles: strongly connected components (2 modules or more, plus modules that import themselves) of
  the module graph, (a) with every runtime import, top-level and function-local alike, and (b) with top-level
  imports only (what Python meets when it loads a module; what import-linter's default graph also shows
  without function-local ones). Imports under `if TYPE_CHECKING:` never run: counted apart, never an arrow.
- upward imports: arrows from a module of a lower level to one of a higher level, in the layer order
  (LEVELS below, bottom first), and sideways imports between independent parts of one level. A module on no level
  is not counted (listed under `unlayered`).
- function-local imports: `import`/`from ... import` statements inside a function body, all of them and
  those that name an engram module.
- loose modules: `engram/*.py` other than `__init__.py` and `__main__.py`.
- dynamic imports: "module:Class" strings handed to importlib (registries) are not arrows; listed apart.
- with --lazy: each function-local import classified (circle / fast_path / heavy / liftable; see classify_lazy).

An import of `a.b` from `a.b.c` resolves like grimp: `from engram.x import y` is an arrow to `engram.x.y`
when that is a module, else to `engram.x`; a package's `__init__` is the module `engram.x`.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT_PACKAGE = "engram"

# The layer order of docs/architecture.md (pyproject's `layers` contract), bottom first. Each level holds one or
# more parts; parts on one level are independent (an import between them counts as `sideways`). A part is a list
# of module prefixes, the longest prefix wins.
LEVELS: list[list[tuple[str, list[str]]]] = [
    [("kernel", ["engram.kernel"])],
    [("config", ["engram.config"])],
    [("events", ["engram.events"])],
    [("providers", ["engram.providers"])],
    [("memory", ["engram.memory"])],
    [("policies", ["engram.policies"]),
     ("projections", ["engram.projections"])],
    [("sql", ["engram.sql"])],
    [("shard", ["engram.shard"])],
    [("actors", ["engram.actors"])],
    [("runtime", ["engram.runtime"])],
    [("api", ["engram.api"])],
    [("mcp", ["engram.mcp"]), ("inspect", ["engram.inspect"])],
    [("server", ["engram.server"])],
    [("client", ["engram.client"])],
    [("cli", ["engram.cli"])],
    [("boot", ["engram.boot"]), ("__main__", ["engram.__main__"]),
     ("evaluation", ["engram.evaluation"])],
]
# The layers of docs/architecture.md by name, over those levels (for the report only).
GROUPS = {"kernel": "kernel", "config": "config", "events": "the log", "providers": "providers",
          "memory": "memory domain", "policies": "engine", "projections": "engine", "sql": "SQL", "shard": "engine",
          "actors": "runtime", "runtime": "runtime", "api": "API", "mcp": "interfaces", "inspect": "interfaces",
          "server": "interfaces", "client": "interfaces", "cli": "interfaces", "boot": "composition roots",
          "__main__": "composition roots", "evaluation": "composition roots"}


def module_name(path: Path, src: Path) -> str:
    rel = path.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


class Collector(ast.NodeVisitor):
    """Every import statement of one module, with where it stands (top level, a function, TYPE_CHECKING)."""

    def __init__(self, module: str, is_package: bool):
        self.module = module
        self.is_package = is_package
        self.depth = 0  # functions entered
        self.type_checking = 0
        self.found: list[dict] = []
        self.dynamic: list[str] = []

    def _where(self) -> str:
        if self.type_checking:
            return "type_checking"
        return "function" if self.depth else "top"

    def visit_FunctionDef(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_If(self, node):
        test = ast.unparse(node.test)
        if test in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            self.type_checking += 1
            for stmt in node.body:
                self.visit(stmt)
            self.type_checking -= 1
            for stmt in node.orelse:
                self.visit(stmt)
        else:
            self.generic_visit(node)

    def _absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = self.module.split(".")
        if not self.is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def visit_Import(self, node):
        for alias in node.names:
            self.found.append({"line": node.lineno, "where": self._where(), "targets": [alias.name], "from": None})

    def visit_ImportFrom(self, node):
        mod = self._absolute(node)
        self.found.append({"line": node.lineno, "where": self._where(), "from": mod,
                           "targets": [f"{mod}.{a.name}" for a in node.names]})

    def visit_Constant(self, node):
        if isinstance(node.value, str) and re.fullmatch(rf"{ROOT_PACKAGE}(\.\w+)+:\w+", node.value):
            self.dynamic.append(node.value)


def resolve(target: str, from_module: str | None, modules: set[str]) -> str | None:
    """The engram module an imported name lands on, or None for a name outside the package."""
    if not (target == ROOT_PACKAGE or target.startswith(ROOT_PACKAGE + ".")):
        return None
    if target in modules:
        return target
    if from_module is not None and from_module in modules:
        return from_module
    parts = target.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in modules:
            return cand
        parts.pop()
    return None


def place_of(module: str) -> tuple[int, str] | None:
    """(level, part) of a module: the longest matching prefix wins."""
    best: tuple[int, int, str] | None = None
    for level, parts in enumerate(LEVELS):
        for name, prefixes in parts:
            for p in prefixes:
                if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[0]):
                    best = (len(p), level, name)
    return None if best is None else (best[1], best[2])


def sccs(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan, iterative: the strongly connected components with two modules or more (or a self-loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1 or node in edges.get(node, ()):
                    out.append(sorted(comp))
    return sorted(out, key=lambda c: (-len(c), c))


# What `engram --help` loads (tests/test_architecture.py: every command module, the client, the server's instance
# file): a function-local import there keeps a command fast.
FAST_PATH_ROOTS = ("engram.cli.", "engram.client", "engram.server.instance")
HEAVY = {"ray", "duckdb", "numpy", "onnxruntime", "pydantic", "pyarrow", "fastapi", "httpx", "anthropic", "hnswlib",
         "mcp", "tokenizers", "starlette", "uvicorn", "plotly", "networkx", "Stemmer"}


def closure(start: str, edges: dict[str, set[str]]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def classify_lazy(modules, repo, edges_top, external_top, local_sites) -> dict:
    """Each function-local import of an engram module, classified:
    - circle: at the top it would close a circle of top-level imports (it may only become top-level after a cut);
    - fast_path: the importing module is loaded by `engram --help`, and the import would load a heavy package there;
    - heavy: it would load a heavy package (Ray, DuckDB, numpy, onnxruntime, the anthropic SDK, ...) into a module
      that loads none at its top (kept lazy on purpose, e.g. the anthropic SDK's second of import time);
    - liftable: none of these: it can move to the top of its module."""
    fast = set()
    for m in modules:
        if m.startswith(FAST_PATH_ROOTS) and not m.startswith("engram.cli.demo_"):
            fast |= closure(m, edges_top)
    def heavy_of(mods: set[str]) -> set[str]:
        return {e for m in mods for e in external_top.get(m, ())} & HEAVY
    out: dict[str, list[str]] = {"circle": [], "fast_path": [], "heavy": [], "liftable": []}
    for mod, dst, line in sorted(set(local_sites)):
        where = f"{modules[mod].relative_to(repo)}:{line} -> {dst}"
        reach = closure(dst, edges_top)
        brings = heavy_of(reach) - heavy_of(closure(mod, edges_top))
        if mod in reach:
            out["circle"].append(where)
        elif mod in fast and brings:
            out["fast_path"].append(where + f" ({', '.join(sorted(brings))})")
        elif brings:
            out["heavy"].append(where + f" ({', '.join(sorted(brings))})")
        else:
            out["liftable"].append(where)
    return {"counts": {k: len(v) for k, v in out.items()}, **out}


def main(argv: list[str]) -> int:
    detail = "--detail" in argv
    args = [a for a in argv if not a.startswith("--")]
    repo = Path(args[0] if args else ".").resolve()
    src = repo
    files = sorted((src / ROOT_PACKAGE).rglob("*.py"))
    modules = {module_name(f, src): f for f in files}
    names = set(modules)

    statements = Counter()
    engram_statements = Counter()
    edges_all: dict[str, set[str]] = defaultdict(set)
    edges_top: dict[str, set[str]] = defaultdict(set)
    sites: dict[tuple[str, str], list[str]] = defaultdict(list)  # (src, dst) -> ["where:line", ...]
    external_top: dict[str, set[str]] = defaultdict(set)  # module -> third-party packages it imports at its top
    local_sites: list[tuple[str, str, int]] = []  # (module, engram module, line) of each function-local import
    dynamic: dict[str, list[str]] = {}
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        col = Collector(mod, path.name == "__init__.py")
        col.visit(tree)
        if col.dynamic:
            dynamic[mod] = sorted(set(col.dynamic))
        for imp in col.found:
            statements[imp["where"]] += 1
            if imp["where"] == "top":
                for t in ([imp["from"]] if imp["from"] else imp["targets"]):
                    top = (t or "").split(".")[0]
                    if top and top != ROOT_PACKAGE and top not in sys.stdlib_module_names:
                        external_top[mod].add(top)
            hits = {resolve(t, imp["from"], names) for t in imp["targets"]} - {None}
            hits.discard(mod)
            if not hits:
                continue
            engram_statements[imp["where"]] += 1
            if imp["where"] == "type_checking":
                continue
            for dst in hits:
                edges_all[mod].add(dst)
                if imp["where"] == "top":
                    edges_top[mod].add(dst)
                else:
                    local_sites.append((mod, dst, imp["line"]))
                sites[(mod, dst)].append(f"{imp['where']}:{imp['line']}")

    nodes = sorted(names)
    circles_all = sccs(nodes, edges_all)
    circles_top = sccs(nodes, edges_top)

    upward, sideways = [], []
    for a in nodes:
        pa = place_of(a)
        for b in sorted(edges_all.get(a, ())):
            pb = place_of(b)
            if pa is None or pb is None or pa[1] == pb[1] or pb[0] < pa[0]:
                continue
            item = {"from": a, "to": b, "from_part": pa[1], "to_part": pb[1],
                    "at": [f"{modules[a].relative_to(repo)}:{s.split(':')[1]} ({s.split(':')[0]})" for s in sites[(a, b)]],
                    "top_level": any(s.startswith("top") for s in sites[(a, b)])}
            (upward if pb[0] > pa[0] else sideways).append(item)
    unlayered = sorted(m for m in nodes if place_of(m) is None)
    loose = sorted(str(f.relative_to(repo)) for f in (src / ROOT_PACKAGE).glob("*.py")
                   if f.name not in ("__init__.py", "__main__.py"))

    result = {
        "repo": str(repo),
        "modules": len(nodes),
        "import_statements": {"total": sum(statements.values()), **dict(statements)},
        "import_statements_of_engram_modules": {"total": sum(engram_statements.values()), **dict(engram_statements)},
        "function_local_imports_of_engram_modules": engram_statements["function"],
        "arrows": {"all_runtime": sum(len(v) for v in edges_all.values()),
                   "top_level": sum(len(v) for v in edges_top.values())},
        "circles_all_runtime_imports": len(circles_all),
        "circles_top_level_only": len(circles_top),
        "modules_in_circles_all": sum(len(c) for c in circles_all),
        "modules_in_circles_top": sum(len(c) for c in circles_top),
        "upward_imports": len(upward),
        "upward_imports_top_level": sum(1 for u in upward if u["top_level"]),
        "sideways_imports": len(sideways),
        "loose_top_level_modules": len(loose),
        "loose": loose,
        "levels_bottom_first": [" | ".join(name for name, _ in parts) for parts in LEVELS],
        "unlayered": unlayered,
    }
    if "--lazy" in argv:
        result["function_local_imports"] = classify_lazy(modules, repo, edges_top, external_top, local_sites)
    if detail:
        result["circles_top"] = circles_top
        result["circles_all"] = circles_all
        result["upward"] = upward
        result["sideways"] = sideways
        result["dynamic_imports"] = dynamic
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
