"""The rules of the command line of ``mcp-bridge-vscode`` (``mcpbridge.vscode.settings``).

The command lines go through ``cli.parse``: typer's parser, then the rules, as in the
executable (``tests/vscode/test_cli.py`` runs the executable itself: help, version, usage errors).

What the tests cover:

* each parsing rule of the forms (value forms, flags, last one wins, headers
  accumulate, ``--``, the URL as the last argument, subcommands only first);
* each option: its default, its valid values and its bounds, and which forms take it;
* the headers, the static authorization header, the registration options, the token
  store and its key, logout and check;
* the exact diagnostics, which never hold a value of the command line or of the
  environment (a marker value stands in for a secret);
* the invalid-argument and the conflicting-option cases of the process tests of the
  original bridge, at the level of the parser;
* a property test: random command lines give a result or an ``ArgError`` and never
  leak the marker.

Run them alone with ``pytest tests/vscode/test_settings.py``.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpbridge.mcp import protocol
from mcpbridge.oauth.config import SignInFlow, TokenStoreMode
from mcpbridge.vscode import settings as args
from mcpbridge.vscode.cli import parse
from mcpbridge.vscode.settings import (
    ArgError,
    CheckSettings,
    ClientMetadataDocument,
    CommandUpstream,
    DynamicRegistration,
    Form,
    Header,
    LogoutSettings,
    PreRegistered,
    SecretSettings,
    ServeSettings,
    Serving,
    Settings,
    SignIn,
    Store,
    UrlUpstream,
    default_name_for_command,
    default_name_for_url,
    upstream_url_hint,
)

MARKER = "SECRETMARKER"
URL = "https://a.example/mcp"
KEY_HEX = "000102030405060708090a0b0c0d0e0f101112131415161718191A1B1C1D1E1F"
COMMAND_HINT = "it applies only to the URL of an upstream server, not to an upstream command"
FORMS_HINT = 'give the URL of the upstream server, or put the upstream command after "--"'
LAST_HINT = "put the options before the URL of the upstream server"
HTTP_HINT = "use https: http is permitted only for a loopback host such as 127.0.0.1"
SCHEME_HINT = "use https, or http with a loopback host such as 127.0.0.1"
USERINFO_HINT = "remove the user and the password from the URL: give a secret with --header-env"
SYNTAX_HINT = "use an http or https URL with visible ASCII characters only"
KEY_FILE_HINT = "only the file store takes a key: use --token-store file or auto"
STATIC_HINT = "a static authorization header and the sign-in options exclude each other"


def ok(argv: Sequence[str], env: Mapping[str, str] | None = None) -> Settings:
    result = parse(argv, env or {})
    assert isinstance(result, Settings), result
    return result


def error(argv: Sequence[str], env: Mapping[str, str] | None = None) -> ArgError:
    with pytest.raises(ArgError) as info:
        parse(argv, env or {})
    return info.value


# ---------------------------------------------------------------------------------------------
# Forms and parsing rules
# ---------------------------------------------------------------------------------------------


def test_the_command_form_has_these_defaults() -> None:
    s = ok(["--", "server"])
    assert s.form is Form.COMMAND
    # The settings of the command form have no field for an option of a URL, of logout or of check.
    assert s == ServeSettings(
        log_level="info",
        warnings=(),
        upstream=CommandUpstream(
            protocol="auto", discover_timeout=60.0, max_line_bytes=64 * 1024 * 1024, command=("server",)
        ),
        serving=Serving(name="server", tasks="auto", allow_tools=(), deny_tools=(), host_profile="auto"),
    )


def test_the_url_form_logout_and_check_have_these_defaults() -> None:
    s = ok([URL])
    assert s.form is Form.URL
    assert s == ServeSettings(
        log_level="info",
        warnings=(),
        upstream=UrlUpstream(
            protocol="auto",
            discover_timeout=60.0,
            max_line_bytes=64 * 1024 * 1024,
            url=URL,
            headers=(),
            max_response_bytes=64 * 1024 * 1024,
            ca_file=None,
            transport="auto",
            store=Store(
                account="default", token_store=TokenStoreMode.AUTO, token_key_file=None, token_key=None
            ),
            sign_in=SignIn(
                registration=DynamicRegistration(),
                client_id=None,
                client_issuer=None,
                client_metadata_url=None,
                redirect_port=41894,
                client_secret=None,
                no_browser=False,
                timeout=300.0,
                flow=SignInFlow.AUTO,
                resource_indicator="auto",
            ),
        ),
        serving=Serving(name="a.example", tasks="auto", allow_tools=(), deny_tools=(), host_profile="auto"),
    )
    assert s.upstream.static_authorization is False
    logout = ok(["logout", URL])
    assert logout == LogoutSettings(
        log_level="info",
        warnings=(),
        url=URL,
        all=False,
        ca_file=None,
        redirect_port=41894,
        store=Store(account="default", token_store=TokenStoreMode.AUTO, token_key_file=None, token_key=None),
    )
    check = ok(["check", "--", "server"])
    assert isinstance(check, CheckSettings) and check.form is Form.CHECK
    assert (check.json, check.call_tool, check.call_arguments) == (False, None, {})


def test_the_options_and_the_upstream_command_are_parsed() -> None:
    s = ok(
        [
            "--name", "files", "--log-level", "debug", "--discover-timeout", "120",
            "--max-line-bytes", "4096", "--protocol", "legacy",
            "--", "node", "server.js", "--stdio",
        ]
    )  # fmt: skip
    assert s.serving.name == "files"
    assert s.log_level == "debug"
    assert s.upstream.discover_timeout == 120.0
    assert s.upstream.max_line_bytes == 4096
    assert s.upstream.protocol == "legacy"
    assert s.upstream.command == ("node", "server.js", "--stdio")


def test_a_value_can_follow_an_equals_sign_and_only_the_first_equals_sign_splits() -> None:
    s = ok(["--name=a=b", "--log-level=warn", "--discover-timeout=5", "--max-line-bytes=1", "--", "x"])
    assert (s.serving.name, s.log_level, s.upstream.discover_timeout, s.upstream.max_line_bytes) == (
        "a=b",
        "warn",
        5.0,
        1,
    )


def test_the_last_occurrence_of_an_option_wins() -> None:
    s = ok(["--log-level", "err", "--name", "a", "--log-level", "warn", "--name=b", "--", "x"])
    assert (s.log_level, s.serving.name) == ("warn", "b")


def test_an_option_can_repeat_with_a_bad_value_first_and_still_fail() -> None:
    assert error(["--log-level", "loud", "--log-level", "info", "--", "x"]).option == "--log-level"


def test_the_arguments_after_double_dash_go_to_the_command_unchanged() -> None:
    argv = ["--", "server", "--help", "--name", "--", "https://example.com/mcp", "--version", "logout"]
    assert ok(argv).upstream.command == tuple(argv[1:])
    assert ok(["--", "logout"]).upstream.command == ("logout",)


@pytest.mark.parametrize("flag", ["--help", "--version", "--no-browser", "--all", "--json"])
@pytest.mark.parametrize("value", ["", "yes", MARKER])
def test_a_flag_with_an_equals_value_is_invalid(flag: str, value: str) -> None:
    e = error([f"{flag}={value}", URL])
    assert (e.kind, e.option) == ("invalid_value", flag)
    assert e.diagnostic == f"the value of {flag} is not valid: the option takes no value"


@pytest.mark.parametrize(
    "argv", [[], ["--name", "x"], ["--"], ["--", ""], ["--", "", "x"], ["check"], ["check", "--"]]
)
def test_without_a_url_or_a_command_the_upstream_server_is_missing(argv: list[str]) -> None:
    e = error(argv)
    assert e.kind == "missing_command"
    assert (
        e.diagnostic == 'the upstream server is missing: give its URL, or put the upstream command after "--"'
    )


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["server"], FORMS_HINT),
        (["server", "--", "x"], FORMS_HINT),
        (["-", "--", "x"], FORMS_HINT),
        (["server.py"], FORMS_HINT),
        (["dist/index.js", "--", "x"], FORMS_HINT),
        (["a.example"], FORMS_HINT),
        (["check", "logout", URL], FORMS_HINT),
        (["check", "chek", URL], FORMS_HINT),
        ([URL, "--name", "x"], LAST_HINT),
        ([URL, "server"], LAST_HINT),
        (["logout", "--", "server"], "logout takes no upstream command"),
        (["chek", "--", "x"], "did you mean the subcommand check? It is the first word"),
        (["Logut", URL], "did you mean the subcommand logout? It is the first word"),
        (["--log-level", "debug", "logout", "--all"],
         "did you mean the subcommand logout? It is the first word"),
    ],
)  # fmt: skip
def test_an_argument_that_is_not_an_option_must_be_the_last_url(argv: list[str], hint: str) -> None:
    e = error(argv)
    assert e.kind == "unexpected_argument"
    assert e.diagnostic == f"an argument is not an option: {hint}"


@pytest.mark.parametrize(
    ("argv", "scheme"),
    [
        (["a.example/mcp"], "https"),
        (["mcp.example.com:8443"], "https"),
        (["10.0.0.7:8000/mcp"], "https"),
        (["[2001:db8::1]/mcp"], "https"),
        (["check", "a.example/mcp?key=" + MARKER], "https"),
        (["localhost:8000/mcp"], "http"),
        (["127.0.0.1:3000"], "http"),
        (["[::1]:9/mcp"], "http"),
    ],
)
def test_a_url_without_its_scheme_gets_the_scheme_to_write_before_it(argv: list[str], scheme: str) -> None:
    e = error(argv)
    assert (e.kind, e.diagnostic) == (
        "invalid_url",
        f"an argument looks like a URL without its scheme: write {scheme}:// before it",
    )


TWO_URLS = "give one upstream server: the command line has more than one URL"
URL_AND_COMMAND = 'give one upstream server: its URL, or an upstream command after "--", not both'


@pytest.mark.parametrize(
    ("argv", "diagnostic"),
    [
        ([URL, "https://b.example/mcp"], TWO_URLS),
        (["check", URL, "https://b.example/mcp"], TWO_URLS),
        (["server", URL, "https://b.example/mcp"], TWO_URLS),
        ([URL, "--", "server"], URL_AND_COMMAND),
        (["--name", "x", URL, "--", "server", URL], URL_AND_COMMAND),
        (["check", URL, "--", "server"], URL_AND_COMMAND),
    ],
)  # fmt: skip
def test_two_upstream_servers_are_refused_with_what_they_are(argv: list[str], diagnostic: str) -> None:
    e = error(argv)
    assert (e.kind, e.diagnostic) == ("two_upstreams", diagnostic)


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["--verbose", "--", "x"], "--verbose"),
        (["-v", "--", "x"], "-v"),
        (["-=x", "--", "x"], "-"),
        (["--=x", "--", "x"], "--"),
        (["--token=" + MARKER, "--", "x"], "--token"),
        (["-" + MARKER, "--", "x"], None),
        (["--" + MARKER, "--", "x"], None),
        (["--bearer " + MARKER.lower(), "--", "x"], None),
        # The original bridge deliberately has no such switch; neither do we.
        (["--allow-http", "http://a.example/mcp"], "--allow-http"),
        (["--insecure", URL], "--insecure"),
        (["--headless", URL], "--headless"),
        (["--client-secret", MARKER, URL], "--client-secret"),
        (["--client-secret=" + MARKER, "--client-id", "c", URL], "--client-secret"),
        (["--token-key", KEY_HEX, URL], "--token-key"),
    ],
)
def test_an_unknown_option_is_named_only_when_it_looks_like_an_option_name(
    argv: list[str], shown: str | None
) -> None:
    e = error(argv)
    assert e.kind == "unknown_option"
    if shown is None:
        assert e.diagnostic == 'an argument that starts with "-" is not a known option'
    else:
        assert e.diagnostic == f"the option {shown} is not known"
    assert MARKER not in e.diagnostic and MARKER.lower() not in e.diagnostic


NOT_AN_OPTION = 'an argument that starts with "-" is not a known option'


@pytest.mark.parametrize(
    ("argv", "diagnostic"),
    [
        (["--sign-in-timout", "5", URL],
         "the option --sign-in-timout is not known: did you mean --sign-in-timeout?"),
        (["--nme", "x", "--", "x"], "the option --nme is not known: did you mean --name?"),
        (["--loglevel=" + MARKER, "--", "x"],
         "the option --loglevel is not known: did you mean --log-level?"),
        (["--Name", "x", "--", "x"], f"{NOT_AN_OPTION}: did you mean --name?"),
        (["---name", "x", "--", "x"], f"{NOT_AN_OPTION}: did you mean --name?"),
        (["-name", "x", "--", "x"], f"{NOT_AN_OPTION}: did you mean --name?"),
        (["logout", "--al"], "the option --al is not known: did you mean --all?"),
        (["check", URL, "--jsn"], "the option --jsn is not known: did you mean --json?"),
        (["check", URL, "--jsn=" + MARKER], "the option --jsn is not known: did you mean --json?"),
        # Only an option that the help of the form shows: --json is for check.
        (["--jsn", URL], "the option --jsn is not known"),
        # A neighbour is no misspelling.
        (["--headless", URL], "the option --headless is not known"),
    ],
)  # fmt: skip
def test_a_misspelled_option_gets_the_option_it_misspells(argv: list[str], diagnostic: str) -> None:
    e = error(argv)
    assert (e.kind, e.diagnostic) == ("unknown_option", diagnostic)
    assert MARKER not in e.diagnostic


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--name"], "--name"),
        (["--name", "--", "x"], "--name"),
        (["--log-level", "--name", "x", "--", "x"], "--log-level"),
        (["--max-line-bytes"], "--max-line-bytes"),
        (["--header", "--header-env", "A=B", URL], "--header"),
        (["--redirect-port"], "--redirect-port"),
        (["--protocol"], "--protocol"),
        (["logout", "--account"], "--account"),
    ],
)
def test_an_option_without_its_value_needs_a_value(argv: list[str], option: str) -> None:
    e = error(argv)
    assert (e.kind, e.option) == ("missing_value", option)
    assert e.diagnostic == f"the option {option} needs a value"


def test_a_separate_value_may_start_with_one_dash() -> None:
    assert ok(["--name", "-x", "--", "y"]).serving.name == "-x"
    assert ok(["--name", "-", "--", "y"]).serving.name == "-"


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "option", "hint"),
    [
        (["--name=", "--", "x"], "--name", "the name cannot be empty"),
        (["--name", "", "--", "x"], "--name", "the name cannot be empty"),
        (["--log-level", "error", "--", "x"], "--log-level", "use err, warn, info or debug"),
        (["--log-level", "trace", "--", "x"], "--log-level", "use err, warn, info or debug"),
        (["--log-level", "DEBUG", "--", "x"], "--log-level", "use err, warn, info or debug"),
        (["--protocol", "2025-11-25", "--", "x"], "--protocol", "use auto, 2026-07-28 or legacy"),
        (["--protocol", "AUTO", "--", "x"], "--protocol", "use auto, 2026-07-28 or legacy"),
        (["--tasks", "on", "--", "x"], "--tasks", "use auto or off"),
        (["--tasks", "OFF", URL], "--tasks", "use auto or off"),
        (["--host-profile", "cursor", "--", "x"], "--host-profile", "use auto, vscode or generic"),
        (["--host-profile", "VSCODE", "--", "x"], "--host-profile", "use auto, vscode or generic"),
        (["--ca-file=", URL], "--ca-file", "the path cannot be empty"),
        (["--token-key-file=", URL], "--token-key-file", "the path cannot be empty"),
        (["--token-store", "disk", URL], "--token-store", "use auto, keychain, file or memory"),
        (["--token-store", "vault", URL], "--token-store", "use auto, keychain, file or memory"),
    ],
)
def test_a_value_that_is_not_valid_is_refused_with_a_hint(argv: list[str], option: str, hint: str) -> None:
    e = error(argv)
    assert (e.kind, e.option) == ("invalid_value", option)
    assert e.diagnostic == f"the value of {option} is not valid: {hint}"


@pytest.mark.parametrize("level", ["err", "warn", "info", "debug"])
def test_each_log_level_is_accepted(level: str) -> None:
    assert ok(["--log-level", level, "--", "x"]).log_level == level


@pytest.mark.parametrize("protocol", ["auto", "2026-07-28", "legacy"])
def test_each_protocol_is_accepted_by_the_serve_forms_and_check(protocol: str) -> None:
    assert ok(["--protocol", protocol, "--", "x"]).upstream.protocol == protocol
    assert ok(["--protocol", protocol, URL]).upstream.protocol == protocol
    assert ok(["check", "--protocol", protocol, URL]).upstream.protocol == protocol


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_each_task_mode_is_accepted_by_the_serve_forms_and_check(mode: str) -> None:
    assert ok(["--tasks", mode, "--", "x"]).serving.tasks == mode
    assert ok(["--tasks", mode, URL]).serving.tasks == mode
    assert ok(["check", "--tasks", mode, "--", "x"]).serving.tasks == mode


def test_the_bridge_carries_tasks_unless_told_otherwise() -> None:
    assert ok(["--", "x"]).serving.tasks == "auto"
    assert ok([URL]).serving.tasks == "auto"


@pytest.mark.parametrize("profile", ["auto", "vscode", "generic"])
def test_each_host_profile_is_accepted_by_the_serve_forms_and_check(profile: str) -> None:
    assert ok(["--host-profile", profile, "--", "x"]).serving.host_profile == profile
    assert ok(["--host-profile", profile, URL]).serving.host_profile == profile
    assert ok(["check", "--host-profile", profile, URL]).serving.host_profile == profile


def test_the_host_profile_is_picked_from_the_host_unless_it_is_given() -> None:
    assert ok(["--", "x"]).serving.host_profile == "auto"
    assert ok([URL]).serving.host_profile == "auto"


@pytest.mark.parametrize("transport", ["auto", "streamable-http", "sse"])
def test_each_transport_is_accepted_by_the_url_forms(transport: str) -> None:
    assert ok(["--transport", transport, URL]).upstream.transport == transport
    assert ok(["check", "--transport", transport, URL]).upstream.transport == transport


def test_the_transport_is_found_unless_it_is_given_and_sse_implies_the_2025_era() -> None:
    assert ok([URL]).upstream.transport == "auto"
    assert ok(["--transport", "sse", URL]).upstream.protocol == "legacy"
    assert ok(["--transport", "streamable-http", URL]).upstream.protocol == "auto"


@pytest.mark.parametrize("form", [[], ["check"]])
def test_the_2024_transport_and_the_2026_revision_exclude_each_other(form: list[str]) -> None:
    sse, modern = ["--transport", "sse"], ["--protocol", "2026-07-28"]
    for argv in ([*sse, *modern], [*modern, *sse]):
        e = error([*form, *argv, URL])
        assert (e.kind, e.option) == ("conflict", "--protocol")
        assert str(e).endswith("a server of 2026-07-28 speaks Streamable HTTP: remove --transport sse")
    assert ok([*form, "--transport", "sse", "--protocol", "legacy", URL]).upstream.protocol == "legacy"
    assert ok([*form, "--transport", "sse", "--protocol", "auto", URL]).upstream.protocol == "legacy"


NUMBER_OPTIONS = [
    ("--discover-timeout", ["--", "x"], "use a number of seconds from 1 to 4294967295", 4294967295),
    ("--max-line-bytes", ["--", "x"], "use a number of bytes from 1 to 1073741824", 1073741824),
    ("--max-response-bytes", [URL], "use a number of bytes from 1 to 1073741824", 1073741824),
    ("--sign-in-timeout", [URL], "use a number of seconds from 1 to 4294967295", 4294967295),
    ("--redirect-port", [URL], "use a port from 1 to 65535", 65535),
]
#: Where the settings keep the value of each number option.
NUMBER_FIELDS: dict[str, Callable[[Any], object]] = {
    "--discover-timeout": lambda s: s.upstream.discover_timeout,
    "--max-line-bytes": lambda s: s.upstream.max_line_bytes,
    "--max-response-bytes": lambda s: s.upstream.max_response_bytes,
    "--sign-in-timeout": lambda s: s.upstream.sign_in.timeout,
    "--redirect-port": lambda s: s.upstream.sign_in.redirect_port,
}
BAD_NUMBERS = [
    "", "0", "-1", "+1", " 1", "1 ", "1_000", "0x10", "1.5", "1e3", "abc", "\u0661", "\uff11",
    "4294967296", "99999999999999999999999", "0" * 5000, "1" + "0" * 5000, MARKER,
]  # fmt: skip


@pytest.mark.parametrize(("option", "tail", "hint", "high"), NUMBER_OPTIONS)
@pytest.mark.parametrize("text", BAD_NUMBERS)
def test_a_number_has_digits_only_and_lies_in_its_range(
    option: str, tail: list[str], hint: str, high: int, text: str
) -> None:
    e = error([option, text, *tail])
    assert (e.kind, e.option) == ("invalid_value", option)
    assert e.diagnostic == f"the value of {option} is not valid: {hint}"


@pytest.mark.parametrize(("option", "tail", "hint", "high"), NUMBER_OPTIONS)
def test_a_number_one_above_its_range_is_refused_and_its_bounds_are_accepted(
    option: str, tail: list[str], hint: str, high: int
) -> None:
    assert error([option, str(high + 1), *tail]).kind == "invalid_value"
    field = NUMBER_FIELDS[option]
    assert field(ok([option, str(high), *tail])) == high
    assert field(ok([f"{option}=1", *tail])) == 1
    assert field(ok([option, "007", *tail])) == 7


def test_the_timeouts_are_seconds_as_floats() -> None:
    s = ok(["--discover-timeout", "5", "--sign-in-timeout", "10", URL])
    assert (s.upstream.discover_timeout, s.upstream.sign_in.timeout) == (5.0, 10.0)
    assert isinstance(s.upstream.discover_timeout, float) and isinstance(s.upstream.sign_in.timeout, float)


# ---------------------------------------------------------------------------------------------
# Default names (§2.3)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv0", "name"),
    [
        ("npx", "npx"),
        ("/usr/local/bin/node", "node"),
        ("/opt/mcp/bin/server.exe", "server"),
        ("./my.server.py", "my.server"),
        ("/srv/.server", ".server"),
        ("server.", "server"),
        ("bin/server/", "server"),
        ("/", "/"),
        ("", ""),
        ("C:\\Program Files\\nodejs\\npx.cmd", "C:\\Program Files\\nodejs\\npx"),
    ],
)
def test_the_default_name_of_a_command_is_its_file_name_without_the_extension(argv0: str, name: str) -> None:
    assert default_name_for_command(argv0, windows=False) == name


@pytest.mark.parametrize(
    ("argv0", "name"),
    [
        ("C:\\Program Files\\nodejs\\npx.cmd", "npx"),
        ("C:/tools/server.EXE", "server"),
        ("tools\\server.exe", "server"),
        ("\\\\host\\share\\my.server.py", "my.server"),
        ("bin\\server\\", "server"),
        ("npx", "npx"),
    ],
)
def test_the_default_name_of_a_command_follows_the_windows_path_rules_on_windows(
    argv0: str, name: str
) -> None:
    assert default_name_for_command(argv0, windows=True) == name


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://mcp.example.com:8443/v1/mcp?tenant=a", "mcp.example.com"),
        ("https://MCP.Example.com/mcp", "MCP.Example.com"),
        ("http://[::1]:3000/mcp", "[::1]"),
        ("http://127.0.0.1/mcp", "127.0.0.1"),
        ("https://user@host.example/x", "host.example"),
        ("not a url", ""),
        ("", ""),
    ],
)
def test_the_default_name_of_a_url_is_its_host_as_written(url: str, name: str) -> None:
    assert default_name_for_url(url) == name


def test_settings_take_the_name_from_the_option_else_from_the_upstream() -> None:
    assert ok(["--", "/opt/mcp/bin/files-server.exe", "--stdio"]).serving.name == "files-server"
    assert ok(["--name", "explicit", "--", "/bin/server"]).serving.name == "explicit"
    assert ok(["https://mcp.example.com:8443/v1/mcp"]).serving.name == "mcp.example.com"
    assert ok(["--name", "n", URL]).serving.name == "n"
    assert ok(["check", "--", "./my.server.py"]).serving.name == "my.server"
    # Logout takes no --name: its settings have no server name.
    assert "name" not in {f.name for f in dataclasses.fields(ok(["logout", URL]))}


# ---------------------------------------------------------------------------------------------
# The URL
# ---------------------------------------------------------------------------------------------

VALID_URLS = [
    "https://mcp.example.com/mcp",
    "https://mcp.example.com",
    "HTTPS://mcp.example.com:8443/mcp?tenant=a&x=%20",
    "https://[2001:db8::1]/mcp",
    "http://127.0.0.1:3000/mcp",
    "http://127.8.9.10/mcp",
    "http://localhost:3000/mcp",
    "http://LOCALHOST/mcp",
    "http://[::1]:3000/mcp",
    "http://[0:0:0:0:0:0:0:1]/mcp",
    "https://mcp.example.com:65535/mcp",
]


@pytest.mark.parametrize("url", VALID_URLS)
def test_a_valid_upstream_url_is_accepted(url: str) -> None:
    assert upstream_url_hint(url) is None
    s = ok([url])
    assert (s.form, s.upstream.url, type(s.upstream)) == (Form.URL, url, UrlUpstream)


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("http://mcp.example.com/mcp", HTTP_HINT),
        ("http://10.0.0.1/mcp", HTTP_HINT),
        ("http://128.0.0.1/mcp", HTTP_HINT),
        ("http://127.1/mcp", HTTP_HINT),
        ("http://localhost.example.com/mcp", HTTP_HINT),
        ("http://mcp.localhost/mcp", HTTP_HINT),
        ("http://localhost./mcp", HTTP_HINT),
        ("http://[::2]/mcp", HTTP_HINT),
        ("ftp://mcp.example.com/mcp", SCHEME_HINT),
        ("file:///etc/passwd", SCHEME_HINT),
        ("https:///mcp", "the URL has no host"),
        ("https://user:s3cr3t@mcp.example.com/mcp", USERINFO_HINT),
        ("https://token@mcp.example.com/mcp", USERINFO_HINT),
        ("https://mcp.example.com/mcp#part", "remove the fragment from the URL"),
        ("https://mcp.example.com:0/mcp", "the port 0 is not valid"),
        ("https://mcp.example.com:65536/mcp", "use a port from 1 to 65535"),
        ("https://mcp.example.com:/mcp", "use a port from 1 to 65535"),
        ("https://mcp.example.com/a b", SYNTAX_HINT),
        ("https://mcp.example.com/\r\nx: 1", SYNTAX_HINT),
        ("https://mcp.ex\u00e4mple.com/mcp", SYNTAX_HINT),
        ("https://mcp.example.com:84x3/mcp", SYNTAX_HINT),
        ("https://[fe80::1%25eth0]/mcp", SYNTAX_HINT),
        ("https://[zz::1]/mcp", SYNTAX_HINT),
        ("https://mcp.example.com/%zz", SYNTAX_HINT),
        ("https://mcp.example.com/{x}", SYNTAX_HINT),
        ("1https://mcp.example.com/", SYNTAX_HINT),
    ],
)  # fmt: skip
def test_an_upstream_url_that_is_not_valid_gets_a_hint_without_url_parts(url: str, hint: str) -> None:
    assert upstream_url_hint(url) == hint
    e = error([url])
    assert e.kind == "invalid_url"
    assert e.diagnostic == f"the URL of the upstream server is not valid: {hint}"


def test_the_url_of_logout_and_check_is_checked_too() -> None:
    assert error(["logout", "http://a.example/mcp"]).kind == "invalid_url"
    assert error(["check", "https://u:" + MARKER + "@a.example/mcp"]).kind == "invalid_url"


# ---------------------------------------------------------------------------------------------
# Which form takes which option
# ---------------------------------------------------------------------------------------------

COMMAND, URL_T, LOGOUT, CHECK_COMMAND, CHECK_URL = "command", "url", "logout", "check-command", "check-url"
EVERY = {COMMAND, URL_T, LOGOUT, CHECK_COMMAND, CHECK_URL}
TAKES: dict[str, tuple[list[str], set[str]]] = {
    "--log-level": (["--log-level", "debug"], EVERY),
    "--name": (["--name", "n"], EVERY - {LOGOUT}),
    "--discover-timeout": (["--discover-timeout", "5"], EVERY - {LOGOUT}),
    "--max-line-bytes": (["--max-line-bytes", "5"], EVERY - {LOGOUT}),
    "--protocol": (["--protocol", "legacy"], EVERY - {LOGOUT}),
    "--tasks": (["--tasks", "off"], EVERY - {LOGOUT}),
    "--host-profile": (["--host-profile", "generic"], EVERY - {LOGOUT}),
    "--allow-tool": (["--allow-tool", "git_*"], EVERY - {LOGOUT}),
    "--deny-tool": (["--deny-tool", "*delete*"], EVERY - {LOGOUT}),
    "--header": (["--header", "x-a:1"], {URL_T, CHECK_URL}),
    "--header-env": (["--header-env", "x-a=TENANT"], {URL_T, CHECK_URL}),
    "--header-secret": (["--header-secret", "x-b=api-key"], {URL_T, CHECK_URL}),
    "--max-response-bytes": (["--max-response-bytes", "5"], {URL_T, CHECK_URL}),
    "--transport": (["--transport", "sse"], {URL_T, CHECK_URL}),
    "--client-id": (["--client-id", "c"], {URL_T, CHECK_URL}),
    "--client-issuer": (["--client-issuer", "https://as.example", "--client-id", "c"], {URL_T, CHECK_URL}),
    "--client-metadata-url": (["--client-metadata-url", "https://c.example/c.json"], {URL_T, CHECK_URL}),
    "--no-browser": (["--no-browser"], {URL_T, CHECK_URL}),
    "--sign-in-timeout": (["--sign-in-timeout", "5"], {URL_T, CHECK_URL}),
    "--sign-in": (["--sign-in", "device"], {URL_T, CHECK_URL}),
    "--resource-indicator": (["--resource-indicator", "off"], {URL_T, CHECK_URL}),
    "--ca-file": (["--ca-file", "ca.pem"], {URL_T, CHECK_URL, LOGOUT}),
    "--redirect-port": (["--redirect-port", "5000"], {URL_T, CHECK_URL, LOGOUT}),
    "--account": (["--account", "work"], {URL_T, CHECK_URL, LOGOUT}),
    "--token-store": (["--token-store", "memory"], {URL_T, CHECK_URL, LOGOUT}),
    "--token-key-file": (["--token-key-file", "key.txt"], {URL_T, CHECK_URL, LOGOUT}),
    "--all": (["--all"], {LOGOUT}),
    "--json": (["--json"], {CHECK_COMMAND, CHECK_URL}),
    "--call-tool": (["--call-tool", "echo"], {CHECK_COMMAND, CHECK_URL}),
    "--call-arguments": (["--call-arguments", "{}", "--call-tool", "echo"], {CHECK_COMMAND, CHECK_URL}),
}
APPLICABILITY_ENV = {"TENANT": "blue"}


def argv_for(target: str, options: list[str]) -> list[str]:
    if target == COMMAND:
        return [*options, "--", "server"]
    if target == URL_T:
        return [*options, URL]
    if target == CHECK_COMMAND:
        return ["check", *options, "--", "server"]
    if target == CHECK_URL:
        return ["check", *options, URL]
    return ["logout", *options] if options == ["--all"] else ["logout", *options, URL]


def refusal(option: str, target: str) -> str:
    if option == "--all":
        return "only logout takes it"
    if option in ("--json", "--call-tool", "--call-arguments"):
        return "only check takes it"
    if target == LOGOUT:
        return "logout does not take it"
    return COMMAND_HINT


def test_the_table_of_the_tests_names_every_option_of_the_parser() -> None:
    assert set(TAKES) == set(args.OPTIONS)


@pytest.mark.parametrize("target", sorted(EVERY))
@pytest.mark.parametrize("option", sorted(TAKES))
def test_each_form_takes_its_options_and_refuses_the_others_with_the_reason(option: str, target: str) -> None:
    sample, targets = TAKES[option]
    argv = argv_for(target, sample)
    if target in targets:
        s = ok(argv, APPLICABILITY_ENV)
        assert s.form is {COMMAND: Form.COMMAND, URL_T: Form.URL, LOGOUT: Form.LOGOUT}.get(target, Form.CHECK)
    else:
        e = error(argv, APPLICABILITY_ENV)
        assert (e.kind, e.option) == ("conflict", option)
        assert e.diagnostic == f"the option {option} cannot be used here: {refusal(option, target)}"


def test_the_first_refused_option_of_the_command_line_is_named() -> None:
    e = error(["--name", "n", "--no-browser", "--header", "x-a:1", "--", "x"])
    assert e.option == "--no-browser"


def test_the_check_of_each_value_comes_before_the_check_of_the_form() -> None:
    assert error(["--header", "nonsense", "--", "x"]).kind == "invalid_value"
    assert error(["--redirect-port", "0", "--", "x"]).kind == "invalid_value"


def test_the_check_of_the_form_comes_before_the_check_of_the_url() -> None:
    assert error(["--all", "http://a.example/mcp"]).kind == "conflict"


# ---------------------------------------------------------------------------------------------
# Headers
# ---------------------------------------------------------------------------------------------


def test_the_headers_of_both_options_accumulate_in_order_with_trimmed_values() -> None:
    env = {"API_TOKEN": "Bearer marker-0c9f", "TENANT": "  blue\t"}
    s = ok(
        [
            "--header", "X-Client: vscode ",
            "--header-env", "Authorization=API_TOKEN",
            "--header-env=X-Tenant=TENANT",
            "--header=x-colon:a:b",
            "--header", "x-tab:a\tb",
            URL,
        ],
        env,
    )  # fmt: skip
    assert s.upstream.headers == (
        Header("X-Client", "vscode", None),
        Header("Authorization", "Bearer marker-0c9f", "API_TOKEN"),
        Header("X-Tenant", "blue", "TENANT"),
        Header("x-colon", "a:b", None),
        Header("x-tab", "a\tb", None),
    )
    # A static authorization header turns off the sign-in.
    assert s.upstream.static_authorization is True
    assert s.upstream.sign_in is None
    # The value came from the environment, thus no warning.
    assert s.warnings == ()


def test_a_header_value_keeps_the_bytes_of_the_command_line() -> None:
    s = ok(["--header", "x-a:caf\u00e9 \udcff", URL])
    assert s.upstream.headers[0].value.encode("utf-8", "surrogateescape") == b"caf\xc3\xa9 \xff"


@pytest.mark.parametrize("name", ["Authorization", "AUTHORIZATION", "Cookie", "x-api-key", "Api-Key"])
def test_a_secret_header_on_the_command_line_gives_one_warning_with_its_name(name: str) -> None:
    s = ok(["--header", "x-a:1", "--header", f"{name}:{MARKER}", "--header", "cookie2:x", URL])
    assert s.warnings == (
        f"the value of the header {name} is on the command line. VS Code writes the command line to its log, "
        "and the process list shows it. Use --header-env.",
    )
    assert MARKER not in " ".join(s.warnings)
    assert s.upstream.static_authorization is (name.lower() == "authorization")


def test_only_the_first_secret_header_gives_the_warning() -> None:
    s = ok(["--header", "Cookie:a", "--header", "x-api-key:b", URL])
    assert len(s.warnings) == 1 and "Cookie" in s.warnings[0]


def test_a_cookie_header_keeps_the_sign_in() -> None:
    s = ok(["--header", "Cookie:a=b", URL])
    assert s.upstream.static_authorization is False
    assert s.upstream.sign_in.registration == DynamicRegistration()


@pytest.mark.parametrize("name", sorted(args.REFUSED_HEADER_NAMES))
@pytest.mark.parametrize("option", ["--header", "--header-env"])
def test_a_header_that_the_connection_sets_is_refused(name: str, option: str) -> None:
    separator = ":" if option == "--header" else "="
    for written in (name, name.upper(), name.title()):
        e = error([option, f"{written}{separator}VALUE", URL])
        assert (e.kind, e.option) == ("refused_header", option)
        assert e.diagnostic == (
            f"the header {written} of {option} is not permitted: "
            "the bridge or the HTTP connection sets this header"
        )


@pytest.mark.parametrize(
    "arg", ["mcp-protocol-version:x", "Mcp-Method:x", "MCP-Name:x", "mcp-param-a:x", "mcp-:x"]
)
def test_the_header_names_of_the_protocol_are_refused(arg: str) -> None:
    e = error(["--header", arg, URL])
    assert e.kind == "refused_header"
    assert e.diagnostic.endswith(
        "is not permitted: the header names that start with mcp- are for the protocol"
    )


@pytest.mark.parametrize(
    "argv",
    [["--header", "proxy-authorization:Basic " + MARKER, URL], ["--header", "Proxy-Authorization:x", URL],
     ["--header-env", "Proxy-Authorization=VAR", URL]],
)  # fmt: skip
def test_a_proxy_credential_header_is_refused_with_the_proxy_url_hint(argv: list[str]) -> None:
    e = error(argv, {"VAR": MARKER})
    assert e.kind == "refused_header"
    assert e.diagnostic.endswith(
        "is not permitted: the header goes to the upstream server and not to the proxy: "
        "put the user and the password in the proxy URL of HTTPS_PROXY"
    )
    assert MARKER not in e.diagnostic


def test_a_name_that_only_contains_a_refused_name_is_valid() -> None:
    s = ok(["--header", "x-host:a", "--header", "accepted:b", "--header", "x-mcp-a:c", URL])
    assert [h.name for h in s.upstream.headers] == ["x-host", "accepted", "x-mcp-a"]


HEADER_ENV = {"EMPTY": "", "BLANK": " \t ", "BROKEN": "Bearer a\r\nx-injected: 1", "OK": "v"}


@pytest.mark.parametrize(
    ("arg", "diagnostic"),
    [
        ("", "the value of --header is not valid: use <name>:<value>, with an HTTP header name"),
        ("novalue", "the value of --header is not valid: use <name>:<value>, with an HTTP header name"),
        (":v", "the value of --header is not valid: use <name>:<value>, with an HTTP header name"),
        ("a b:v", "the value of --header is not valid: use <name>:<value>, with an HTTP header name"),
        ("a\r\nb:v", "the value of --header is not valid: use <name>:<value>, with an HTTP header name"),
        (
            "Bearer " + MARKER,
            "the value of --header is not valid: use <name>:<value>, with an HTTP header name",
        ),
        ("x-a:", "the header x-a of --header is not valid: the header has no value"),
        ("x-a: \t ", "the header x-a of --header is not valid: the header has no value"),
        ("x-a:v\r\nx-b: 1", "the header x-a of --header is not valid: the value has a control character"),
        ("x-a:v\x00", "the header x-a of --header is not valid: the value has a control character"),
        (
            "x-a:" + MARKER + "\x7f",
            "the header x-a of --header is not valid: the value has a control character",
        ),
        (
            "x-a:\ud800",
            "the header x-a of --header is not valid: the value has a character that is not valid",
        ),
    ],
)
def test_a_header_that_is_not_valid_is_refused(arg: str, diagnostic: str) -> None:
    e = error(["--header", arg, URL], HEADER_ENV)
    assert (e.kind, e.option, e.diagnostic) == ("invalid_value", "--header", diagnostic)


@pytest.mark.parametrize("arg", ["", "x-a", "x-a=", "=VAR", "x-a=1VAR", "x-a=VAR-NAME", "x-a=A B", "a b=VAR"])
def test_a_header_env_that_is_not_valid_is_refused(arg: str) -> None:
    e = error(["--header-env", arg, URL], HEADER_ENV)
    assert (e.kind, e.option) == ("invalid_value", "--header-env")
    assert e.diagnostic == (
        "the value of --header-env is not valid: "
        "use <name>=<variable>, with an HTTP header name and the name of an environment variable"
    )


@pytest.mark.parametrize("variable", ["MCP_BRIDGE_TEST_NOT_SET", "EMPTY", "BLANK"])
def test_a_missing_or_empty_variable_of_header_env_is_an_error(variable: str) -> None:
    e = error(["--header-env", f"x-a={variable}", URL], HEADER_ENV)
    assert (e.kind, e.option) == ("missing_variable", "--header-env")
    assert e.diagnostic == f"the environment variable {variable} of --header-env is not set, or it is empty"


def test_a_variable_of_header_env_with_a_control_character_is_an_error() -> None:
    e = error(["--header-env", "x-a=BROKEN", URL], HEADER_ENV)
    assert e.kind == "invalid_variable"
    assert (
        e.diagnostic
        == "the environment variable BROKEN is not valid: the value is not a valid HTTP header value"
    )


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["--header", "X-A:1", "--header", "x-a:2", URL], "x-a"),
        (["--header", "authorization:1", "--header-env", "Authorization=OK", URL], "Authorization"),
        (["--header-env", "x-a=OK", "--header-env", "X-A=OK", URL], "X-A"),
    ],
)
def test_the_same_header_twice_is_an_error(argv: list[str], shown: str) -> None:
    e = error(argv, HEADER_ENV)
    assert e.kind == "duplicate_header"
    assert e.diagnostic == f"the header {shown} occurs more than one time in --header and --header-env"


# ---------------------------------------------------------------------------------------------
# Static authorization, registration, token store
# ---------------------------------------------------------------------------------------------

SIGN_IN_SAMPLES = [
    ["--client-id", "c"],
    ["--client-issuer", "https://as.example"],
    ["--client-metadata-url", "https://c.example/c.json"],
    ["--redirect-port", "5000"],
    ["--account", "work"],
    ["--token-store", "memory"],
    ["--token-key-file", "key.txt"],
    ["--no-browser"],
    ["--sign-in-timeout", "10"],
]
STATIC_SAMPLES = [["--header-env", "authorization=TOKEN"], ["--header", "Authorization:Bearer " + MARKER]]


@pytest.mark.parametrize("sign_in", SIGN_IN_SAMPLES, ids=lambda a: a[0])
@pytest.mark.parametrize("static", STATIC_SAMPLES, ids=lambda a: a[0])
@pytest.mark.parametrize("form", ["url", "check"])
def test_a_static_authorization_header_and_each_sign_in_option_exclude_each_other_in_any_order(
    sign_in: list[str], static: list[str], form: str
) -> None:
    env = {"TOKEN": "Bearer " + MARKER}
    head = ["check"] if form == "check" else []
    for argv in ([*head, *static, *sign_in, URL], [*head, *sign_in, *static, URL]):
        e = error(argv, env)
        assert (e.kind, e.option) == ("conflict", sign_in[0])
        assert e.diagnostic == f"the option {sign_in[0]} cannot be used here: {STATIC_HINT}"
        assert MARKER not in e.diagnostic


def test_a_static_authorization_header_goes_with_the_options_of_the_http_client() -> None:
    env = {"TOKEN": "Bearer t", "MCP_BRIDGE_TOKEN_KEY": MARKER, "MCP_BRIDGE_CLIENT_SECRET": MARKER}
    s = ok(["--header-env", "authorization=TOKEN", "--header", "x-a:1", "--ca-file", "ca.pem",
            "--max-response-bytes", "10", URL], env)  # fmt: skip
    assert s.upstream.static_authorization is True
    assert s.upstream.sign_in is None
    # No token store opens, thus the key is neither read nor checked; no sign-in, thus no client secret.
    assert (s.upstream.store.token_key, s.upstream.sign_in) == (None, None)
    assert (s.upstream.max_response_bytes, s.upstream.ca_file) == (10, "ca.pem")


def test_a_client_id_with_an_issuer_and_a_secret_is_pre_registered() -> None:
    env = {"MCP_BRIDGE_CLIENT_SECRET": " s3cr3t-marker\t"}
    s = ok(["--client-id", "bridge-client", "--client-issuer", "https://as.example.com/tenant", URL], env)
    assert s.upstream.sign_in.registration == PreRegistered(
        "bridge-client", "https://as.example.com/tenant", "s3cr3t-marker"
    )
    assert s.upstream.sign_in.client_secret == "s3cr3t-marker"
    assert (s.upstream.sign_in.client_id, s.upstream.sign_in.client_issuer) == (
        "bridge-client",
        "https://as.example.com/tenant",
    )


def test_a_client_id_without_a_secret_is_a_public_client_and_the_issuer_is_optional() -> None:
    for env in ({}, {"MCP_BRIDGE_CLIENT_SECRET": " \t "}):
        s = ok(["--client-id", "bridge-client", URL], env)
        assert s.upstream.sign_in.registration == PreRegistered("bridge-client", None, None)
        assert s.upstream.sign_in.client_secret is None


def test_a_client_with_a_secret_needs_an_issuer() -> None:
    e = error(["--client-id", "c1", "--token-store", "memory", URL], {"MCP_BRIDGE_CLIENT_SECRET": MARKER})
    assert (e.kind, e.option) == ("conflict", "--client-id")
    assert e.diagnostic == (
        "the option --client-id cannot be used here: a client with a secret in MCP_BRIDGE_CLIENT_SECRET "
        "needs --client-issuer"
    )


def test_the_client_secret_is_read_only_with_a_client_id() -> None:
    s = ok([URL], {"MCP_BRIDGE_CLIENT_SECRET": MARKER})
    assert s.upstream.sign_in.client_secret is None


def test_the_registration_follows_the_options_and_the_redirect_port() -> None:
    assert ok(
        ["--client-metadata-url", "https://c.example/app.json", "--redirect-port", "5000", URL]
    ).upstream.sign_in.registration == (ClientMetadataDocument("https://c.example/app.json", explicit=True))
    assert ok(["--redirect-port", "5000", URL]).upstream.sign_in.registration == DynamicRegistration()
    assert ok(
        ["--client-id", "c", "--redirect-port", "5000", URL]
    ).upstream.sign_in.registration == PreRegistered("c", None, None)
    default = ok([URL]).upstream.sign_in.registration
    if args.DEFAULT_CLIENT_METADATA_URL is None:
        assert default == DynamicRegistration()
    else:
        assert default == ClientMetadataDocument(args.DEFAULT_CLIENT_METADATA_URL, explicit=False)


def test_the_redirect_uri_uses_the_literal_loopback_address() -> None:
    assert ok([URL]).upstream.sign_in.redirect_uri == "http://127.0.0.1:41894/callback"
    assert (
        ok(["--redirect-port", "50000", URL]).upstream.sign_in.redirect_uri
        == "http://127.0.0.1:50000/callback"
    )


@pytest.mark.parametrize(
    ("argv", "option", "diagnostic"),
    [
        (["--client-issuer", "https://as.example", URL], "--client-issuer",
         "the option --client-issuer cannot be used here: it needs --client-id"),
        (["--client-id", "c", "--client-metadata-url", "https://c.example/c.json", URL],
         "--client-metadata-url",
         "the option --client-metadata-url cannot be used here: "
         "--client-id and --client-metadata-url exclude each other"),
    ],
)  # fmt: skip
def test_the_registration_options_that_exclude_each_other(
    argv: list[str], option: str, diagnostic: str
) -> None:
    e = error(argv)
    assert (e.kind, e.option, e.diagnostic) == ("conflict", option, diagnostic)


@pytest.mark.parametrize(
    ("client_id", "hint"),
    [("", "the client ID cannot be empty"),
     ("a\x01b", "a client ID has only visible ASCII characters and spaces"),
     ("caf\u00e9", "a client ID has only visible ASCII characters and spaces")],
)  # fmt: skip
def test_a_client_id_has_visible_ascii_and_spaces_only(client_id: str, hint: str) -> None:
    e = error(["--client-id", client_id, URL])
    assert e.diagnostic == f"the value of --client-id is not valid: {hint}"
    assert ok(["--client-id", "my client ~1", URL]).upstream.sign_in.client_id == "my client ~1"


@pytest.mark.parametrize(
    ("issuer", "hint"),
    [
        ("http://as.example", "use an https URL"),
        ("as.example", "use an https URL"),
        ("https://as.example/a b", "use an https URL"),
        ("https://", "the URL has no host"),
        ("https://as.example?x=1", "an issuer has no query and no fragment"),
        ("https://as.example#f", "an issuer has no query and no fragment"),
        ("https://u:p@as.example", "remove the user and the password from the URL"),
    ],
)
def test_an_issuer_is_an_https_url_without_query_and_fragment(issuer: str, hint: str) -> None:
    e = error(["--client-id", "c", "--client-issuer", issuer, URL])
    assert e.diagnostic == f"the value of --client-issuer is not valid: {hint}"


@pytest.mark.parametrize(
    "document",
    [
        "http://c.example/c.json", "https://c.example", "https://c.example/", "https://c.example/c.json#f",
        "https://u@c.example/c.json", "https://c.example/../c.json", "https://c.example/a/./c.json",
        "https://c.example/%2E%2E/c.json", "https://c.example/a b", "https://c.example:0/c.json",
    ],
)  # fmt: skip
def test_a_client_metadata_url_is_https_with_a_path_and_no_user_or_fragment(document: str) -> None:
    e = error(["--client-metadata-url", document, URL])
    assert e.diagnostic == (
        "the value of --client-metadata-url is not valid: "
        "use an https URL with a path, without a user, a password and a fragment"
    )


@pytest.mark.parametrize("label", ["", "a|b", "a b", "\u00e4", "x" * 65])
def test_an_account_label_is_1_to_64_safe_characters(label: str) -> None:
    e = error(["--account", label, URL])
    assert (
        e.diagnostic
        == "the value of --account is not valid: use 1 to 64 letters, digits and the characters . _ @ + -"
    )


def test_an_account_label_of_64_characters_is_accepted() -> None:
    assert ok(["--account", "x" * 64, URL]).upstream.store.account == "x" * 64
    assert (
        ok(["--account", "work.me_1@example.com+a-b", URL]).upstream.store.account
        == "work.me_1@example.com+a-b"
    )


@pytest.mark.parametrize("store", ["auto", "file"])
def test_the_token_key_of_the_environment_is_read_for_the_stores_that_take_a_key(store: str) -> None:
    s = ok(["--token-store", store, URL], {"MCP_BRIDGE_TOKEN_KEY": f" {KEY_HEX}\t"})
    assert s.upstream.store.token_key == bytes(range(32))


@pytest.mark.parametrize("store", ["keychain", "memory"])
def test_the_stores_without_a_key_ignore_the_token_key_variable(store: str) -> None:
    s = ok(["--token-store", store, URL], {"MCP_BRIDGE_TOKEN_KEY": MARKER})
    assert s.upstream.store.token_key is None


def test_a_token_key_file_is_kept_as_a_path_and_not_read() -> None:
    assert (
        ok(["--token-store", "file", "--token-key-file", "key.txt", URL]).upstream.store.token_key_file
        == "key.txt"
    )
    assert ok(["--token-key-file", "no/such/file", URL]).upstream.store.token_key_file == "no/such/file"


@pytest.mark.parametrize("bad", ["00", KEY_HEX + "00", "zz" + KEY_HEX[2:], KEY_HEX[:63] + " x", MARKER])
def test_a_token_key_that_is_not_64_hex_digits_is_an_error(bad: str) -> None:
    e = error([URL], {"MCP_BRIDGE_TOKEN_KEY": bad})
    assert e.kind == "invalid_variable"
    assert (
        e.diagnostic
        == "the environment variable MCP_BRIDGE_TOKEN_KEY is not valid: use 64 hexadecimal digits"
    )
    assert error(["logout", "--all"], {"MCP_BRIDGE_TOKEN_KEY": bad}).kind == "invalid_variable"


@pytest.mark.parametrize(
    ("argv", "env", "diagnostic"),
    [
        (["--token-store", "memory", "--token-key-file", "k", URL], {},
         f"the option --token-key-file cannot be used here: {KEY_FILE_HINT}"),
        (["--token-store", "keychain", "--token-key-file", "k", URL], {},
         f"the option --token-key-file cannot be used here: {KEY_FILE_HINT}"),
        (["--token-key-file", "k", URL], {"MCP_BRIDGE_TOKEN_KEY": KEY_HEX},
         "the option --token-key-file cannot be used here: "
         "give the key in MCP_BRIDGE_TOKEN_KEY or in a file, not in both"),
        (["--token-store", "file", URL], {"MCP_BRIDGE_TOKEN_KEY": " "},
         "--token-store file needs a key: "
         "set the environment variable MCP_BRIDGE_TOKEN_KEY, or give --token-key-file"),
    ],
)  # fmt: skip
def test_the_token_key_rules(argv: list[str], env: dict[str, str], diagnostic: str) -> None:
    assert error(argv, env).diagnostic == diagnostic


# ---------------------------------------------------------------------------------------------
# logout and check
# ---------------------------------------------------------------------------------------------


def test_logout_of_one_url_takes_the_store_options() -> None:
    s = ok(["logout", "--account", "work", "--redirect-port", "5000", "--token-store", "keychain",
            "--ca-file", "ca.pem", "--log-level", "debug", URL])  # fmt: skip
    assert (s.form, s.url, s.all) == (Form.LOGOUT, URL, False)
    assert (s.store.account, s.redirect_port, s.store.token_store, s.ca_file, s.log_level) == (
        "work", 5000, "keychain", "ca.pem", "debug"
    )  # fmt: skip
    assert isinstance(s, LogoutSettings)


def test_logout_all_has_no_url() -> None:
    s = ok(["logout", "--all"])
    assert (s.form, s.url, s.all, s.store.account) == (Form.LOGOUT, None, True, "default")


@pytest.mark.parametrize(
    ("argv", "kind", "diagnostic"),
    [
        (["logout"], "missing_url",
         "the URL of the upstream server is missing: give it after the options of logout, or give --all"),
        (["logout", "--account", "work"], "missing_url",
         "the URL of the upstream server is missing: give it after the options of logout, or give --all"),
        (["logout", "--all", URL], "conflict",
         "the option --all cannot be used here: give the URL of one server, or --all"),
        (["logout", "--account", "work", "--all"], "conflict",
         "the option --account cannot be used here: logout --all deletes the sign-in of each account"),
        (["logout", "--", "server"], "unexpected_argument",
         "an argument is not an option: logout takes no upstream command"),
    ],
)  # fmt: skip
def test_the_logout_rules(argv: list[str], kind: str, diagnostic: str) -> None:
    e = error(argv)
    assert (e.kind, e.diagnostic) == (kind, diagnostic)


def test_check_of_a_command_takes_the_command_options_and_json() -> None:
    s = ok(["check", "--json", "--protocol", "2026-07-28", "--discover-timeout", "3", "--", "srv", "-v"])
    assert (s.form, s.upstream.command, s.json, s.upstream.protocol, s.upstream.discover_timeout) == (
        Form.CHECK, ("srv", "-v"), True, "2026-07-28", 3.0
    )  # fmt: skip
    # A command has no URL and no sign-in.
    assert type(s.upstream) is CommandUpstream


def test_check_of_a_url_takes_the_url_options_and_resolves_them_like_the_url_form() -> None:
    s = ok(["check", "--json", "--header-env", "x-t=TENANT", "--no-browser", URL], {"TENANT": "blue"})
    assert (s.form, s.upstream.url, s.json, s.upstream.sign_in.no_browser) == (Form.CHECK, URL, True, True)
    assert type(s.upstream) is UrlUpstream
    assert s.upstream.headers == (Header("x-t", "blue", "TENANT"),)
    assert s.upstream.sign_in.registration == DynamicRegistration()
    assert error(["check", "--token-store", "file", URL]).kind == "missing_token_key"


def test_check_calls_a_tool_only_when_asked_and_with_a_json_object_as_its_arguments() -> None:
    s = ok(["check", "--", "srv"])
    assert (s.call_tool, s.call_arguments) == (None, {})
    s = ok(["check", "--call-tool", "echo", "--call-arguments", '{"text": "hi", "n": [1]}', "--", "srv"])
    assert (s.call_tool, s.call_arguments) == ("echo", {"text": "hi", "n": [1]})
    assert "hi" not in repr(s)


@pytest.mark.parametrize("arguments", ["[1]", '"text"', "{", "", "[" * 100_000])
def test_the_arguments_of_call_tool_are_a_json_object(arguments: str) -> None:
    e = error(["check", "--call-tool", "echo", "--call-arguments", arguments, "--", "srv"])
    assert (e.kind, e.option) == ("invalid_value", "--call-arguments")
    assert e.diagnostic == (
        'the value of --call-arguments is not valid: use a JSON object, for example {"text": "hello"}'
    )


def test_the_arguments_of_call_tool_need_call_tool() -> None:
    e = error(["check", "--call-arguments", "{}", "--", "srv"])
    assert (e.kind, e.option) == ("conflict", "--call-arguments")
    assert e.diagnostic == "the option --call-arguments cannot be used here: it needs --call-tool"


def test_logout_and_check_are_subcommands_only_as_the_first_argument() -> None:
    assert ok(["--", "check"]).upstream.command == ("check",)
    assert error(["--name", "x", "check", "--", "y"]).kind == "unexpected_argument"
    assert error(["check", "check", "--", "y"]).kind == "unexpected_argument"


# ---------------------------------------------------------------------------------------------
# Exact diagnostics, and never a value
# ---------------------------------------------------------------------------------------------

SECRET_ENV = {
    "SECRET_HEADER": f"Bearer {MARKER}\r\n",
    "MCP_BRIDGE_TOKEN_KEY": MARKER,
    "MCP_BRIDGE_CLIENT_SECRET": MARKER,
}


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        ([MARKER],
         f"an argument is not an option: {FORMS_HINT}"),
        ([],
         'the upstream server is missing: give its URL, or put the upstream command after "--"'),
        (["--token=" + MARKER, "--", "x"],
         "the option --token is not known"),
        (["--name"],
         "the option --name needs a value"),
        (["--log-level=" + MARKER, "--", "x"],
         "the value of --log-level is not valid: use err, warn, info or debug"),
        (["--max-line-bytes", "0", "--", "x"],
         "the value of --max-line-bytes is not valid: use a number of bytes from 1 to 1073741824"),
        ([f"https://u:{MARKER}@a.example/mcp", "x"],
         f"an argument is not an option: {LAST_HINT}"),
        ([f"https://u:{MARKER}@a.example/mcp"],
         f"the URL of the upstream server is not valid: {USERINFO_HINT}"),
        ([f"http://{MARKER}.example/mcp"],
         f"the URL of the upstream server is not valid: {HTTP_HINT}"),
        (["--header", "Bearer " + MARKER, URL],
         "the value of --header is not valid: use <name>:<value>, with an HTTP header name"),
        (["--header", f"x-a:{MARKER}\x7f", URL],
         "the header x-a of --header is not valid: the value has a control character"),
        (["--header", f"Host:{MARKER}", URL],
         "the header Host of --header is not permitted: the bridge or the HTTP connection sets this header"),
        (["--header", f"mcp-method:{MARKER}", URL],
         "the header mcp-method of --header is not permitted: "
         "the header names that start with mcp- are for the protocol"),
        (["--header", f"Proxy-Authorization:Basic {MARKER}", URL],
         "the header Proxy-Authorization of --header is not permitted: the header goes to the upstream "
         "server and not to the proxy: put the user and the password in the proxy URL of HTTPS_PROXY"),
        (["--header", f"x-a:{MARKER}", "--header", f"X-A:{MARKER}", URL],
         "the header X-A occurs more than one time in --header and --header-env"),
        (["--header-env", "Authorization=API_TOKEN", URL],
         "the environment variable API_TOKEN of --header-env is not set, or it is empty"),
        (["--header-env", "Authorization=SECRET_HEADER", URL],
         "the environment variable SECRET_HEADER is not valid: the value is not a valid HTTP header value"),
        ([URL],
         "the environment variable MCP_BRIDGE_TOKEN_KEY is not valid: use 64 hexadecimal digits"),
        (["--client-id", "c1", "--token-store", "memory", URL],
         "the option --client-id cannot be used here: "
         "a client with a secret in MCP_BRIDGE_CLIENT_SECRET needs --client-issuer"),
        (["--header", f"Authorization:{MARKER}", "--no-browser", URL],
         f"the option --no-browser cannot be used here: {STATIC_HINT}"),
        (["--header", f"x-a:{MARKER}", "--", "x"],
         f"the option --header cannot be used here: {COMMAND_HINT}"),
        (["--token-store", "memory", "--token-key-file", MARKER, URL],
         f"the option --token-key-file cannot be used here: {KEY_FILE_HINT}"),
        (["--json", f"https://{MARKER}.example/"],
         "the option --json cannot be used here: only check takes it"),
        (["--protocol", MARKER, "--", "x"],
         "the value of --protocol is not valid: use auto, 2026-07-28 or legacy"),
        (["--client-issuer", f"https://{MARKER}.example?q", "--client-id", "c", URL],
         "the value of --client-issuer is not valid: an issuer has no query and no fragment"),
        (["--account", MARKER + "|x", URL],
         "the value of --account is not valid: use 1 to 64 letters, digits and the characters . _ @ + -"),
        (["logout"],
         "the URL of the upstream server is missing: give it after the options of logout, or give --all"),
    ],
)  # fmt: skip
def test_each_diagnostic_has_its_exact_text_and_no_value(argv: list[str], text: str) -> None:
    e = error(argv, SECRET_ENV)
    assert e.diagnostic == text
    assert str(e) == text
    assert MARKER not in e.diagnostic


def test_an_error_exits_2() -> None:
    e = error(["--bogus", "--", "x"])
    assert e.exit_code == 2 == ArgError.exit_code
    assert e.diagnostic == "the option --bogus is not known"


def test_the_repr_of_the_settings_holds_no_secret() -> None:
    env = {"H": f"Bearer {MARKER}", "MCP_BRIDGE_TOKEN_KEY": KEY_HEX, "MCP_BRIDGE_CLIENT_SECRET": MARKER}
    s = ok(["--header-env", "x-h=H", "--header", f"x-v:{MARKER}", "--client-id", "c", "--client-issuer",
            "https://as.example", f"https://a.example/mcp?key={MARKER}"], env)  # fmt: skip
    assert s.upstream.sign_in.client_secret == MARKER and s.upstream.store.token_key is not None
    text = repr(s)
    assert MARKER not in text and KEY_HEX.lower() not in text and "\\x00\\x01" not in text
    c = ok(["--", "server", f"--api-key={MARKER}"])
    assert MARKER not in repr(c)


# ---------------------------------------------------------------------------------------------
# The cases of the process tests of the original bridge, at the level of the parser
# ---------------------------------------------------------------------------------------------

FIXTURE = "/opt/fixture/bridge-fixture-server"
LOCAL_URL = "https://127.0.0.1:9/mcp"

#: The 14 invalid-argument cases (behaviour §10.9): each exits 2. The parser refuses 13; the CA
#: file that cannot be read is refused by the executable when it reads the file.
INVALID_ARGUMENTS: list[tuple[list[str], str | None]] = [
    ([], "missing_command"),
    (["--"], "missing_command"),
    ([FIXTURE], "unexpected_argument"),
    (["--unknown", "--", FIXTURE], "unknown_option"),
    (["--log-level", "loud", "--", FIXTURE], "invalid_value"),
    (["--name", "--", FIXTURE], "missing_value"),
    (["--max-line-bytes", "0", "--", FIXTURE], "invalid_value"),
    (["--version=1", "--", FIXTURE], "invalid_value"),
    (["http://mcp.example.com/mcp"], "invalid_url"),
    (["--header-env", "authorization=MCP_BRIDGE_PROCESS_TEST_NOT_SET", LOCAL_URL], "missing_variable"),
    (["--header", "host:x", LOCAL_URL], "refused_header"),
    (["--header", "x-a:1", "--", FIXTURE], "conflict"),
    (["--ca-file", "test/fixtures/no-such-ca.pem", LOCAL_URL], None),
    (["logout"], "missing_url"),
]


@pytest.mark.parametrize(("argv", "kind"), INVALID_ARGUMENTS)
def test_the_invalid_argument_cases_of_the_process_tests(argv: list[str], kind: str | None) -> None:
    if kind is None:
        assert ok(argv).upstream.ca_file == "test/fixtures/no-such-ca.pem"
    else:
        assert error(argv).kind == kind


PROCESS_MARKER = "process-test-marker-3b7f"
CONFLICT_ENV = {
    "HTTP_TOKEN": "Bearer " + PROCESS_MARKER,
    "MCP_BRIDGE_CLIENT_SECRET": PROCESS_MARKER,
    "XDG_STATE_HOME": "/tmp/state",
}
VALID_KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
u = LOCAL_URL
m = PROCESS_MARKER

#: The conflicting-option cases (behaviour §10.9, ≈45), each with the key of MCP_BRIDGE_TOKEN_KEY
#: (or None) and the expected (kind, option). ``None`` for a case the executable refuses when it
#: opens a file (the parser keeps the path).
CONFLICTS: list[tuple[list[str], str | None, tuple[str, str | None] | None]] = [
    (["--allow-http", "http://127.0.0.1:9/mcp"], None, ("unknown_option", "--allow-http")),
    (["--insecure", u], None, ("unknown_option", "--insecure")),
    (["--headless", u], None, ("unknown_option", "--headless")),
    (["--client-secret=" + m, "--client-id", "c1", u], None, ("unknown_option", "--client-secret")),
    (["--token-key=" + m, u], None, ("unknown_option", "--token-key")),
    (["--header", "Authorization:Bearer " + m, "--client-id", "c1", u], None, ("conflict", "--client-id")),
    (["--header-env", "Authorization=HTTP_TOKEN", "--no-browser", u], None, ("conflict", "--no-browser")),
    (
        ["--header-env", "authorization=HTTP_TOKEN", "--token-store", "memory", u],
        None,
        ("conflict", "--token-store"),
    ),
    (["--client-issuer", "https://as.example", u], None, ("conflict", "--client-issuer")),
    (
        ["--client-id", "c1", "--client-metadata-url", "https://client.example/c.json", u],
        None,
        ("conflict", "--client-metadata-url"),
    ),
    (
        ["--client-metadata-url", "http://client.example/c.json", u],
        None,
        ("invalid_value", "--client-metadata-url"),
    ),
    (
        ["--client-issuer", "http://as.example", "--client-id", "c1", u],
        None,
        ("invalid_value", "--client-issuer"),
    ),
    (["--client-id", "c1", u], None, ("conflict", "--client-id")),
    (["--token-store", "memory", "--token-key-file", "key.txt", u], None, ("conflict", "--token-key-file")),
    (["--token-store", "keychain", "--token-key-file", "key.txt", u], None, ("conflict", "--token-key-file")),
    (["--token-store", "file", u], None, ("missing_token_key", "--token-store")),
    (["--token-store", "vault", u], None, ("invalid_value", "--token-store")),
    (["--token-key-file", "key.txt", u], VALID_KEY, ("conflict", "--token-key-file")),
    ([u], m, ("invalid_variable", None)),
    (["--token-store", "file", "--token-key-file", "test/fixtures/no-such-key.txt", u], None, None),
    (["--redirect-port", "0", u], None, ("invalid_value", "--redirect-port")),
    (["--redirect-port", "65536", u], None, ("invalid_value", "--redirect-port")),
    (["--account", "a|b", u], None, ("invalid_value", "--account")),
    (["--sign-in-timeout", "0", u], None, ("invalid_value", "--sign-in-timeout")),
    (["--max-response-bytes", "0", u], None, ("invalid_value", "--max-response-bytes")),
    (["--ca-file", "test/fixtures/tls/README.md", u], None, None),
    (["--header", "mcp-protocol-version:2025-11-25", u], None, ("refused_header", "--header")),
    (["--header-env", "Content-Type=HTTP_TOKEN", u], None, ("refused_header", "--header-env")),
    (["--header", "x-a:1", "--header", "X-A:2", u], None, ("duplicate_header", "--header")),
    (
        ["--header", "x-a:" + m, "--header-env", "X-A=HTTP_TOKEN", u],
        None,
        ("duplicate_header", "--header-env"),
    ),
    (
        ["--header-env", "x-api-key=MCP_BRIDGE_PROCESS_TEST_NOT_SET", u],
        None,
        ("missing_variable", "--header-env"),
    ),
    (["--header", "Proxy-Authorization:Basic " + m, u], None, ("refused_header", "--header")),
    (["--header-env", "Proxy-Authorization=HTTP_TOKEN", u], None, ("refused_header", "--header-env")),
    (["https://user:" + m + "@127.0.0.1:9/mcp"], None, ("invalid_url", None)),
    (["https://127.0.0.1:9/mcp#" + m], None, ("invalid_url", None)),
    (["https://127.0.0.1:0/mcp"], None, ("invalid_url", None)),
    (["ftp://127.0.0.1:9/mcp"], None, ("invalid_url", None)),
    ([u, "--no-browser"], None, ("unexpected_argument", None)),
    (["--redirect-port", "41900", "--", FIXTURE], None, ("conflict", "--redirect-port")),
    (["--no-browser", "--", FIXTURE], None, ("conflict", "--no-browser")),
    (["--ca-file", "ca.crt", "--", FIXTURE], None, ("conflict", "--ca-file")),
    (["logout", "--all", "--account", "work"], None, ("conflict", "--account")),
    (["logout", "--all", u], None, ("conflict", "--all")),
    (["logout", "--no-browser", u], None, ("conflict", "--no-browser")),
    (["logout", "--header", "x-a:1", u], None, ("conflict", "--header")),
    (["logout", "--", FIXTURE], None, ("unexpected_argument", None)),
    # The options of this bridge beyond the original: --protocol, --json and check.
    (["logout", "--protocol", "auto", u], None, ("conflict", "--protocol")),
    (["--json", u], None, ("conflict", "--json")),
    (["--json", "--", FIXTURE], None, ("conflict", "--json")),
    (["logout", "--json", "--all"], None, ("conflict", "--json")),
    (["check", "--all", u], None, ("conflict", "--all")),
    (["check", "--header", "x-a:" + m, "--", FIXTURE], None, ("conflict", "--header")),
    (["check", "--header", "Authorization:" + m, "--account", "x", u], None, ("conflict", "--account")),
    (["--protocol", "modern", u], None, ("invalid_value", "--protocol")),
]


@pytest.mark.parametrize(("argv", "token_key", "expected"), CONFLICTS)
def test_the_conflicting_option_cases_exit_2_without_a_value_on_stderr(
    argv: list[str], token_key: str | None, expected: tuple[str, str | None] | None
) -> None:
    env = dict(CONFLICT_ENV)
    if token_key is not None:
        env["MCP_BRIDGE_TOKEN_KEY"] = token_key
    if expected is None:
        ok(argv, env)
        return
    e = error(argv, env)
    assert (e.kind, e.option) == expected
    assert e.exit_code == 2
    assert PROCESS_MARKER not in e.diagnostic


# ---------------------------------------------------------------------------------------------
# Purity
# ---------------------------------------------------------------------------------------------


def test_the_parser_imports_no_io_thread_or_clock_module() -> None:
    forbidden = {"threading", "socket", "subprocess", "requests", "urllib3", "time", "webbrowser", "os", "io"}
    for module in (args, protocol):
        tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in forbidden, f"{module.__name__} imports {name}"


def test_the_parser_does_not_touch_the_environment_of_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_BRIDGE_TOKEN_KEY", "not a key")
    monkeypatch.setenv("TENANT", "from the process")
    assert ok([URL]).upstream.store.token_key is None
    assert error(["--header-env", "x-t=TENANT", URL]).kind == "missing_variable"


# ---------------------------------------------------------------------------------------------
# Property: random command lines
# ---------------------------------------------------------------------------------------------

VALUE_OPTIONS = [name for name, option in args.OPTIONS.items() if not option.flag and not option.header]
FLAGS = [name for name, option in args.OPTIONS.items() if option.flag]
HEADER_NAMES = ["x-a", "X-A", "x-b", "x-c", "x-d", "x-e", "authorization", "Authorization", "cookie", "Host",
                "mcp-x", "proxy-authorization", "x-api-key", "bad name", "", "te"]  # fmt: skip
#: Values that each option accepts, some of them with the marker: they get the parser past the
#: checks of the values, to the checks of the form and of the environment.
GOOD_VALUES: dict[str, list[str]] = {
    "--log-level": ["debug", "err"],
    "--name": ["n", MARKER],
    "--discover-timeout": ["5"],
    "--max-line-bytes": ["4096"],
    "--protocol": ["auto", "legacy", "2026-07-28"],
    "--tasks": ["auto", "off"],
    "--host-profile": ["auto", "vscode", "generic"],
    "--transport": ["auto", "streamable-http", "sse"],
    "--max-response-bytes": ["4096"],
    "--ca-file": ["ca.pem", MARKER],
    "--client-id": ["c", MARKER],
    "--client-issuer": ["https://as.example", f"https://as.example/{MARKER}"],
    "--client-metadata-url": ["https://c.example/c.json", f"https://c.example/{MARKER}.json"],
    "--redirect-port": ["41894", "5000"],
    "--account": ["work", MARKER],
    "--token-store": ["auto", "keychain", "file", "memory"],
    "--token-key-file": ["key.txt", MARKER],
    "--sign-in-timeout": ["10"],
    "--sign-in": ["auto", "browser", "device", "client-credentials"],
    "--resource-indicator": ["auto", "off", "api://mcp", f"urn:{MARKER}"],
    "--allow-tool": ["git_*", MARKER],
    "--deny-tool": ["*delete*", MARKER],
    "--call-tool": ["echo", MARKER],
    "--call-arguments": ["{}", f'{{"text": "{MARKER}"}}'],
}
VARIABLES = ["TOKEN", "EMPTY", "BLANK", "BROKEN", "UNSET", "1BAD", "A-B", ""]

marked_text = st.sampled_from(
    [MARKER, f"Bearer {MARKER}", f"{MARKER}\r\nx: 1", f"-{MARKER}", f"--{MARKER}", f" {MARKER} ",
     f"{MARKER}=x", f"{MARKER}:y", f"https://{MARKER}.example/c.json", f"https://as.example/{MARKER}",
     "0" + MARKER]
)  # fmt: skip
any_value = st.one_of(
    marked_text,
    st.text(max_size=12),
    st.sampled_from(["", "0", "1", "65535", "65536", "auto", "file", "memory", "legacy", "debug", "x" * 70]),
    st.sampled_from(["https://c.example/c.json", "https://as.example", KEY_HEX, "key.txt"]),
)
marked_url = st.sampled_from(
    [f"https://{MARKER}@h.example/x", f"https://h.example/x?key={MARKER}", f"https://h.example/#{MARKER}",
     f"http://{MARKER}.example/", f"ftp://{MARKER}/", f"https://h.example:{MARKER}/", f"{MARKER}://x",
     f"https://h.example/{MARKER} x", "https://a.example/mcp", "http://127.0.0.1:3000/mcp", "http://[::1]/"]
)  # fmt: skip


@st.composite
def option_unit(draw: st.DrawFn, wild: bool = True) -> list[str]:
    """One option with its value. ``wild`` mixes in values that the option refuses."""
    kind = draw(st.sampled_from(["value", "inline", "flag", "header", "header-env"]))
    if kind == "flag":
        return [draw(st.sampled_from([*FLAGS, "--no-browser", "--all", "--json"] * 2))]
    if kind in ("value", "inline"):
        name = draw(st.sampled_from(VALUE_OPTIONS))
        good = st.sampled_from(GOOD_VALUES[name])
        value = draw(st.one_of(good, good, any_value) if wild else good)
        return [f"{name}={value}"] if kind == "inline" else [name, value]
    header = draw(st.sampled_from(HEADER_NAMES))
    if kind == "header":
        good = st.sampled_from(["v", MARKER, f"Bearer {MARKER}"])
        return ["--header", f"{header}:{draw(st.one_of(good, any_value) if wild else good)}"]
    return ["--header-env", f"{header}={draw(st.sampled_from(VARIABLES))}"]


positional_unit = st.one_of(
    marked_url.map(lambda x: [x]),
    marked_text.map(lambda x: [x]),
    st.just(["--"]),
    st.lists(st.one_of(marked_text, st.text(max_size=8)), max_size=3).map(lambda rest: ["--", *rest]),
)

environment = st.fixed_dictionaries(
    {},
    optional={
        "TOKEN": st.one_of(marked_text, st.just("Bearer t")),
        "EMPTY": st.just(""),
        "BLANK": st.just(" \t"),
        "BROKEN": st.just(f"{MARKER}\n"),
        "MCP_BRIDGE_TOKEN_KEY": st.one_of(marked_text, st.just(KEY_HEX), st.just(" ")),
        "MCP_BRIDGE_CLIENT_SECRET": marked_text,
    },
)


def check_never_leaks(argv: list[str], env: dict[str, str]) -> None:
    try:
        result = parse(argv, env)
    except ArgError as exc:
        assert exc.exit_code == 2
        assert MARKER not in exc.diagnostic, (argv, exc.diagnostic)
        assert "\n" not in exc.diagnostic and "\r" not in exc.diagnostic
    else:
        assert isinstance(result, (Settings, str))
        if isinstance(result, Settings):
            upstream = getattr(result, "upstream", None)
            if isinstance(upstream, UrlUpstream):
                assert MARKER not in repr(upstream.headers)
                registration = upstream.sign_in.registration if upstream.sign_in is not None else None
                if isinstance(registration, PreRegistered):
                    # The secret never shows; the other fields (an issuer, an id) may hold the marker.
                    shown = repr(dataclasses.replace(registration, client_secret=None))
                    assert repr(registration) == shown
            assert all(MARKER not in w for w in result.warnings)


@settings(max_examples=400, deadline=None)
@given(
    head=st.sampled_from([[], ["logout"], ["check"]]),
    units=st.lists(option_unit(), max_size=6),
    tail=st.lists(positional_unit, max_size=2),
    env=environment,
)
def test_random_command_lines_give_a_result_or_an_arg_error_and_never_leak_a_value(
    head: list[str], units: list[list[str]], tail: list[list[str]], env: dict[str, str]
) -> None:
    check_never_leaks([*head, *(a for unit in units for a in unit), *(a for unit in tail for a in unit)], env)


@settings(max_examples=400, deadline=None)
@given(
    head=st.sampled_from([[], ["logout"], ["check"]]),
    units=st.lists(option_unit(wild=False), max_size=5),
    tail=st.sampled_from([["--", "server"], [URL], [f"https://a.example/mcp?key={MARKER}"], []]),
    env=environment,
)
def test_command_lines_with_valid_values_reach_the_later_checks_and_never_leak_a_value(
    head: list[str], units: list[list[str]], tail: list[str], env: dict[str, str]
) -> None:
    check_never_leaks([*head, *(a for unit in units for a in unit), *tail], env)


@settings(max_examples=300, deadline=None)
@given(
    argv=st.lists(
        st.one_of(st.text(max_size=20), st.sampled_from(sorted(args.OPTIONS)), st.just("--")), max_size=8
    ),
    env=st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=4),
)
def test_arbitrary_text_never_raises_anything_but_an_arg_error(argv: list[str], env: dict[str, str]) -> None:
    try:
        result = parse(argv, env)
    except ArgError:
        return
    assert isinstance(result, (Settings, str))


# ---------------------------------------------------------------------------------------------
# --sign-in
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flow", ["auto", "browser", "device"])
def test_sign_in_takes_a_flow_and_defaults_to_auto(flow: str) -> None:
    assert ok([URL]).upstream.sign_in.flow is SignInFlow.AUTO
    assert ok(["--sign-in", flow, URL]).upstream.sign_in.flow is SignInFlow(flow)


def test_sign_in_refuses_another_value() -> None:
    e = error(["--sign-in", "magic", URL])
    assert e.option == "--sign-in" and "use auto, browser, device or client-credentials" in e.diagnostic


def test_client_credentials_need_a_client_id_an_issuer_and_a_secret() -> None:
    cc = ["--sign-in", "client-credentials"]
    e = error([*cc, URL])
    assert (e.kind, e.option) == ("conflict", "--sign-in")
    assert (
        "needs --client-id, --client-issuer and the client secret in MCP_BRIDGE_CLIENT_SECRET" in e.diagnostic
    )
    e = error([*cc, "--client-id", "svc", "--client-issuer", "https://as.example", URL])
    assert (e.kind, e.option) == ("missing_variable", "--sign-in")
    assert "MCP_BRIDGE_CLIENT_SECRET" in e.diagnostic
    secret = {"MCP_BRIDGE_CLIENT_SECRET": "s3cret-value"}
    e = error([*cc, "--client-id", "svc", URL], secret)
    assert e.option == "--client-id" and "--client-issuer" in e.diagnostic
    s = ok([*cc, "--client-id", "svc", "--client-issuer", "https://as.example", URL], secret)
    assert (
        s.upstream.sign_in.flow == "client-credentials" and s.upstream.sign_in.client_secret == "s3cret-value"
    )
    assert "s3cret-value" not in repr(s) and "s3cret-value" not in str(e)


# ---------------------------------------------------------------------------------------------
# --resource-indicator
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["auto", "off", "api://0b2c-mcp", "https://mcp.example.com/mcp", "urn:x:y"])
def test_resource_indicator_takes_auto_off_or_an_absolute_uri_and_defaults_to_auto(value: str) -> None:
    assert ok([URL]).upstream.sign_in.resource_indicator == "auto"
    settings = ok(["--resource-indicator", value, URL])
    assert (
        settings.upstream.sign_in.resource_indicator
        == value
        == settings.upstream.sign_in_options().resource_indicator
    )


@pytest.mark.parametrize("value", ["", "no-scheme", "api://x#fragment", "https://a b", "1http://x"])
def test_resource_indicator_refuses_what_is_not_an_absolute_uri_without_a_fragment(value: str) -> None:
    e = error(["--resource-indicator", value, URL])
    assert (e.kind, e.option) == ("invalid_value", "--resource-indicator")
    assert "use auto, off, or an absolute URI without a fragment" in e.diagnostic


# ---------------------------------------------------------------------------------------------
# secret and --header-secret
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "action", "name"),
    [
        (["secret", "set", "api-key"], "set", "api-key"),
        (["secret", "--account", "work", "delete", "a.b@c"], "delete", "a.b@c"),
        (["secret", "list"], "list", None),
    ],
)
def test_secret_reads_its_action_and_name(argv: list[str], action: str, name: str | None) -> None:
    s = ok(argv)
    assert (s.form, s.action, s.name) == (args.Form.SECRET, action, name)
    # Secret reaches no upstream server and signs in nowhere: its settings have only the store.
    account = "work" if "--account" in argv else "default"
    assert s == SecretSettings("info", (), Store(account, "auto", None, None), action, name)


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["secret"], "the action of secret is missing or unknown"),
        (["secret", "show", "x"], "the action of secret is missing or unknown"),
        (["secret", "set"], "never from the command line"),
        (["secret", "set", "name", "the-value"], "never from the command line"),
        (["secret", "list", "x"], "secret list takes no name"),
        (["secret", "set", "a/b"], "the secret name is not valid"),
        (["secret", "--name", "x", "list"], "secret takes only the options of the token store"),
    ],
)
def test_secret_refuses_a_wrong_command_line_without_showing_a_word(argv: list[str], hint: str) -> None:
    e = error(argv)
    assert hint in e.diagnostic
    assert "the-value" not in e.diagnostic and "a/b" not in e.diagnostic


def test_an_authorization_header_secret_takes_the_store_options_but_no_other_sign_in_option() -> None:
    s = ok(["--header-secret", "Authorization=token", "--account", "work", "--token-store", "keychain", URL])
    assert s.upstream.static_authorization and s.upstream.sign_in is None
    assert [(h.name, h.value, h.from_secret) for h in s.upstream.headers] == [("Authorization", "", "token")]
    assert s.upstream.store.account == "work" and s.upstream.store.token_store is TokenStoreMode.KEYCHAIN
    e = error(["--header-secret", "Authorization=token", "--client-id", "x", URL])
    assert e.option == "--client-id"
