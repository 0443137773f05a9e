"""The two readers of a command line agree: the plain reader of the serve path and typer.

``mcp-bridge-vscode`` reads a plain serve command line without typer
(:func:`mcpbridge.vscode.words.plain_words`), so that the bridge starts without loading
the help; every other command line goes to the typer app. Both read the rows of
:data:`mcpbridge.vscode.options.OPTIONS`. Here, for many command lines: when the plain
reader takes one, typer finds the same words, and the executable's reading (``cli.parse``)
gives the same settings or the same error as typer's alone; when it leaves one, that is a
command line that typer must answer (help, version, a subcommand, an error of the parser).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpbridge.vscode import app, cli
from mcpbridge.vscode.options import OPTIONS, options_for
from mcpbridge.vscode.settings import ArgError, Settings
from mcpbridge.vscode.words import Words, plain_words
from tests.harness import ROOT, WAIT, Bridge
from tests.vscode.test_settings import environment, option_unit, positional_unit

URL = "https://mcp.example.com/mcp"
ENV = {"TOKEN": "Bearer t", "MCP_BRIDGE_CLIENT_SECRET": "s"}


def outcome(read: object, argv: list[str], env: dict[str, str]) -> object:
    """What a reader makes of ``argv``: the settings, the answer at once, or the error's parts."""
    assert callable(read)
    try:
        return read(argv, env)
    except ArgError as exc:
        return ("error", exc.kind, exc.diagnostic, exc.option)


PLAIN = [
    ["--", "server"],
    ["--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "--", "--help"],
    [URL],
    ["--name", "files", "--log-level=debug", "--", "server", "--name", "x"],
    ["--header-env", "authorization=TOKEN", "--token-store", "memory", URL],
    ["--no-browser", "--allow-tool", "git_*", "--deny-tool=*delete*", URL],
    ["--allow-tool=", "--", "server"],  # an empty value: the rules refuse it, as after typer
    ["--discover-timeout", "0", "--", "server"],
    ["--json", "--", "server"],  # an option of check: the rules refuse it, as after typer
    ["--all", URL],
    ["--name", "n", "--name", "m", "--", ""],
    ["--header", "x-a:1", "--header=x-a:2", URL],
    ["--call-arguments", "{}", "--", "s"],
    ["--name", "n", "example.com/mcp"],
    ["--name", "n", "check"],
    ["--"],
    [""],
    ["--ca-file", "=", URL],
    ["--header=x:-1", "--", "-"],
]

NOT_PLAIN = [
    [],
    ["--name", "n"],
    ["-h"],
    ["--help"],
    ["--version"],
    ["--name", "x", "--help", URL],
    ["--install-completion"],
    ["--show-completion=bash"],
    ["check", "--", "server"],
    ["logout", "--all"],
    ["--bogus", URL],
    ["--nme", "x", URL],
    ["--no-browser=1", URL],
    ["--name", "--", "server"],
    ["--name", "-x", URL],
    ["--name"],
    [URL, "--name", "x"],
    [URL, URL],
    ["server", "--", "x"],
    ["-", URL],
    ["-x", URL],
    ["--name", "n", "-"],
]


@pytest.mark.parametrize("argv", PLAIN, ids=" ".join)
def test_a_plain_serve_command_line_is_read_without_typer_into_the_words_that_typer_finds(
    argv: list[str],
) -> None:
    words = plain_words(argv)
    assert isinstance(words, Words), argv
    assert words == app.words(argv)
    assert outcome(cli.parse, argv, ENV) == outcome(app.parse, argv, ENV)


@pytest.mark.parametrize("argv", NOT_PLAIN, ids=" ".join)
def test_every_other_command_line_is_left_to_typer(argv: list[str]) -> None:
    assert plain_words(argv) is None
    assert outcome(cli.parse, argv, ENV) == outcome(app.parse, argv, ENV)


def test_the_plain_reader_knows_every_option_of_the_table_and_no_other() -> None:
    for name, option in OPTIONS.items():
        value = [] if option.flag else ["v"]
        words = plain_words([name, *value, "--", "s"])
        assert words is not None and words.options == ((name, None if option.flag else "v"),)
    assert plain_words(["--version", "--", "s"]) is None
    assert plain_words(["--help", "--", "s"]) is None


def test_a_subcommand_is_never_plain() -> None:
    for name in ("check", "logout"):
        assert plain_words([name, URL]) is None
    assert plain_words(["checks", URL]) is None  # a misspelt subcommand: typer's answer


@settings(max_examples=500, deadline=None)
@given(
    units=st.lists(option_unit(), max_size=6),
    tail=st.lists(positional_unit, max_size=2),
    extra=st.lists(st.sampled_from(["-h", "--help", "--version", "-", "--bogus", "x", "--name"]), max_size=1),
    env=environment,
)
def test_random_command_lines_read_the_same_with_or_without_typer(
    units: list[list[str]], tail: list[list[str]], extra: list[str], env: dict[str, str]
) -> None:
    words = [*(a for unit in units for a in unit), *extra, *(a for unit in tail for a in unit)]
    fast = plain_words(words)
    if fast is not None:
        assert fast == app.words(words)
    mine, typers = outcome(cli.parse, words, env), outcome(app.parse, words, env)
    assert mine == typers, words
    assert isinstance(mine, (Settings, str, tuple))


def loaded_modules(stderr_lines: list[str]) -> set[str]:
    """The modules that ``python -X importtime`` reports on stderr."""
    loaded = {line.rsplit("|", 1)[-1].strip() for line in stderr_lines if line.startswith("import time:")}
    assert "mcpbridge.vscode.cli" in loaded, "no import lines on stderr: the test sees nothing"
    return loaded


def test_the_serve_path_answers_without_loading_typer() -> None:
    command = [sys.executable, "-X", "importtime", "-m", "mcpbridge", "--token-store", "memory", URL]
    with Bridge(command) as bridge:
        assert bridge.request("ping")["result"] == {}
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        loaded = loaded_modules(list(bridge.stderr_lines))
    assert "mcpbridge.vscode.settings" in loaded
    assert not loaded & {"typer", "rich", "mcpbridge.vscode.app"}
    # Only an upstream command, a browser and an error of the command line need these.
    assert not loaded & {"subprocess", "difflib"}


#: Runs the executable with its front end replaced by a report of the collector.
_COLLECTOR_PROBE = """
import gc, sys
from mcpbridge.bridge.front.frontend import Frontend
from mcpbridge.vscode import serving
def run(self):
    print("serving:", gc.isenabled(), gc.get_freeze_count() > 0)
Frontend.run = run
started = serving.serve
def serve(frontend):
    print("started:", gc.isenabled())
    return started(frontend)
serving.serve = serve
from mcpbridge.vscode.cli import main
main(sys.argv[1:])
"""


def test_the_collector_is_off_while_the_bridge_starts_and_on_while_it_serves() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _COLLECTOR_PROBE, "--token-store", "memory", URL],
        capture_output=True, text=True, timeout=WAIT, cwd=ROOT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "started: False\nserving: True True\n"), done.stderr


def test_the_help_loads_typer() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "mcpbridge", "--help"],
        capture_output=True, text=True, timeout=WAIT, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0 and "Usage: mcp-bridge-vscode" in done.stdout
    assert {"typer", "mcpbridge.vscode.app"} <= loaded_modules(done.stderr.splitlines())


def test_the_shell_completion_is_typers_also_for_a_plain_command_line() -> None:
    env = {**os.environ, "_MCP_BRIDGE_VSCODE_COMPLETE": "complete_bash"}
    env.update(COMP_WORDS="mcp-bridge-vscode --lo", COMP_CWORD="1")
    done = subprocess.run(
        [sys.executable, "-m", "mcpbridge", "--name", "x", "--", sys.executable, "-V"],
        capture_output=True, text=True, timeout=WAIT, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert (done.returncode, done.stdout.split()) == (0, ["--log-level"]), done.stderr


#: The fields of the sign-in that are not named as their option.
_SIGN_IN_FIELDS = {"sign_in": "flow", "sign_in_timeout": "timeout"}


def field_value(settings: object, option: str) -> object:
    """The field of ``option`` in ``settings`` or in one of its parts, the nearest first."""
    name = option.lstrip("-").replace("-", "_")
    name = _SIGN_IN_FIELDS.get(name, name)
    parts: list[Any] = [settings]
    while parts:
        part = parts.pop(0)
        if hasattr(part, name):
            return getattr(part, name)
        parts += [getattr(part, f.name) for f in dataclasses.fields(part)]
        parts = [found for found in parts if dataclasses.is_dataclass(found)]
    raise AssertionError(f"the settings have no field for {option}")


def test_each_default_of_the_table_is_the_value_without_the_option() -> None:
    minimal = {None: [URL], "check": ["check", URL], "logout": ["logout", URL]}
    checked = 0
    for name, option in OPTIONS.items():
        if option.default is None:
            continue
        head = next(argv for sub, argv in minimal.items() if name in options_for(sub))
        parsed = cli.parse(head, {})
        assert isinstance(parsed, Settings)
        assert field_value(parsed, name) == option.default, name
        checked += 1
    assert checked >= 15
