"""Run the bridge's entry points as if this were another system: ``other_system.py SYSTEM ARGS...``.

``sys.platform`` is set to SYSTEM (``win32`` or ``darwin``) before anything of
``mcpbridge`` loads. For ``win32`` the POSIX-only modules cannot be imported,
``select.poll`` is gone and ``msvcrt`` is an empty stand-in, so an import that
needs a POSIX module, or a check of the system at import time that takes the
wrong branch, fails here. ARGS ``import`` imports the modules of ``--help``, the
embedded mode and ``check``; other ARGS run ``mcp-bridge-vscode ARGS``.

This proves the imports, not the behaviour on that system.
"""

from __future__ import annotations

import importlib
import importlib.abc
import runpy
import select
import sys
import types
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

POSIX_ONLY = frozenset({"fcntl", "termios", "pwd", "grp", "resource", "posix", "tty", "pty"})
#: The standard modules that look at the system when they load: loaded first, as this system's.
STANDARD = (
    "subprocess",
    "ctypes",
    "ctypes.util",
    "ctypes.wintypes",
    "socket",
    "ssl",
    "shutil",
    "tempfile",
    "uuid",
    "mimetypes",
    "platform",
    "getpass",
    "locale",
    "http.client",
    "urllib.request",
    "concurrent.futures",
    "asyncio",
    "multiprocessing",
    "webbrowser",
    "pathlib",
    "zipfile",
)
#: Libraries that check the system when they load and whose Windows branch needs the real Win32
#: ctypes (the console streams of typer and rich): loaded first too. Their support of Windows is theirs.
LIBRARIES = ("typer", "rich.console")
ENTRY_MODULES = (
    "mcpbridge.vscode.serve_command",
    "mcpbridge.vscode.check",
    "mcpbridge.embed",
    "mcpbridge.platform",
)


class NoPosixModules(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname.split(".")[0] in POSIX_ONLY:
            raise ImportError(f"{fullname} does not exist on Windows")
        return None


def main(system: str, args: list[str]) -> None:
    for name in (*STANDARD, *LIBRARIES):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if system == "win32":
        for name in POSIX_ONLY:
            sys.modules.pop(name, None)
        sys.meta_path.insert(0, NoPosixModules())
        sys.modules["msvcrt"] = types.ModuleType("msvcrt")
        if hasattr(select, "poll"):
            del select.poll
    sys.platform = system
    if args == ["import"]:
        for name in ENTRY_MODULES:
            importlib.import_module(name)
        print("imported", " ".join(ENTRY_MODULES))
        return
    sys.argv = ["mcp-bridge-vscode", *args]
    runpy.run_module("mcpbridge", run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
