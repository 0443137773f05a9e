"""Dead code and stale text are test failures.

* Every cause of the error table is produced by some code path of the package.
* Every cross-reference in a docstring (``:class:`...```, ``:func:`...``` and the other
  roles) names something that exists.
* Every module whose docstring says that it is pure is in the enforced list of pure modules.

The package is read with :mod:`ast`, not imported, so that the modules of another system
(``platform/windows.py``) are read too. A reference outside the package (``time.monotonic``)
is looked up by importing its module.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from mcpbridge.bridge.rules.errortable import ERRORS
from test_packaging import PURE_MODULES

PACKAGE = REPO_ROOT / "mcpbridge"

_ROLE = re.compile(r":(?:class|func|meth|data|attr|mod|exc|obj|const):`!?~?([^`<>]+?)(?:\s*<([^`>]+)>)?`")


@dataclass
class Scope:
    """The names a module or a class defines, and where an imported name leads."""

    names: set[str] = field(default_factory=set)
    #: local name -> the dotted name it was imported as
    imports: dict[str, str] = field(default_factory=dict)
    classes: dict[str, Scope] = field(default_factory=dict)
    #: the bases of a class, as written
    bases: list[str] = field(default_factory=list)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


def _class_scope(node: ast.ClassDef) -> Scope:
    scope = Scope(bases=[ast.unparse(base) for base in node.bases])
    for item in node.body:
        _collect(item, scope)
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(item):
                target = sub.target if isinstance(sub, (ast.AnnAssign, ast.AugAssign)) else None
                targets = sub.targets if isinstance(sub, ast.Assign) else [target] if target else []
                for each in targets:
                    for leaf in ast.walk(each):
                        if (
                            isinstance(leaf, ast.Attribute)
                            and isinstance(leaf.value, ast.Name)
                            and leaf.value.id in ("self", "cls")
                        ):
                            scope.names.add(leaf.attr)
    return scope


def _collect(node: ast.stmt, scope: Scope) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        scope.names.add(node.name)
    elif isinstance(node, ast.ClassDef):
        scope.names.add(node.name)
        scope.classes[node.name] = _class_scope(node)
    elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    scope.names.add(leaf.id)
    elif isinstance(node, (ast.If, ast.Try, ast.With)):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                _collect(child, scope)
            elif isinstance(child, ast.ExceptHandler):
                for grandchild in child.body:
                    _collect(grandchild, scope)


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    scope: Scope

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


def _read(path: Path) -> Module:
    name = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    scope = Scope()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            is_package = path.name == "__init__.py"
            source = _absolute(name, is_package, node.level, node.module) if node.level else node.module
            for alias in node.names:
                scope.imports[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    scope.imports[alias.asname] = alias.name
                else:
                    scope.imports[alias.name.split(".")[0]] = alias.name.split(".")[0]
    for node in tree.body:
        _collect(node, scope)
    return Module(name, path, tree, scope)


MODULES: dict[str, Module] = {module_name(p): _read(p) for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve_in_package(dotted: str, depth: int = 0) -> bool | None:
    """True/False for a dotted name inside the package; None when it is outside it."""
    if depth > 10:
        return False
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = MODULES.get(".".join(parts[:cut]))
        if module is not None:
            return _resolve_in(module.scope, parts[cut:], depth) if cut < len(parts) else True
    return None if parts[0] != "mcpbridge" else False


def _resolve_in(scope: Scope, rest: list[str], depth: int) -> bool:
    if not rest:
        return True
    head, tail = rest[0], rest[1:]
    if head in scope.classes:
        return _resolve_class(scope.classes[head], tail, scope, depth)
    if head in scope.imports:
        return _resolve_dotted(".".join([scope.imports[head], *tail]), depth + 1)
    # An attribute of a value (a constant's member, an enum's) is not followed further.
    return head in scope.names


def _resolve_class(cls: Scope, rest: list[str], owner: Scope, depth: int) -> bool:
    if not rest:
        return True
    if rest[0] in cls.names and len(rest) == 1:
        return True
    if rest[0] in cls.classes:
        return _resolve_class(cls.classes[rest[0]], rest[1:], owner, depth)
    # Inherited: look in the bases, as written in the module of the class.
    for base in cls.bases:
        base_name = base.split("[")[0]
        head = base_name.split(".")[0]
        if head in owner.classes and owner.classes[head] is not cls:
            if _resolve_class(owner.classes[head], rest, owner, depth):
                return True
        elif head in owner.imports or "." in base_name:
            target = owner.imports.get(head, head) + base_name[len(head) :]
            if _resolve_dotted(".".join([target, *rest]), depth + 1):
                return True
    return False


def _resolve_dotted(dotted: str, depth: int = 0) -> bool:
    inside = _resolve_in_package(dotted, depth)
    if inside is not None:
        return inside
    parts = dotted.split(".")
    if len(parts) == 1 and hasattr(builtins, parts[0]):
        return True
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def _resolve(reference: str, module: Module, classes: list[str]) -> bool:
    reference = reference.strip().rstrip("()")
    if reference.startswith("."):
        level = len(reference) - len(reference.lstrip("."))
        rest = reference[level:]
        # Sphinx searches from the current module outwards.
        package = module.name if module.is_package else module.name.rsplit(".", 1)[0]
        candidates = [f"{module.name}.{rest}"]
        parts = package.split(".")
        for cut in range(len(parts), 0, -1):
            candidates.append(".".join([*parts[:cut], rest]))
        return any(_resolve_dotted(candidate) for candidate in candidates)
    parts = reference.split(".")
    # The enclosing classes first (a method's docstring names its siblings), then the module.
    for depth in range(len(classes), 0, -1):
        scope = module.scope
        for name in classes[:depth]:
            scope = scope.classes[name] if name in scope.classes else scope
        owner = module.scope
        if classes[depth - 1] in owner.classes or depth > 1:
            if _resolve_class(scope, parts, owner, 0):
                return True
    if parts[0] in module.scope.names or parts[0] in module.scope.imports or parts[0] in module.scope.classes:
        return _resolve_in(module.scope, parts, 0)
    if not classes and len(parts) == 1:
        # The module's docstring names a method of a class it defines ("the :meth:`send` of
        # the transport").
        if any(_resolve_class(cls, parts, module.scope, 0) for cls in module.scope.classes.values()):
            return True
    return _resolve_dotted(reference)


def docstrings(module: Module) -> Iterator[tuple[str, list[str], int]]:
    """(docstring, the enclosing classes, line) of the module and each class and function."""

    def walk(node: ast.AST, classes: list[str]) -> Iterator[tuple[str, list[str], int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = [*classes, child.name] if isinstance(child, ast.ClassDef) else classes
                text = ast.get_docstring(child, clean=False)
                if text:
                    yield text, inner, child.lineno
                yield from walk(child, inner)
            elif isinstance(child, ast.stmt):
                yield from walk(child, classes)

    text = ast.get_docstring(module.tree, clean=False)
    if text:
        yield text, [], 1
    yield from walk(module.tree, [])
    # The ``#:`` comments of the attributes are docstrings too, in the class they stand in.
    spans = [
        (node.lineno, node.end_lineno or node.lineno, node.name)
        for node in module.tree.body
        if isinstance(node, ast.ClassDef)
    ]
    for number, line in enumerate(module.path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("#:"):
            inside = [name for start, end, name in spans if start <= number <= end]
            yield line, inside, number


def references() -> Iterator[tuple[str, int, str, bool]]:
    for module in MODULES.values():
        for text, classes, line in docstrings(module):
            for match in _ROLE.finditer(text):
                target = match.group(2) or match.group(1)
                yield module.name, line, target, _resolve(target, module, classes)


def test_every_cross_reference_of_a_docstring_resolves() -> None:
    found = list(references())
    assert len(found) > 500, "the docstrings hold far fewer references than they do: is the reader broken?"
    broken = [f"{module}:{line}: {target}" for module, line, target, ok in found if not ok]
    assert broken == []


def test_the_reader_finds_a_broken_reference(tmp_path: Path) -> None:
    module = _read(PACKAGE / "mcp" / "numbers.py")
    assert _resolve("OutOfRange", module, [])
    assert _resolve(".errorbase.PeerFault", module, [])
    assert _resolve("OutOfRange.name", module, [])
    assert _resolve("time.monotonic", module, [])
    assert not _resolve("OutOfRange.nothing_here", module, [])
    assert not _resolve(".errorbase.NoSuchError", module, [])
    assert not _resolve("no_such_function", module, [])


# ----------------------------------------------------------------- the error table


def _producers() -> tuple[set[str], dict[str, set[str]], set[str]]:
    """The strings passed to calls, the classes by the cause they set, and the names called."""
    strings: set[str] = set()
    by_cause: dict[str, set[str]] = {}
    called: set[str] = set()
    for module in MODULES.values():
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Call):
                func = node.func
                called.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        strings.add(arg.value)
            elif isinstance(node, (ast.Return, ast.IfExp, ast.Compare, ast.BoolOp)):
                # A cause chosen by a condition: ``"a" if in_use else "b"``.
                for leaf in ast.walk(node):
                    if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str):
                        strings.add(leaf.value)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    value = item.value if isinstance(item, (ast.Assign, ast.AnnAssign)) else None
                    target = getattr(item, "target", None)
                    targets = item.targets if isinstance(item, ast.Assign) else [target]
                    if (
                        isinstance(value, ast.Constant)
                        and any(isinstance(t, ast.Name) and t.id == "cause" for t in targets)
                        and isinstance(value.value, str)
                    ):
                        by_cause.setdefault(value.value, set()).add(node.name)
    return strings, by_cause, called


def _subclasses(name: str) -> set[str]:
    found = {name}
    changed = True
    while changed:
        changed = False
        for module in MODULES.values():
            for node in ast.walk(module.tree):
                if isinstance(node, ast.ClassDef) and node.name not in found:
                    bases = {ast.unparse(b).split(".")[-1] for b in node.bases}
                    if bases & found:
                        found.add(node.name)
                        changed = True
    return found


@pytest.mark.parametrize("cause", sorted(ERRORS))
def test_every_cause_of_the_error_table_is_produced(cause: str) -> None:
    strings, by_cause, called = _producers()
    if cause in strings:
        return
    classes = by_cause.get(cause, set())
    assert classes, f"nothing in the package produces the cause {cause!r}: remove its row or produce it"
    made = {sub for name in classes for sub in _subclasses(name)} & called
    assert made, f"the error classes of {cause!r} ({', '.join(sorted(classes))}) are never made"


# ----------------------------------------------------------------- pure modules

_SAYS_PURE = re.compile(r"\b(?:this module is pure|is a pure module|pure:? (?:it )?(?:does|do) no I/O)", re.I)


def test_every_module_that_says_it_is_pure_is_enforced() -> None:
    says = {
        str(module.path.relative_to(REPO_ROOT))
        for module in MODULES.values()
        if _SAYS_PURE.search(ast.get_docstring(module.tree) or "")
    }
    assert len(says) >= 5
    assert sorted(says - set(PURE_MODULES)) == []
