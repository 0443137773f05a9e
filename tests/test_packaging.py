"""Packaging rules: the version, the license and metadata of a build, the pure modules' imports,
the client's import cost, the demo's needs."""

from __future__ import annotations

import ast
import configparser
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import mcpbridge
from conftest import REPO_ROOT, WAIT

PACKAGE = REPO_ROOT / "mcpbridge"

PURE_MODULES = (
    "mcpbridge/mcp/jsonrpc.py",
    "mcpbridge/mcp/protocol.py",
    "mcpbridge/mcp/transports/sse.py",
    "mcpbridge/mcp/netloc.py",
    "mcpbridge/mcp/numbers.py",
    "mcpbridge/mcp/server/results.py",
    "mcpbridge/mcp/server/registry.py",
    "mcpbridge/mcp/server/schema_infer.py",
    "mcpbridge/mcp/server/uritemplate.py",
    "mcpbridge/bridge/rules/legacy.py",
    "mcpbridge/bridge/front/lifecycle.py",
    "mcpbridge/bridge/rules/translate.py",
    "mcpbridge/bridge/rules/revisions.py",
    "mcpbridge/bridge/rules/errortable.py",
    "mcpbridge/bridge/rules/answers.py",
    "mcpbridge/bridge/front/dumptext.py",
    "mcpbridge/bridge/rules/input.py",
    "mcpbridge/bridge/rules/forms.py",
    "mcpbridge/bridge/rules/legacyshapes.py",
    "mcpbridge/bridge/rules/jsonshape.py",
    "mcpbridge/bridge/rules/lists.py",
    "mcpbridge/bridge/rules/tasks.py",
    "mcpbridge/bridge/rules/roundfailures.py",
    "mcpbridge/vscode/settings.py",
    "mcpbridge/vscode/forms.py",
    "mcpbridge/vscode/options.py",
    "mcpbridge/vscode/urls.py",
    "mcpbridge/vscode/words.py",
    "mcpbridge/vscode/headers.py",
    "mcpbridge/oauth/config.py",
    "mcpbridge/oauth/identity.py",
    "mcpbridge/oauth/stored.py",
    "mcpbridge/oauth/urls.py",
    "mcpbridge/oauth/challenge.py",
    "mcpbridge/oauth/tokens.py",
)
"""Modules that do no I/O, start no thread and read no clock."""

IMPURE_IMPORTS = frozenset(
    {
        "threading",
        "_thread",
        "socket",
        "ssl",
        "select",
        "selectors",
        "subprocess",
        "multiprocessing",
        "concurrent",
        "asyncio",
        "signal",
        "time",
        "webbrowser",
        "requests",
        "urllib3",
    }
)

HEAVY_DEPENDENCIES = frozenset({"requests", "urllib3", "keyring", "cryptography", "typer"})
"""Third-party packages that importing the stdio client must not pull in."""


def module_name(path: Path, root: Path = REPO_ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_path(name: str, root: Path = REPO_ROOT) -> Path | None:
    """The source file of a module under ``root``, or None for anything else (stdlib, third party)."""
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_names(path: Path, root: Path = REPO_ROOT) -> set[str]:
    """Every module a file imports, as absolute dotted names (relative imports resolved)."""
    module = module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                prefix = ".".join(parts[: len(parts) - (node.level - 1)])
                source = f"{prefix}.{node.module}" if node.module else prefix
            else:
                source = node.module or ""
            names.add(source)
            # `from pkg import name` imports pkg.name too when that is a module of ours.
            for alias in node.names:
                if module_path(f"{source}.{alias.name}", root) is not None:
                    names.add(f"{source}.{alias.name}")
    return names


def impure_imports(path: Path, root: Path = REPO_ROOT) -> list[str]:
    """Forbidden imports made by ``path`` or by a module of this package it imports, with the chain.

    A package's ``__init__`` is not followed: what it re-exports is an API choice, and the
    modules themselves are what a pure module depends on.
    """
    found: list[str] = []
    seen: set[Path] = set()
    todo: list[tuple[Path, str]] = [(path, module_name(path, root))]
    while todo:
        current, chain = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for name in sorted(imported_names(current, root)):
            if name.split(".")[0] in IMPURE_IMPORTS:
                found.append(f"{chain} imports {name}")
            if not name.startswith("mcpbridge."):
                continue
            target = module_path(name, root)
            if target is None:
                found.append(f"{chain} imports {name}, which the check cannot find")
            elif target.name != "__init__.py":
                todo.append((target, f"{chain} -> {name}"))
    return sorted(found)


def test_the_package_version_is_0_1_0_and_matches_the_installed_metadata() -> None:
    assert mcpbridge.__version__ == "0.1.0"
    assert importlib.metadata.version("mcpbridge") == mcpbridge.__version__


def test_the_console_script_is_mcp_bridge_vscode() -> None:
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / "setup.cfg", encoding="utf-8")
    scripts = config["options.entry_points"]["console_scripts"].split()
    assert scripts == ["mcp-bridge-vscode", "=", "mcpbridge.vscode.cli:main"]
    # An installation made before the move keeps its script working.
    installed = importlib.metadata.distribution("mcpbridge").entry_points.select(group="console_scripts")
    for entry in installed:
        assert callable(entry.load())


def test_the_package_ships_its_type_information() -> None:
    assert (PACKAGE / "py.typed").is_file()


def run_python(*args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run this interpreter with ``args`` in a child process; its output as text."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        cwd=cwd,
        check=False,
    )


APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
"""The SHA-256 of the Apache License 2.0 as the Apache Software Foundation publishes it."""

BUILD_INPUTS = ("setup.cfg", "pyproject.toml", "README.rst", "LICENSE")


def test_the_license_file_is_the_unmodified_apache_license_2_0() -> None:
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / "setup.cfg", encoding="utf-8")
    assert config["metadata"]["license"] == "Apache-2.0"
    assert config["metadata"]["license_files"].split() == ["LICENSE"]
    assert hashlib.sha256((REPO_ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_0_SHA256


def build_sdist(into: Path) -> Path:
    """An sdist of a copy of the sources, built as a build front end builds it; its path.

    The copy keeps the build's egg-info out of the checkout. The wheel's metadata is the
    same PKG-INFO, license files included, so the sdist's stands for both.
    """
    source = into / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        shutil.copy2(REPO_ROOT / name, source / name)
    shutil.copytree(PACKAGE, source / "mcpbridge", ignore=shutil.ignore_patterns("__pycache__"))
    done = run_python(
        "-c", "import setuptools.build_meta as b; print(b.build_sdist('dist'))", cwd=source, timeout=WAIT * 6
    )
    assert done.returncode == 0, done.stderr
    return source / "dist" / done.stdout.strip().splitlines()[-1]


def test_the_sdist_ships_the_license_and_its_metadata_names_it_and_every_supported_system(
    tmp_path: Path,
) -> None:
    sdist = build_sdist(tmp_path)
    top = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as archive:
        license_file = archive.extractfile(f"{top}/LICENSE")
        pkg_info = archive.extractfile(f"{top}/PKG-INFO")
        assert license_file is not None and pkg_info is not None
        assert license_file.read() == (REPO_ROOT / "LICENSE").read_bytes()
        metadata = pkg_info.read().decode("utf-8")
    fields = [line.partition(": ") for line in metadata.split("\n\n", 1)[0].splitlines()]
    assert ("License-File", ": ", "LICENSE") in fields
    classifiers = [value for name, _, value in fields if name == "Classifier"]
    systems = sorted(value for value in classifiers if value.startswith("Operating System ::"))
    assert systems == [
        "Operating System :: MacOS",
        "Operating System :: Microsoft :: Windows",
        "Operating System :: POSIX :: Linux",
    ]


def write_package(root: Path, files: dict[str, str]) -> None:
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")


def test_the_import_checker_resolves_relative_dotted_and_aliased_imports(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "mcpbridge/__init__.py": "",
            "mcpbridge/mcp/__init__.py": "",
            "mcpbridge/mcp/jsonrpc.py": "",
            "mcpbridge/mcp/protocol.py": "",
            "mcpbridge/bridge/__init__.py": "",
            "mcpbridge/bridge/translate.py": "",
            "mcpbridge/bridge/fake.py": "import time as clock\n"
            "from concurrent.futures import Future\n"
            "from . import translate\n"
            "from ..mcp import jsonrpc\n"
            "from ..mcp.protocol import MODERN\n",
        },
    )
    names = imported_names(tmp_path / "mcpbridge/bridge/fake.py", tmp_path)
    assert names == {
        "time",
        "concurrent.futures",
        "mcpbridge.bridge",
        "mcpbridge.bridge.translate",
        "mcpbridge.mcp",
        "mcpbridge.mcp.jsonrpc",
        "mcpbridge.mcp.protocol",
    }


def test_the_import_checker_follows_the_package_s_own_modules_but_not_package_inits(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "mcpbridge/__init__.py": "import threading\n",
            "mcpbridge/bridge/__init__.py": "",
            "mcpbridge/bridge/legacy.py": "from .helper import x\n",
            "mcpbridge/bridge/helper.py": "import socket\nx = 1\n",
        },
    )
    assert impure_imports(tmp_path / "mcpbridge/bridge/legacy.py", tmp_path) == [
        "mcpbridge.bridge.legacy -> mcpbridge.bridge.helper imports socket"
    ]


def test_the_import_checker_fails_on_a_module_of_the_package_that_it_cannot_find(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "mcpbridge/__init__.py": "",
            "mcpbridge/bridge/__init__.py": "",
            "mcpbridge/bridge/legacy.py": "from .gone import x\n",
        },
    )
    assert impure_imports(tmp_path / "mcpbridge/bridge/legacy.py", tmp_path) == [
        "mcpbridge.bridge.legacy imports mcpbridge.bridge.gone, which the check cannot find"
    ]


def test_every_module_of_the_folder_of_rules_is_in_the_pure_list() -> None:
    """``bridge/rules`` says by its name that its modules are pure; the list holds them to it."""
    folder = PACKAGE / "bridge" / "rules"
    modules = sorted(
        path.relative_to(REPO_ROOT).as_posix() for path in folder.glob("*.py") if path.name != "__init__.py"
    )
    assert modules, f"{folder} has no modules"
    assert [module for module in modules if module not in PURE_MODULES] == []


@pytest.mark.parametrize("relative", PURE_MODULES)
def test_pure_modules_import_nothing_that_does_io_threads_or_clocks(relative: str) -> None:
    path = REPO_ROOT / relative
    assert path.is_file(), f"{relative} does not exist: update PURE_MODULES"
    assert impure_imports(path) == []


def test_importing_the_client_pulls_in_no_http_keyring_crypto_or_cli_package() -> None:
    assert module_path("mcpbridge.mcp.client") is not None, "mcpbridge/mcp/client.py does not exist"
    done = run_python(
        "-X", "importtime", "-c", "import mcpbridge.mcp.client", cwd=REPO_ROOT, timeout=WAIT * 3
    )
    assert done.returncode == 0, done.stderr
    # Lines look like "import time:       123 |        456 |     package.module".
    loaded = {
        line.rpartition("|")[2].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert loaded, done.stderr
    assert sorted(name for name in loaded if name.split(".")[0] in HEAVY_DEPENDENCIES) == []


#: The packages of the test extras (setup.cfg) that the bridge itself never imports.
TEST_PACKAGES = ("pytest", "hypothesis", "jsonschema", "mcp", "uvicorn", "trustme")


def test_make_demo_installs_the_bridge_without_the_test_extras() -> None:
    # Under `make test` the variables of the outer make would reach this one (its directory
    # lines, its jobs): it runs as from a shell.
    outer = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    done = subprocess.run(
        ["make", "--no-print-directory", "--dry-run", "--always-make", "demo"],
        cwd=REPO_ROOT,
        env={name: value for name, value in os.environ.items() if name not in outer},
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=True,
    )
    commands = done.stdout.splitlines()
    assert ".venv/bin/python -m pip install -e ." in commands
    assert commands[-1] == ".venv/bin/python -m mcpbridge.demo_session"
    assert not [line for line in commands if "[test]" in line or "npm" in line or "node" in line]


def test_the_demo_runs_without_node_and_without_the_test_packages(tmp_path: Path) -> None:
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.partition('.')[0] in {TEST_PACKAGES!r}:\n"
        "            raise ImportError(name + ' belongs to the test extras')\n"
        "sys.meta_path.insert(0, Block())\n",
        encoding="utf-8",
    )
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty), "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO_ROOT}", "PYTHONUNBUFFERED": "1"}
    import_pytest = [sys.executable, "-c", "import pytest"]
    blocked = subprocess.run(import_pytest, env=env, capture_output=True, timeout=WAIT)
    assert blocked.returncode != 0 and b"belongs to the test extras" in blocked.stderr
    demo = subprocess.run(
        [sys.executable, "-m", "mcpbridge.demo_session"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT * 3,
    )
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "elicitation/create" in demo.stdout
    assert demo.stdout.rstrip().endswith("the bridge exited with code 0")
