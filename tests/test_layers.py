"""The package layers: no import cycles, no upward imports, no reaching into private names.

Every ``import`` in every module counts, those inside functions included: an import moved into a
function to dodge a cycle is still a cycle. The layers, lowest first::

    0 base        searchtome.{errors, io, records, settings, config, ...}  (top-level modules)
    1 ingest, llm
    2 dataset, sample
    3 generate, metrics
    4 submissions
    5 baselines, leaderboard, integrations (never each other)
    6 service                       (the scoring service: uses submissions, metrics, leaderboard)
    7 commands                      (the only layer that builds argparse parsers)
    8 searchtome (the facade), searchtome.cli, searchtome.__main__

A module may import its own package and anything on a lower layer, never a sibling package on
its own layer or anything above it.

Run ``python tests/test_layers.py`` for the module and function size tables.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Installed name -> folder in the repository (see [tool.setuptools] package-dir).
PACKAGE_DIRS = {
    "searchtome": ROOT / "searchtome",
    "searchtome.baselines": ROOT / "baselines",
}
LAYERS: dict[str, int] = {
    "ingest": 1,
    "llm": 1,
    "dataset": 2,
    "sample": 2,
    "generate": 3,
    "metrics": 3,
    "submissions": 4,
    "baselines": 5,
    "leaderboard": 5,
    "integrations": 5,
    "service": 6,
    "commands": 7,
    "cli": 8,
    "__main__": 8,
    "": 8,  # the package facade, searchtome/__init__.py
    "mteb": 8,  # searchtome.mteb / searchtome.ir_datasets: facades over integrations/
    "ir_datasets": 8,
}
ARGPARSE_LAYERS = {"commands", "cli", "__main__"}


@dataclass
class Module:
    name: str
    path: Path
    imports: dict[str, int] = field(default_factory=dict)  # module -> first line
    private: list[tuple[str, int]] = field(default_factory=list)  # "module._name", line

    @property
    def group(self) -> str:
        """The stage package (``ingest``), ``""`` for the facade, or the base module's name."""
        parts = self.name.split(".")
        return parts[1] if len(parts) > 1 else ""

    @property
    def layer(self) -> int:
        return LAYERS.get(self.group, 0)


def _module_files() -> Iterator[tuple[str, Path]]:
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder).with_suffix("").parts
            if package == "searchtome" and rel[0] == "baselines":
                continue
            parts = [p for p in rel if p != "__init__"]
            yield ".".join([package, *parts]), path


def collect() -> dict[str, Module]:
    modules = {name: Module(name, path) for name, path in _module_files()}
    for module in modules.values():
        _read_imports(module, modules)
    return modules


def _resolve(target: str, modules: dict[str, Module]) -> str | None:
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def _read_imports(module: Module, modules: dict[str, Module]) -> None:
    tree = ast.parse(module.path.read_text(), str(module.path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{module.path}:{node.lineno}: relative import"
            targets = [(f"{node.module}.{a.name}", (node.module, a.name)) for a in node.names]
        else:
            continue
        for target, origin in targets:
            if not target.startswith("searchtome"):
                continue
            resolved = _resolve(target, modules)
            if resolved and resolved != module.name:
                module.imports.setdefault(resolved, node.lineno)
            if origin and origin[1].startswith("_") and not origin[1].startswith("__"):
                module.private.append((f"{origin[0]}.{origin[1]}", node.lineno))


def _same_package(a: Module, b: Module) -> bool:
    return a.group == b.group and a.layer != 0


def upward_imports(modules: dict[str, Module]) -> list[str]:
    problems = []
    for module in modules.values():
        for name, line in module.imports.items():
            other = modules[name]
            if module.layer == max(LAYERS.values()):
                continue  # the facade and the console script sit on top of everything
            if _same_package(module, other) or other.layer < module.layer:
                continue
            if module.layer == 0 and other.layer == 0:
                continue  # base modules form a small acyclic set, checked by the cycle test
            problems.append(
                f"{module.path.relative_to(ROOT)}:{line}: {module.name} (layer {module.layer}) "
                f"imports {name} (layer {other.layer})"
            )
    return problems


def cycles(modules: dict[str, Module]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        on_stack.add(name)
        for dep in modules[name].imports:
            if dep not in index:
                visit(dep)
                low[name] = min(low[name], low[dep])
            elif dep in on_stack:
                low[name] = min(low[name], index[dep])
        if low[name] == index[name]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == name:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for name in sorted(modules):
        if name not in index:
            visit(name)
    return found


def test_modules_are_found() -> None:
    modules = collect()
    assert "searchtome.cli" in modules
    assert "searchtome.baselines.registry" in modules
    assert "searchtome.submissions.validate" in modules
    assert len(modules) > 50


def test_no_import_cycles() -> None:
    modules = collect()
    # Edges from a package's __init__ to its own modules (lazy re-exports) are part of the package.
    for module in modules.values():
        if module.path.name == "__init__.py":
            module.imports = {
                k: v for k, v in module.imports.items() if not k.startswith(module.name + ".")
            }
    assert cycles(modules) == []


def test_no_upward_imports() -> None:
    assert upward_imports(collect()) == []


def test_baselines_and_leaderboard_are_independent() -> None:
    modules = collect()
    crossing = [
        f"{m.name} -> {dep}"
        for m in modules.values()
        for dep in m.imports
        if {m.group, modules[dep].group} == {"baselines", "leaderboard"}
    ]
    assert crossing == []


def test_no_private_names_across_modules() -> None:
    modules = collect()
    reaching = [
        f"{m.path.relative_to(ROOT)}:{line}: {name}"
        for m in modules.values()
        for name, line in m.private
    ]
    assert reaching == []


def test_argparse_only_in_the_command_layer() -> None:
    offenders = []
    for module in collect().values():
        if module.group in ARGPARSE_LAYERS:
            continue
        tree = ast.parse(module.path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if "argparse" in names:
                offenders.append(f"{module.path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_the_checker_sees_a_planted_cycle(tmp_path: Path) -> None:
    # The checker itself can fail: two modules importing each other inside functions.
    a = Module("searchtome.ingest.a", tmp_path / "a.py", imports={"searchtome.ingest.b": 3})
    b = Module("searchtome.ingest.b", tmp_path / "b.py", imports={"searchtome.ingest.a": 9})
    c = Module("searchtome.errors", tmp_path / "c.py", imports={"searchtome.ingest.a": 1})
    modules = {m.name: m for m in (a, b, c)}
    for m in modules.values():
        m.path.write_text("")
    assert cycles(modules) == [["searchtome.ingest.a", "searchtome.ingest.b"]]
    c.path = ROOT / "searchtome" / "errors.py"
    assert len(upward_imports(modules)) == 1


def size_tables(limit_module: int = 600, limit_function: int = 100) -> str:
    """Modules over ``limit_module`` lines and functions over ``limit_function`` lines."""
    modules = collect()
    sizes = sorted(
        (
            (len(m.path.read_text().splitlines()), m.path.relative_to(ROOT))
            for m in modules.values()
        ),
        reverse=True,
    )
    functions = []
    for m in modules.values():
        for node in ast.walk(ast.parse(m.path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit_function:
                    where = f"{m.path.relative_to(ROOT)}:{node.lineno} {node.name}"
                    functions.append((length, where))
    functions.sort(reverse=True)
    over = [s for s in sizes if s[0] > limit_module]
    lines = [f"modules: {len(sizes)}, over {limit_module} lines: {len(over)}; largest:"]
    lines += [f"  {n:5d}  {path}" for n, path in sizes[:10]]
    lines.append(f"functions over {limit_function} lines: {len(functions)}")
    lines += [f"  {n:5d}  {where}" for n, where in functions]
    return "\n".join(lines)


if __name__ == "__main__":
    print(size_tables())
