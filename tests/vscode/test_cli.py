"""The executable ``mcp-bridge-vscode`` on typer, run as ``python -m mcpbridge``.

The rules of the values are tested in ``tests/vscode/test_settings.py``; here the real process:
the ``mcp.json`` examples of the README, ``--`` with options after it, the URL form with
every option it takes, the help of the program and of each subcommand, ``--version``, a
usage error, the completion script for bash, and a secret in ``--header``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trustme

from tests.harness import FIXTURE, ROOT, WAIT, Bridge, bridge_command

SECRET = "cli-secret-5d2e"
URL = "https://mcp.example.com/mcp"


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        bridge_command(*argv), capture_output=True, text=True, timeout=WAIT, cwd=ROOT, env=full_env
    )


def readme_servers() -> dict[str, dict[str, object]]:
    text = (ROOT / "README.rst").read_text(encoding="utf-8")
    start = text.index('    {\n      "servers"')
    end = text.index("\n    }\n", start) + len("\n    }\n")
    block = "\n".join(line[4:] for line in text[start:end].splitlines())
    servers = json.loads(block)["servers"]
    assert isinstance(servers, dict) and len(servers) == 2
    return servers


def answers_ping_and_exits_0(command: list[str], env: dict[str, str] | None = None) -> list[str]:
    """Ping the bridge, close its stdin; its stderr lines."""
    with Bridge(command, env) as bridge:
        response = bridge.request("ping")
        assert response["result"] == {}
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        # The process id in the first line is the bridge's own, the one to signal for a dump.
        return [line.replace(f"; pid {bridge.proc.pid};", "; pid <pid>;") for line in bridge.stderr_lines]


def test_the_readme_mcp_json_examples_start_the_bridge_without_a_subcommand() -> None:
    servers = readme_servers()
    for name, server in servers.items():
        assert server["command"] == "mcp-bridge-vscode", name
        args = [str(word) for word in server["args"]]  # type: ignore[attr-defined]
        if "--" in args:
            # The README's command, with a real server in the place of "my_server".
            assert args == ["--", "python", "-m", "my_server"]
            args = ["--", sys.executable, str(FIXTURE)]
        lines = answers_ping_and_exits_0(bridge_command(*args))
        assert not any(": error: " in line for line in lines), lines


def test_the_words_after_double_dash_go_to_the_upstream_command_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "argv.json"
    script = "import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))"
    words = ["--name", "x", "--help", "--", "--version", "check", "https://a.example/mcp", "--bogus=1"]
    # check starts the upstream command once; this one writes its arguments and stops.
    done = run("check", "--name", "files", "--", sys.executable, "-c", script, str(out), *words)
    assert done.returncode == 1, done.stderr
    assert json.loads(out.read_text(encoding="utf-8")) == words


def test_the_url_form_takes_every_option_of_a_url(tmp_path: Path) -> None:
    key_file = tmp_path / "token.key"
    key_file.write_text("ab" * 32 + "\n", encoding="utf-8")
    key_file.chmod(0o600)
    ca_file = tmp_path / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(ca_file))
    argv = [
        "--name", "remote", "--log-level", "debug", "--discover-timeout", "5", "--max-line-bytes", "65536",
        "--protocol", "auto", "--header", "x-tenant:blue", "--header-env", "x-api-key=CLI_TEST_KEY",
        "--max-response-bytes=65536", "--client-id", "bridge-client", "--client-issuer", "https://as.example",
        "--redirect-port", "41999", "--account", "work", "--token-store", "file",
        "--token-key-file", str(key_file), "--no-browser", "--sign-in-timeout", "30",
        "--ca-file", str(ca_file), URL,
    ]  # fmt: skip
    lines = answers_ping_and_exits_0(bridge_command(*argv), {"CLI_TEST_KEY": SECRET})
    assert not any(": error: " in line for line in lines), lines
    assert not any(SECRET in line for line in lines)


@pytest.mark.parametrize(
    ("argv", "shown", "hidden"),
    [
        (
            [],
            ["--name", "--header-env", "--client-id", "--version", "check", "logout", "Exit codes"],
            ["--json"],
        ),
        (["check"], ["--json", "--name", "--header-env"], ["--all"]),
        (["logout"], ["--all", "--account", "--token-store"], ["--name", "--json", "--header"]),
    ],
)
def test_the_program_and_each_subcommand_have_their_help(
    argv: list[str], shown: list[str], hidden: list[str]
) -> None:
    done = run(*argv, "--help", env={"COLUMNS": "120"})
    assert (done.returncode, done.stderr) == (0, "")
    prefix = " ".join(["mcp-bridge-vscode", *argv])
    assert f"Usage: {prefix} " in done.stdout
    for text in shown:
        assert text in done.stdout, text
    for text in hidden:
        assert re.search(rf"{re.escape(text)}\b(?!-)", done.stdout) is None, text


#: The help as a terminal of this width shows it: the snapshots do not depend on the terminal.
HELP_ENV = {"COLUMNS": "100", "LINES": "50", "PYTHONIOENCODING": "utf-8", "NO_COLOR": "1", "TERM": "dumb"}
HELP_SNAPSHOTS = ROOT / "tests" / "data" / "help"


@pytest.mark.parametrize(
    ("argv", "snapshot"),
    [([], "program"), (["check"], "check"), (["logout"], "logout"), (["secret"], "secret")],
)
@pytest.mark.parametrize(("help_option", "suffix"), [("--help", ""), ("-h", "-short")])
def test_the_help_is_the_snapshot_with_no_type_for_a_flag(
    argv: list[str], snapshot: str, help_option: str, suffix: str
) -> None:
    path = HELP_SNAPSHOTS / f"{snapshot}{suffix}.txt"
    expected = path.read_text(encoding="utf-8")
    done = run(*argv, help_option, env=HELP_ENV)
    assert (done.returncode, done.stderr) == (0, "")
    shown = "".join(line.rstrip() + "\n" for line in done.stdout.splitlines())
    assert shown == expected, (
        f"the help differs from {path.relative_to(ROOT)}; when the change is meant, write it anew with "
        f"COLUMNS=100 python -m mcpbridge {' '.join(argv)} {help_option} | sed 's/ *$//'"
    )
    assert "<bool>" not in expected


@pytest.mark.parametrize("argv", [[], ["check"], ["logout"]])
def test_h_is_a_short_help_that_says_where_every_option_is(argv: list[str]) -> None:
    short = run(*argv, "-h", env={"COLUMNS": "80"})
    full = run(*argv, "--help", env={"COLUMNS": "80"})
    assert (short.returncode, full.returncode) == (0, 0)
    lines = short.stdout.splitlines()
    assert lines[0].startswith(f"Usage: {' '.join(['mcp-bridge-vscode', *argv])} [options]")
    where = " ".join(["mcp-bridge-vscode", *argv, "--help"])
    assert lines[-1] == f"Every option: {where}, and docs/configuration.rst."
    # The short help fits a terminal; the full one holds every option that it names.
    assert len(lines) < 30 < len(full.stdout.splitlines())
    named = re.findall(r"^  (--[a-z-]+)", short.stdout, re.MULTILINE)
    assert named and all(name in full.stdout for name in named)


def test_the_short_help_of_the_program_names_the_options_most_people_need() -> None:
    text = run("-h", env={"COLUMNS": "80"}).stdout
    named = re.findall(r"^  (--[a-z-]+)", text, re.MULTILINE)
    assert named == ["--name", "--log-level", "--header-env", "--sign-in", "--allow-tool"]


@pytest.mark.parametrize(
    ("argv", "same_as"),
    [
        (["help"], ["--help"]),
        (["help", "check"], ["check", "--help"]),
        (["help", "logout"], ["logout", "--help"]),
    ],
)
def test_the_help_word_shows_the_help_and_exits_0(argv: list[str], same_as: list[str]) -> None:
    done = run(*argv, env=HELP_ENV)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == run(*same_as, env=HELP_ENV).stdout


def test_the_help_word_with_another_word_is_a_usage_error() -> None:
    done = run("help", "chek")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "mcp-bridge-vscode: vscode: error: help takes one subcommand or none: the subcommands are check, "
        "logout and secret",
        'mcp-bridge-vscode: vscode: error: see "mcp-bridge-vscode --help"',
    ]


def test_the_help_of_check_shows_the_options_of_check_first() -> None:
    text = run("check", "--help", env=HELP_ENV).stdout
    panels = re.findall(r"╭─ (.+?) ─", text)
    assert panels[0] == "Options for check"
    assert panels[1:4] == ["General options", "Revisions and extensions", "Which tools VS Code sees"]
    logout = re.findall(r"╭─ (.+?) ─", run("logout", "--help", env=HELP_ENV).stdout)
    assert logout[0] == "Options for logout"


def test_the_help_offers_no_switch_that_weakens_a_check_or_takes_a_secret() -> None:
    text = run("--help", env={"COLUMNS": "120"}).stdout
    for switch in ["--allow-http", "--insecure", "--headless", "--client-secret"]:
        assert switch not in text
    assert re.search(r"--token-key(?!-file)", text) is None


def test_version_goes_to_stdout_with_exit_0() -> None:
    done = run("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, "mcp-bridge-vscode 0.1.0\n", "")


@pytest.mark.parametrize(
    ("argv", "first", "help_of"),
    [
        (["--bogus", "--", SECRET], "the option --bogus is not known", ""),
        ([f"--bogus={SECRET}", URL], "the option --bogus is not known", ""),
        ([f"-x{SECRET}", URL], 'an argument that starts with "-" is not a known option', ""),
        (["--name", "--", SECRET], "the option --name needs a value", ""),
        ([f"--no-browser={SECRET}", URL],
         "the value of --no-browser is not valid: the option takes no value", ""),
        (["check", "--discover-timeout", SECRET, URL], "the value of --discover-timeout is not valid: "
         "use a number of seconds from 1 to 4294967295", " check"),
        (["logout", "--name", SECRET, URL], "the option --name cannot be used here: logout does not take it",
         " logout"),
        ([SECRET], 'an argument is not an option: give the URL of the upstream server, or put the upstream '
         'command after "--"', ""),
        (["--sign-in-timout", SECRET, URL],
         "the option --sign-in-timout is not known: did you mean --sign-in-timeout?", ""),
        ([f"--nme={SECRET}", "--", "server"], "the option --nme is not known: did you mean --name?", ""),
        (["check", URL, "--jsn"], "the option --jsn is not known: did you mean --json?", " check"),
        (["chek", "--", "server", SECRET], "an argument is not an option: did you mean the subcommand check? "
         "It is the first word", ""),
        ([f"mcp.example.com/mcp?key={SECRET}"],
         "an argument looks like a URL without its scheme: write https:// before it", ""),
        ([f"localhost:8000/{SECRET}"],
         "an argument looks like a URL without its scheme: write http:// before it", ""),
        ([URL, f"https://{SECRET}.example/mcp"],
         "give one upstream server: the command line has more than one URL", ""),
        ([URL, "--", "server", SECRET],
         'give one upstream server: its URL, or an upstream command after "--", not both', ""),
    ],
)  # fmt: skip
def test_a_usage_error_is_two_lines_on_stderr_and_exit_2_without_the_value(
    argv: list[str], first: str, help_of: str
) -> None:
    done = run(*argv)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"mcp-bridge-vscode: vscode: error: {first}",
        f'mcp-bridge-vscode: vscode: error: see "mcp-bridge-vscode{help_of} --help"',
    ]
    assert SECRET not in done.stderr


START = (
    "mcp-bridge-vscode: vscode: info: version 0.1.0; pid <pid>; upstream: {upstream}; era: {era}; "
    "log level: {level}"
    "; host profile: {profile}\n"
)
AUTO_PROFILE = "picked at the first initialize (--host-profile auto, the default)"
AUTO_ERA = "found at the first initialize (--protocol auto, the default)"
DEFAULT_LEVEL = "info (the default; --log-level sets it)"


@pytest.mark.parametrize(
    ("argv", "upstream", "era", "level"),
    [
        (["--", sys.executable, str(FIXTURE), f"--token={SECRET}"],
         f"the command {Path(sys.executable).name} over stdio", AUTO_ERA, DEFAULT_LEVEL),
        (["--protocol", "legacy", "--log-level", "debug", "--", str(FIXTURE)],
         "the command fixture_server.py over stdio", "the 2025 era, passed through (--protocol legacy)",
         "debug (--log-level)"),
        ([f"https://mcp.example.com/{SECRET}/mcp?key={SECRET}"],
         "Streamable HTTP (https) to the host mcp.example.com, port 443", AUTO_ERA, DEFAULT_LEVEL),
        (["--protocol", "2026-07-28", f"http://127.0.0.1:8123/{SECRET}"],
         "Streamable HTTP (http) to the host 127.0.0.1, port 8123", "2026-07-28 (--protocol)", DEFAULT_LEVEL),
        (["--transport", "sse", f"http://127.0.0.1:8123/{SECRET}/sse"],
         "HTTP+SSE (http) to the host 127.0.0.1, port 8123", "2024-11-05, passed through (--transport sse)",
         DEFAULT_LEVEL),
    ],
)  # fmt: skip
def test_the_first_line_names_the_version_the_upstream_server_its_era_and_the_log_level(
    argv: list[str], upstream: str, era: str, level: str
) -> None:
    lines = answers_ping_and_exits_0(bridge_command(*argv))
    assert lines[0] == START.format(upstream=upstream, era=era, level=level, profile=AUTO_PROFILE)
    assert not any(SECRET in line for line in lines)


@pytest.mark.parametrize("profile", ["vscode", "generic"])
def test_the_first_line_names_the_host_profile_that_the_option_forces(profile: str) -> None:
    command = bridge_command("--host-profile", profile, "--", sys.executable, str(FIXTURE))
    lines = answers_ping_and_exits_0(command)
    assert lines[0].endswith(f"; log level: {DEFAULT_LEVEL}; host profile: {profile} (--host-profile)\n")


def test_the_first_line_is_an_info_line() -> None:
    command = bridge_command("--log-level", "warn", "--", sys.executable, str(FIXTURE))
    lines = answers_ping_and_exits_0(command)
    assert not any("version 0.1.0" in line for line in lines)


def test_the_bash_completion_script_and_its_answers() -> None:
    done = run("--show-completion", "bash")
    assert done.returncode == 0
    assert "complete -o default -F _mcp_bridge_vscode_completion mcp-bridge-vscode" in done.stdout
    assert "_MCP_BRIDGE_VSCODE_COMPLETE=complete_bash" in done.stdout
    answers = run(
        env={"_MCP_BRIDGE_VSCODE_COMPLETE": "complete_bash", "COMP_WORDS": "mcp-bridge-vscode --token-s",
             "COMP_CWORD": "1"}
    )  # fmt: skip
    assert (answers.returncode, answers.stdout.split()) == (0, ["--token-store"])
    logout = run(
        env={"_MCP_BRIDGE_VSCODE_COMPLETE": "complete_bash", "COMP_WORDS": "mcp-bridge-vscode logout --a",
             "COMP_CWORD": "2"}
    )  # fmt: skip
    assert sorted(logout.stdout.split()) == ["--account", "--all"]


def test_a_secret_header_on_the_command_line_gives_a_warning_without_its_value() -> None:
    lines = answers_ping_and_exits_0(bridge_command("--header", f"Authorization: Bearer {SECRET}", URL))
    warning = (
        "mcp-bridge-vscode: vscode: warning: the value of the header Authorization is on the command line. "
        "VS Code writes the command line to its log, and the process list shows it. Use --header-env.\n"
    )
    assert warning in lines
    assert not any(SECRET in line for line in lines)


def test_the_secrets_of_the_command_line_and_the_environment_are_registered_for_the_log() -> None:
    from mcpbridge import log
    from mcpbridge.vscode.cli import parse, register_secrets

    env = {
        "HEADER_VAR": "env-header-2b71",
        "MCP_BRIDGE_CLIENT_SECRET": "client-secret-2b71",
        "HTTPS_PROXY": "http://proxy-user-2b71:proxy%2Fpass-2b71@proxy.example:3128",
        "all_proxy": "socks-user-2b71:socks-pass-2b71@socks.example:1080",
    }
    url = "https://mcp.example.com/mcp/path-2b71?key=query-2b71-value&v=1"
    argv = [
        "--header", "x-literal:literal-2b71", "--header-env", "x-api-key=HEADER_VAR",
        "--client-id", "bridge-client", "--client-issuer", "https://as.example", url,
    ]  # fmt: skip
    parsed = parse(argv, env)
    assert not isinstance(parsed, str)
    register_secrets(parsed, env)
    secrets = [
        url,
        "/mcp/path-2b71?key=query-2b71-value&v=1",
        "/mcp/path-2b71",
        "query-2b71-value",
        "literal-2b71",
        "env-header-2b71",
        "client-secret-2b71",
        "proxy-user-2b71",
        "proxy/pass-2b71",
        "proxy%2Fpass-2b71",
        "socks-user-2b71",
        "socks-pass-2b71",
    ]
    for secret in secrets:
        assert log.redact(f"<{secret}>") == f"<{log.REDACTED}>", secret
    assert log.redact("mcp.example.com proxy.example:3128 bridge-client") == (
        "mcp.example.com proxy.example:3128 bridge-client"
    )


@pytest.mark.parametrize("store", ["memory", "auto"])
def test_a_url_server_that_needs_no_sign_in_gets_no_line_about_a_sign_in(store: str) -> None:
    """The memory store and a client without URL elicitation matter only to a sign-in: a server
    that asks for none hears of neither, whatever the host."""
    from peers import running_py_http_server

    no_url_elicitation = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {"form": {}}}
    with running_py_http_server() as url, Bridge(bridge_command("--token-store", store, url)) as bridge:
        init = bridge.initialize(no_url_elicitation, client_info={"name": "Zed", "version": "1.0"})
        assert "result" in init, init
        assert "tools" in bridge.request("tools/list")["result"]
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
    text = bridge.stderr_text
    assert "stay in memory" not in text and "new sign-in" not in text
    assert "URL elicitation" not in text
    assert not [line for line in bridge.stderr_lines if ": oauth: " in line]
