"""The architecture as the README draws it, checked from the code itself.

Every import counts, function-local ones too (they are how cycles hide):
between top-level packages, which import only the layers below them, and
between the modules of one package, which import one another without a
cycle either (tasks import services, never the reverse: services hand work
to tasks by name through ``core.dispatch``)."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
#: App code: what the layers are about. Tests, benchmarks and migrations aside.
PACKAGES = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists() and p.name not in {"tests", "bench"})
#: Bottom to top. A package may import only packages below it.
LAYERS = [
    {"core"},
    {"accounts"},
    {"api"},
    {"acquirers"},
    {"webhooks"},
    {"payments", "withdrawals"},
    {"infractions", "due_charges", "recurrences"},
    {"reconciliation"},
    {"staff"},
    {"observability", "provisioning", "dev"},
    {"config"},
]
MAX_LINES = 400


def app_modules() -> Iterator[Path]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.relative_to(ROOT).parts:
                yield path


def imported_packages(path: Path) -> Iterator[tuple[str, int]]:
    """(top-level package, line) of every absolute import in ``path``, at any depth."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            yield name.split(".")[0], node.lineno


def module_name(path: Path) -> str:
    """``withdrawals/services.py`` -> ``withdrawals.services``; a package's ``__init__.py`` is the package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: set[str]) -> Iterator[tuple[str, int]]:
    """(module of ``modules``, line) of every import in ``path``, at any depth.

    ``from pkg import name`` imports ``pkg.name`` when that is a module, and
    ``pkg`` (its ``__init__``) otherwise; ``import pkg.mod`` imports
    ``pkg.mod``. Relative imports are resolved from ``path``'s package."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1] if node.level else [])
            source = ".".join(p for p in (base, node.module or "") if p)
            names = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
        else:
            continue
        for name in names:
            # ``import a.b.c`` of a name inside a module: the longest prefix that is one.
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                yield name, node.lineno


def module_graph() -> dict[str, dict[str, dict[str, list[str]]]]:
    """package -> its module -> module of the same package it imports -> where ("path:line").

    Python runs ``pkg/__init__.py`` before any module of ``pkg``: that
    implicit import does not count, only what a module names. A submodule
    that takes names from its own package's ``__init__`` while the
    ``__init__`` imports it back is a cycle (the adapters' registry was one);
    an ``__init__`` that imports a submodule which takes nothing from it is
    not (``config/__init__.py`` loading ``config.celery``, Celery's pattern:
    ``from config import broker`` there imports the module ``config.broker``)."""
    paths = {module_name(path): path for path in app_modules()}
    edges: dict[str, dict[str, dict[str, list[str]]]] = {p: {} for p in PACKAGES}
    for source, path in paths.items():
        package = source.split(".")[0]
        targets = edges[package].setdefault(source, {})
        for target, line in imported_modules(path, set(paths)):
            if target != source and target.split(".")[0] == package:
                targets.setdefault(target, []).append(f"{path.relative_to(ROOT)}:{line}")
    return edges


def graph() -> dict[str, dict[str, list[str]]]:
    """package -> imported package -> where ("path:line")."""
    edges: dict[str, dict[str, list[str]]] = {p: {} for p in PACKAGES}
    for path in app_modules():
        source = path.relative_to(ROOT).parts[0]
        for target, line in imported_packages(path):
            if target in PACKAGES and target != source:
                edges[source].setdefault(target, []).append(f"{path.relative_to(ROOT)}:{line}")
    return edges


def find_cycle(edges: dict[str, dict[str, list[str]]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, {})):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_every_package_has_a_layer() -> None:
    placed = set().union(*LAYERS)
    assert set(PACKAGES) <= placed, f"place these in LAYERS (and the README's picture): {set(PACKAGES) - placed}"


def test_the_packages_import_one_another_without_a_cycle() -> None:
    edges = graph()
    cycle = find_cycle(edges)
    where = [edges[a][b][0] for a, b in itertools.pairwise(cycle)] if cycle else []
    assert cycle is None, f"import cycle {' -> '.join(cycle or [])}: {where}"


def test_the_modules_of_a_package_import_one_another_without_a_cycle() -> None:
    cycles = [
        f"{' -> '.join(cycle)}: {[edges[a][b][0] for a, b in itertools.pairwise(cycle)]}"
        for edges in module_graph().values()
        if (cycle := find_cycle(edges)) is not None
    ]
    assert cycles == [], "import cycles inside a package (one per package):\n" + "\n".join(cycles)


def test_a_package_imports_only_the_layers_below_it() -> None:
    level = {package: i for i, layer in enumerate(LAYERS) for package in layer}
    upward = [
        f"{source} -> {target} ({places[0]})"
        for source, targets in graph().items()
        for target, places in targets.items()
        if level.get(target, -1) >= level.get(source, len(LAYERS))
    ]
    assert upward == []


def test_no_module_of_app_code_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in app_modules()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_cycle_finder_finds_one() -> None:
    # The check itself must be able to fail.
    assert find_cycle({"a": {"b": []}, "b": {"c": []}, "c": {"a": []}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": []}, "b": {}}) is None
