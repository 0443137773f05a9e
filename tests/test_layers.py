"""The structure of the package: the layers, and the one tree of its errors.

Each module imports its own layer or a lower one, and no modules import each other.

From the bottom: ``mcpbridge.mcp`` and ``mcpbridge.log``; ``mcpbridge.oauth``;
``mcpbridge.bridge``; ``mcpbridge.embed``, ``mcpbridge.vscode``, the examples and
the demo modules on top. Every import counts: at the top of a module, inside a
function, and under ``TYPE_CHECKING``. The imports are read from the source with
:mod:`ast`, so a module that fails to import still gets checked.

Every exception class of the package roots in
:class:`mcpbridge.mcp.errorbase.BridgeError`.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcpbridge.mcp.errorbase import BridgeError

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "mcpbridge"

#: The layer of each top-level part of the package; a higher number is a higher layer.
LAYERS: dict[str, int] = {
    "mcpbridge": 0,  # the package itself: only __version__
    "mcpbridge.mcp": 0,
    "mcpbridge.log": 0,
    "mcpbridge.platform": 0,
    "mcpbridge.oauth": 1,
    "mcpbridge.bridge": 2,
    "mcpbridge.embed": 3,
    "mcpbridge.vscode": 3,
    "mcpbridge.examples": 3,
    "mcpbridge.demo": 3,
    "mcpbridge.demo_session": 3,
    "mcpbridge.__main__": 3,
}


@dataclass(frozen=True)
class Module:
    name: str
    path: Path

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


def modules() -> dict[str, Module]:
    """Every module of the package by dotted name."""
    found: dict[str, Module] = {}
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        found[name] = Module(name, path)
    return found


def layer_of(name: str) -> int:
    """The layer of the module ``name``: the entry of :data:`LAYERS` with the longest prefix."""
    best = ""
    for prefix in LAYERS:
        if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    if not best:
        raise AssertionError(f"{name} belongs to no layer: add it to LAYERS in {Path(__file__).name}")
    return LAYERS[best]


def imported_names(module: Module, known: dict[str, Module]) -> Iterator[str]:
    """The modules of the package that ``module`` imports, anywhere in its source."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "mcpbridge" or alias.name.startswith("mcpbridge."):
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                if node.level > 1:
                    base_parts = base_parts[: -(node.level - 1)]
                base = ".".join(base_parts)
                if node.module:
                    base = f"{base}.{node.module}"
            else:
                base = node.module or ""
                if base != "mcpbridge" and not base.startswith("mcpbridge."):
                    continue
            for alias in node.names:
                # ``from package import module`` imports the module; else a name of ``base``.
                candidate = f"{base}.{alias.name}"
                yield candidate if candidate in known else base


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, module in known.items():
        targets = set()
        for target in imported_names(module, known):
            if target not in known:
                raise AssertionError(f"{name} imports {target}, which is not a module of the package")
            if target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The cycles of ``graph``: its strongly connected parts with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    parts: list[tuple[str, ...]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                part.append(member)
                if member == node:
                    break
            if len(part) > 1:
                parts.append(tuple(sorted(part)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return parts


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_the_check_finds_the_modules_of_every_layer(graph: dict[str, set[str]]) -> None:
    assert len(graph) >= 40, f"found only {len(graph)} modules under {PACKAGE_ROOT}"
    for name in ("mcpbridge.mcp.client", "mcpbridge.log", "mcpbridge.oauth.signin", "mcpbridge.vscode.cli"):
        assert name in graph
    assert {layer_of(name) for name in graph} == {0, 1, 2, 3}
    # The check sees imports inside functions and under TYPE_CHECKING.
    assert "mcpbridge.bridge.front.frontend" in graph["mcpbridge.bridge.front.consent"]
    assert "mcpbridge.bridge.front.frontend" in graph["mcpbridge.vscode.serve_url"]


def test_every_module_imports_only_its_own_layer_or_lower_ones(graph: dict[str, set[str]]) -> None:
    upward = {
        (name, target)
        for name, targets in graph.items()
        for target in targets
        if layer_of(target) > layer_of(name)
    }
    assert sorted(upward) == []


def test_no_modules_import_each_other(graph: dict[str, set[str]]) -> None:
    assert strongly_connected(graph) == []


#: The parts of the front end that the upstream sessions write to and read from: the output,
#: the options, the client's answers, the slots, the list rules and the text of a dump.
CONNECTION_PARTS = frozenset(
    f"mcpbridge.bridge.front.{name}"
    for name in ("output", "options", "pending", "slots", "listrules", "dumptext")
)


def test_the_sessions_see_the_front_end_only_through_its_connection_parts(graph: dict[str, set[str]]) -> None:
    # The folders front/ and sessions/ import each other, but not at random: the front end's top
    # (frontend, initialize) drives the sessions, and the sessions use the connection parts,
    # which import nothing of the sessions.
    front, sessions = "mcpbridge.bridge.front.", "mcpbridge.bridge.sessions."
    seen = {t for name, ts in graph.items() if name.startswith(sessions) for t in ts if t.startswith(front)}
    assert seen <= CONNECTION_PARTS, sorted(seen - CONNECTION_PARTS)
    assert {"mcpbridge.bridge.front.output", "mcpbridge.bridge.front.options"} <= seen
    below = {name for part in CONNECTION_PARTS for name in reachable(graph, part)}
    assert not {name for name in below if name.startswith(sessions)}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module that ``start`` imports, directly or through others."""
    found: set[str] = set()
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), set()):
            if target not in found:
                found.add(target)
                todo.append(target)
    return found


def test_the_check_finds_an_upward_import_and_a_cycle() -> None:
    fake = {"mcpbridge.mcp.a": {"mcpbridge.bridge.b"}, "mcpbridge.bridge.b": {"mcpbridge.mcp.a"}}
    assert layer_of("mcpbridge.mcp.a") < layer_of("mcpbridge.bridge.b")
    assert strongly_connected(fake) == [("mcpbridge.bridge.b", "mcpbridge.mcp.a")]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class that a module of the package defines, by dotted name."""
    found: dict[str, type[BaseException]] = {}
    for name in modules():
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                found[f"{name}.{value.__qualname__}"] = value
    return found


def test_every_error_of_the_package_roots_in_bridge_error() -> None:
    classes = exception_classes()
    assert len(classes) >= 40, f"found only {len(classes)} exception classes"
    assert sorted(name for name, cls in classes.items() if not issubclass(cls, BridgeError)) == []
