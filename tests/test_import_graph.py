"""No two packages of clusterable import each other, not even inside a function.

Every ``import clusterable.X`` / ``from clusterable.X import ...`` / ``from clusterable import X``
in ``src/clusterable`` is an edge from the importing package (the first level below
``clusterable``) to ``X``; imports under ``if TYPE_CHECKING:`` are left out (they never run). A
name that ``clusterable/__init__.py`` re-exports (``from clusterable import TrainedRun``) is an
edge to the package it comes from; one that it defines itself (``__version__``) is none: the root
package is imported before any of its modules. The graph must have no cycle.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "clusterable"


def package_of(path: Path, package: Path = PACKAGE) -> str:
    return path.relative_to(package).parts[0].removesuffix(".py")


def is_package(name: str, package: Path = PACKAGE) -> bool:
    """Whether ``clusterable.name`` is a package or module (not a name in ``__init__``)."""
    return (package / name).is_dir() or (package / f"{name}.py").is_file()


@cache
def reexported(package: Path = PACKAGE) -> dict[str, str]:
    """Name -> package, for each name ``clusterable/__init__.py`` imports from a package: at its
    top, inside a function (a PEP 562 ``__getattr__``), or named in a mapping of a PEP 562
    ``__getattr__`` (``{"TrainedRun": "clusterable.trained_run"}``)."""
    found = {}
    for node in ast.walk(ast.parse((package / "__init__.py").read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("clusterable."):
            for alias in node.names:
                found[alias.asname or alias.name] = node.module.split(".")[1]  # type: ignore[union-attr]
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and isinstance(value, ast.Constant)
                    and str(value.value).startswith("clusterable.")
                ):
                    found[str(key.value)] = str(value.value).split(".")[1]
    return found


def imported_packages(path: Path, package: Path = PACKAGE) -> set[str]:
    tree = ast.parse(path.read_text())
    type_checking = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_checking:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "clusterable":
            for alias in node.names:  # from clusterable import cluster, TrainedRun, __version__
                if is_package(alias.name, package):
                    found.add(alias.name)
                elif alias.name in reexported(package):
                    found.add(reexported(package)[alias.name])
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found |= {n.split(".")[1] for n in names if n.startswith("clusterable.")}
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        source = package_of(path, package)
        graph.setdefault(source, set()).update(imported_packages(path, package) - {source})
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes, or None (depth-first search)."""
    state: dict[str, str] = {}
    trail: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        trail.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return [*trail[trail.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = "done"
        trail.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_packages_import_each_other_in_one_direction_only():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_check_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert "train" in import_graph()["recipe"]  # the graph is read from the source


def test_the_graph_sees_imports_from_the_root_package(tmp_path):
    package = tmp_path / "clusterable"
    files = {
        "__init__.py": "__version__ = '0'\n\n\ndef __getattr__(name):  # PEP 562\n"
        "    from clusterable.b.thing import Thing\n\n    return Thing\n",
        "a/__init__.py": "from clusterable import __version__, b\n",
        "b/__init__.py": "",
        "b/thing.py": "def f():\n    from clusterable import a\n",
        "c.py": "from clusterable import Thing\n",
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    graph = import_graph(package)
    assert graph == {"__init__": {"b"}, "a": {"b"}, "b": {"a"}, "c": {"b"}}
    assert find_cycle(graph) == ["b", "a", "b"]  # from __init__, the first node
