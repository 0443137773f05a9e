"""The options of ``mcp-bridge-vscode``, each declared once.

This module is pure. Each row of :data:`OPTIONS` holds all that the program knows of one
option: its name, the forms that take it, the check of its value, its default, its group
in ``--help``, the name of its value there (``None`` for a flag) and its help. The typer app of
:mod:`mcpbridge.vscode.app` builds its parameters and its help from the rows, the word
parser of :mod:`mcpbridge.vscode.words` reads the command line with them, and the rules of
:mod:`mcpbridge.vscode.settings` check each value with them.

To add an option: add its row here, and its field to a part of :mod:`.forms` with its
line in the rules.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from mcpbridge.bridge.rules.revisions import HOST_PROFILES
from mcpbridge.mcp.errorbase import UsageFault
from mcpbridge.mcp.protocol import MODERN
from mcpbridge.oauth.config import (
    CLIENT_SECRET_VARIABLE,
    DEFAULT_RESOURCE_INDICATOR,
    DEFAULT_SIGN_IN_FLOW,
    RESOURCE_INDICATOR_MODES,
    SIGN_IN_FLOWS,
    TokenStoreMode,
)

from .urls import DIGITS, NOT_IN_URL, client_metadata_url_ok, issuer_hint

__all__ = ["OPTIONS", "SUBCOMMANDS", "InvalidValue", "Option", "Target", "options_for", "refusal"]

#: The name of the program, the tag of its log lines, and the last-resort server name.
PROGRAM: Final = "mcp-bridge-vscode"
#: The subcommands, each only as the first word of the command line.
SUBCOMMANDS: Final = ("check", "logout", "secret")

#: The levels of ``--log-level``; ``error`` and upper case are not accepted.
LOG_LEVELS: Final = ("err", "warn", "info", "debug")
DEFAULT_LOG_LEVEL: Final = "info"

#: Seconds for the first answer of the upstream server (``server/discover``).
DEFAULT_DISCOVER_TIMEOUT: Final = 60
#: Timeouts are whole seconds that fit 32 bits, as in the original bridge.
MAX_SECONDS: Final = 2**32 - 1

#: One message from VS Code or from a stdio upstream: 64 MiB. VS Code writes lines of any length.
DEFAULT_MAX_LINE_BYTES: Final = 64 * 1024 * 1024
#: The largest ``--max-line-bytes`` and ``--max-response-bytes``: 1 GiB.
MAX_BYTES_LIMIT: Final = 1024 * 1024 * 1024
#: One JSON response or one SSE event from a URL upstream: the same as a line.
DEFAULT_MAX_RESPONSE_BYTES: Final = DEFAULT_MAX_LINE_BYTES

#: Seconds for the sign-in in the browser.
DEFAULT_SIGN_IN_TIMEOUT: Final = 300
#: The port of ``http://127.0.0.1:<port>/callback``. Other programs use 41893 (zig-sdk) and
#: 33418 (VS Code), thus the listeners do not collide.
DEFAULT_REDIRECT_PORT: Final = 41894
DEFAULT_ACCOUNT: Final = "default"
MAX_ACCOUNT_CHARS: Final = 64
TOKEN_STORES: Final = tuple(mode.value for mode in TokenStoreMode)
DEFAULT_TOKEN_STORE: Final = TokenStoreMode.AUTO.value

#: The client ID metadata document of the bridge, used when the authorization server supports
#: such documents. mcpbridge publishes none yet: without ``--client-metadata-url`` the bridge
#: uses dynamic client registration.
DEFAULT_CLIENT_METADATA_URL: Final[str | None] = None

#: ``--protocol``: the revision of the upstream server. ``auto`` finds it out.
PROTOCOLS: Final = ("auto", MODERN, "legacy")
DEFAULT_PROTOCOL: Final = "auto"
#: ``--transport``: how a 2025-era server at a URL is reached. ``auto`` finds it out.
TRANSPORTS: Final = ("auto", "streamable-http", "sse")
DEFAULT_TRANSPORT: Final = "auto"
#: ``--tasks``: ``auto`` carries the tasks of the Tasks extension, ``off`` declares none.
TASK_MODES: Final = ("auto", "off")
DEFAULT_TASKS: Final = "auto"
#: ``--host-profile``: what the bridge does for the host beyond the protocol. ``auto`` picks
#: it from the host's ``initialize``.
DEFAULT_HOST_PROFILE: Final = "auto"


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------


class InvalidValue(UsageFault):
    """A value is not valid; the parser turns it into an :class:`~.words.ArgError` with the option."""

    def __init__(self, hint: str, header: str | None = None) -> None:
        super().__init__(hint)
        self.hint = hint
        self.header = header


_ACCOUNT = re.compile(rf"[A-Za-z0-9._@+\-]{{1,{MAX_ACCOUNT_CHARS}}}\Z")


def _number(low: int, high: int, hint: str) -> Callable[[str], int]:
    """A converter for decimal digits only (no sign, space, underscore), then a range check."""

    def convert(text: str) -> int:
        digits = text.lstrip("0")
        if not DIGITS.match(text) or len(digits) > len(str(high)):
            raise InvalidValue(hint)
        number = int(digits or "0")
        if not low <= number <= high:
            raise InvalidValue(hint)
        return number

    return convert


def _one_of(choices: Sequence[str], hint: str) -> Callable[[str], str]:
    def convert(text: str) -> str:
        if text not in choices:
            raise InvalidValue(hint)
        return text

    return convert


def _non_empty(hint: str) -> Callable[[str], str]:
    def convert(text: str) -> str:
        if not text:
            raise InvalidValue(hint)
        return text

    return convert


def _client_id(text: str) -> str:
    if not text:
        raise InvalidValue("the client ID cannot be empty")
    if not all(" " <= c <= "~" for c in text):
        raise InvalidValue("a client ID has only visible ASCII characters and spaces")
    return text


def _client_issuer(text: str) -> str:
    hint = issuer_hint(text)
    if hint is not None:
        raise InvalidValue(hint)
    return text


def _client_metadata_url(text: str) -> str:
    if not client_metadata_url_ok(text):
        raise InvalidValue("use an https URL with a path, without a user, a password and a fragment")
    return text


#: An absolute URI (RFC 3986): a scheme, then visible ASCII; RFC 8707 allows no fragment.
_ABSOLUTE_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[!-~]+\Z")


def _resource_indicator(text: str) -> str:
    if text in RESOURCE_INDICATOR_MODES:
        return text
    if not _ABSOLUTE_URI.match(text) or "#" in text or any(c in NOT_IN_URL for c in text):
        raise InvalidValue(
            "use auto, off, or an absolute URI without a fragment, for example api://my-server"
        )
    return text


_JSON_OBJECT_HINT = 'use a JSON object, for example {"text": "hello"}'


def _json_object(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidValue(_JSON_OBJECT_HINT) from None
    if not isinstance(value, dict):
        raise InvalidValue(_JSON_OBJECT_HINT)
    return value


def _account(text: str) -> str:
    if not _ACCOUNT.match(text):
        raise InvalidValue(f"use 1 to {MAX_ACCOUNT_CHARS} letters, digits and the characters . _ @ + -")
    return text


_SECONDS_HINT = f"use a number of seconds from 1 to {MAX_SECONDS}"
_BYTES_HINT = f"use a number of bytes from 1 to {MAX_BYTES_LIMIT}"
_PATH_HINT = "the path cannot be empty"
_PATTERN_HINT = "the pattern cannot be empty"


# ---------------------------------------------------------------------------------------------
# The option table
# ---------------------------------------------------------------------------------------------


class Target(enum.Enum):
    """What the command line addresses; an option applies to some targets only."""

    COMMAND = "command"
    URL = "url"
    LOGOUT = "logout"
    CHECK_COMMAND = "check-command"
    CHECK_URL = "check-url"
    SECRET = "secret"


ALL_TARGETS: Final = frozenset(Target)
SERVE_AND_CHECK: Final = frozenset(ALL_TARGETS - {Target.LOGOUT, Target.SECRET})
URL_TARGETS: Final = frozenset({Target.URL, Target.CHECK_URL})
URL_AND_LOGOUT: Final = frozenset({Target.URL, Target.CHECK_URL, Target.LOGOUT})
#: The options of the token store, which also keeps the secrets of ``secret``.
STORE_TARGETS: Final = frozenset({Target.URL, Target.CHECK_URL, Target.LOGOUT, Target.SECRET})
LOGOUT_ONLY: Final = frozenset({Target.LOGOUT})
CHECK_ONLY: Final = frozenset({Target.CHECK_COMMAND, Target.CHECK_URL})

#: The groups of ``--help``, by task; a group shows first where its first row is (the rows
#: of a subcommand's own group come first in the help of that subcommand).
GENERAL: Final = "General options"
TOOLS: Final = "Which tools VS Code sees"
REVISIONS: Final = "Revisions and extensions"
URL_PANEL: Final = "Options for <url>"
SIGN_IN: Final = "Sign-in options for <url> (OAuth)"
LOGOUT: Final = "Options for logout"
CHECK: Final = "Options for check"


@dataclass(frozen=True, slots=True)
class Option:
    """One option: what the parser, the rules and the help know of it."""

    #: The targets that take the option.
    targets: frozenset[Target]
    #: Its group in ``--help``.
    panel: str
    #: The name of its value in ``--help``, for example ``<name>``; ``None`` for a flag.
    metavar: str | None
    #: Its help, one paragraph: the help wraps it to the terminal.
    help: str
    #: Converts and checks a value; ``None`` for a flag and for a header option.
    convert: Callable[[str], object] | None = None
    #: A sign-in option: a static authorization header excludes it.
    sign_in: bool = False
    #: Each occurrence adds a header instead of replacing the value.
    header: bool = False
    #: Each occurrence adds a value instead of replacing the value.
    repeat: bool = False
    #: The value without the option (``None``: none, or the rules find it).
    default: object = None

    @property
    def flag(self) -> bool:
        """True for an option without a value."""
        return self.metavar is None


_M = MAX_SECONDS
_B = MAX_BYTES_LIMIT
if DEFAULT_CLIENT_METADATA_URL is None:
    _METADATA_DEFAULT = "Without it, the bridge uses dynamic client registration."
else:  # pragma: no cover - the bridge publishes no document yet
    _METADATA_DEFAULT = f"The default is the document of the bridge: {DEFAULT_CLIENT_METADATA_URL}"

#: Every option, in the order of ``--help`` within each group.
OPTIONS: Final[Mapping[str, Option]] = {
    "--log-level": Option(
        ALL_TARGETS,
        GENERAL,
        "<level>",
        "The level of the log lines on stderr: err, warn, info or debug. "
        f"The default is {DEFAULT_LOG_LEVEL}.",
        _one_of(LOG_LEVELS, "use err, warn, info or debug"),
        default=DEFAULT_LOG_LEVEL,
    ),
    "--name": Option(
        SERVE_AND_CHECK,
        GENERAL,
        "<name>",
        "The server name for VS Code when the upstream server sends none. The default is the file "
        "name of <command> without its extension, or the host of <url>.",
        _non_empty("the name cannot be empty"),
    ),
    "--discover-timeout": Option(
        SERVE_AND_CHECK,
        GENERAL,
        "<s>",
        f"The time in seconds for the first answer of the upstream server, from 1 to {_M}. "
        f"The default is {DEFAULT_DISCOVER_TIMEOUT}.",
        _number(1, MAX_SECONDS, _SECONDS_HINT),
        default=DEFAULT_DISCOVER_TIMEOUT,
    ),
    "--max-line-bytes": Option(
        SERVE_AND_CHECK,
        GENERAL,
        "<n>",
        f"The maximum length of one message from VS Code or from <command>, in bytes, from 1 to {_B}. "
        f"The default is {DEFAULT_MAX_LINE_BYTES} (64 MiB).",
        _number(1, MAX_BYTES_LIMIT, _BYTES_HINT),
        default=DEFAULT_MAX_LINE_BYTES,
    ),
    "--protocol": Option(
        SERVE_AND_CHECK,
        REVISIONS,
        "<revision>",
        f"The revision of the upstream server: {MODERN}, legacy (2025-11-25) or auto. With auto, "
        f"the bridge asks the server which revision it speaks. The default is {DEFAULT_PROTOCOL}.",
        _one_of(PROTOCOLS, f"use auto, {MODERN} or legacy"),
        default=DEFAULT_PROTOCOL,
    ),
    "--tasks": Option(
        SERVE_AND_CHECK,
        REVISIONS,
        "<mode>",
        "auto or off. With auto, a tool of a 2026-07-28 server that runs as a task (the Tasks "
        "extension) works: the bridge declares the extension and carries the task to its end, and "
        "VS Code gets the result. With off, the bridge declares no tasks, and a tool that needs them "
        f"fails. The default is {DEFAULT_TASKS}.",
        _one_of(TASK_MODES, "use auto or off"),
        default=DEFAULT_TASKS,
    ),
    "--host-profile": Option(
        SERVE_AND_CHECK,
        REVISIONS,
        "<profile>",
        "What the bridge does for the host beyond the protocol: vscode (the _meta keys of VS Code go "
        "to the upstream server) or generic (every _meta key of the host goes, and results follow the "
        "schema strictly). With auto, the bridge picks it from the name and the revision that the host "
        f"sends. The default is {DEFAULT_HOST_PROFILE}.",
        _one_of(HOST_PROFILES, "use auto, vscode or generic"),
        default=DEFAULT_HOST_PROFILE,
    ),
    "--allow-tool": Option(
        SERVE_AND_CHECK,
        TOOLS,
        "<pattern>",
        "Show VS Code only the tools whose name matches the pattern; give it again for more patterns. "
        "A pattern is shell-style and case-sensitive (* any text, ? one character, \\[abc] one of the "
        "characters) and matches the whole name, for example git_* or *_read.",
        _non_empty(_PATTERN_HINT),
        repeat=True,
    ),
    "--deny-tool": Option(
        SERVE_AND_CHECK,
        TOOLS,
        "<pattern>",
        "Hide the tools whose name matches the pattern, also from --allow-tool; give it again for more "
        "patterns. A hidden tool is not in the tool list, and a call of it gets the error of an unknown "
        "tool without reaching the server. A pattern that matches no tool of the server gives a warning "
        "line; check shows the tools before and after the filter.",
        _non_empty(_PATTERN_HINT),
        repeat=True,
    ),
    "--header": Option(
        URL_TARGETS,
        URL_PANEL,
        "<name>:<value>",
        "Send the header <name> with <value>. Do not use it for a secret.",
        header=True,
    ),
    "--header-env": Option(
        URL_TARGETS,
        URL_PANEL,
        "<name>=<var>",
        "Send the header <name> with the value of the environment variable <var>. Use it for a secret, "
        "for example a static authorization header.",
        header=True,
    ),
    "--header-secret": Option(
        URL_TARGETS,
        URL_PANEL,
        "<name>=<secret>",
        "Send the header <name> with the value of the secret <secret>, which "
        f'"{PROGRAM} secret set <secret>" stored in the keychain (or the file store) one time. Use it '
        "for a secret where the host cannot give an environment variable or an input, for example "
        "a static authorization header.",
        header=True,
    ),
    "--max-response-bytes": Option(
        URL_TARGETS,
        URL_PANEL,
        "<n>",
        f"The maximum length of one response or one event of the upstream server, in bytes, from 1 to {_B}. "
        f"The default is {DEFAULT_MAX_RESPONSE_BYTES} (64 MiB).",
        _number(1, MAX_BYTES_LIMIT, _BYTES_HINT),
        default=DEFAULT_MAX_RESPONSE_BYTES,
    ),
    "--ca-file": Option(
        URL_AND_LOGOUT,
        URL_PANEL,
        "<path>",
        "Also trust the CA certificates of this PEM file. The bridge always trusts the CA certificates "
        "of the system.",
        _non_empty(_PATH_HINT),
    ),
    "--transport": Option(
        URL_TARGETS,
        URL_PANEL,
        "<transport>",
        "How to reach a server of the 2025 era: streamable-http, sse (the HTTP+SSE transport of "
        "2024-11-05; it implies --protocol legacy) or auto: Streamable HTTP, and HTTP+SSE when the server "
        f"refuses the POST of initialize with 400, 404 or 405. The default is {DEFAULT_TRANSPORT}.",
        _one_of(TRANSPORTS, "use auto, streamable-http or sse"),
        default=DEFAULT_TRANSPORT,
    ),
    "--client-id": Option(
        URL_TARGETS,
        SIGN_IN,
        "<id>",
        "Use this client ID, which the authorization server issued. The client secret comes from the "
        f"environment variable {CLIENT_SECRET_VARIABLE}.",
        _client_id,
        sign_in=True,
    ),
    "--client-issuer": Option(
        URL_TARGETS,
        SIGN_IN,
        "<url>",
        "The issuer of --client-id. A client with a secret needs it.",
        _client_issuer,
        sign_in=True,
    ),
    "--client-metadata-url": Option(
        URL_TARGETS,
        SIGN_IN,
        "<url>",
        f"Use the client ID metadata document at this URL. {_METADATA_DEFAULT}",
        _client_metadata_url,
        sign_in=True,
    ),
    "--redirect-port": Option(
        URL_AND_LOGOUT,
        SIGN_IN,
        "<port>",
        "The port of the redirect URI http://127.0.0.1:<port>/callback, from 1 to 65535. "
        f"The default is {DEFAULT_REDIRECT_PORT}.",
        _number(1, 65535, "use a port from 1 to 65535"),
        sign_in=True,
        default=DEFAULT_REDIRECT_PORT,
    ),
    "--account": Option(
        STORE_TARGETS,
        SIGN_IN,
        "<label>",
        f"The account of the stored sign-in and of the secrets: 1 to {MAX_ACCOUNT_CHARS} letters, "
        f'digits and . _ @ + -. The default is "{DEFAULT_ACCOUNT}".',
        _account,
        sign_in=True,
        default=DEFAULT_ACCOUNT,
    ),
    "--token-store": Option(
        STORE_TARGETS,
        SIGN_IN,
        "<store>",
        "Where the bridge keeps the tokens: auto, keychain, file or memory. The default is "
        f"{DEFAULT_TOKEN_STORE}: the keychain, else the file store when it has a key, "
        "else the memory.",
        _one_of(TOKEN_STORES, "use auto, keychain, file or memory"),
        sign_in=True,
        default=DEFAULT_TOKEN_STORE,
    ),
    "--token-key-file": Option(
        STORE_TARGETS,
        SIGN_IN,
        "<path>",
        "The file with the key of the file store: 64 hexadecimal digits, readable by its owner only.",
        _non_empty(_PATH_HINT),
        sign_in=True,
    ),
    "--no-browser": Option(
        URL_TARGETS,
        SIGN_IN,
        None,
        "Open no browser: write the sign-in URL to stderr.",
        sign_in=True,
        default=False,
    ),
    "--sign-in": Option(
        URL_TARGETS,
        SIGN_IN,
        "<flow>",
        "How to sign in: browser (a browser on this machine), device (a code to enter at a page on any "
        "machine: for Remote-SSH, dev containers, Codespaces and headless machines), client-credentials "
        f"(no person: --client-id, --client-issuer and the secret in {CLIENT_SECRET_VARIABLE}), or auto: "
        "the device flow in a remote session when the server offers it, else the browser. The default is "
        f"{DEFAULT_SIGN_IN_FLOW}.",
        _one_of(SIGN_IN_FLOWS, "use auto, browser, device or client-credentials"),
        sign_in=True,
        default=DEFAULT_SIGN_IN_FLOW,
    ),
    "--sign-in-timeout": Option(
        URL_TARGETS,
        SIGN_IN,
        "<s>",
        f"The time in seconds for the sign-in in the browser or with the device code, from 1 to {_M}. "
        f"The default is {DEFAULT_SIGN_IN_TIMEOUT}.",
        _number(1, MAX_SECONDS, _SECONDS_HINT),
        sign_in=True,
        default=DEFAULT_SIGN_IN_TIMEOUT,
    ),
    "--resource-indicator": Option(
        URL_TARGETS,
        SIGN_IN,
        "<mode>",
        "The resource parameter (RFC 8707) of the sign-in: auto sends the resource of the server's "
        "metadata, and when the authorization server refuses it (Microsoft Entra ID does on some "
        "endpoints), tries once more without it and remembers that with the stored sign-in; off never "
        "sends it; a URI, for example api://my-server, is sent instead. The default is "
        f"{DEFAULT_RESOURCE_INDICATOR}.",
        _resource_indicator,
        sign_in=True,
        default=DEFAULT_RESOURCE_INDICATOR,
    ),
    "--all": Option(
        LOGOUT_ONLY, LOGOUT, None, "Delete every stored sign-in, of each account.", default=False
    ),
    "--json": Option(
        CHECK_ONLY, CHECK, None, "Write the report as one JSON object on stdout.", default=False
    ),
    "--call-tool": Option(
        CHECK_ONLY,
        CHECK,
        "<name>",
        "Call this tool one time, as VS Code would, and report its answer; without it, check calls "
        "no tool. It tells, for example, whether the tool needs --protocol legacy.",
        _non_empty("the tool name cannot be empty"),
    ),
    "--call-arguments": Option(
        CHECK_ONLY,
        CHECK,
        "<json>",
        "The arguments of --call-tool, a JSON object. The default is {}.",
        _json_object,
    ),
}

#: The targets of the serve forms (``None``), ``logout`` and ``check``.
SUBCOMMAND_TARGETS: Final[Mapping[str | None, frozenset[Target]]] = {
    None: frozenset({Target.COMMAND, Target.URL}),
    "logout": LOGOUT_ONLY,
    "check": CHECK_ONLY,
    "secret": frozenset({Target.SECRET}),
}


def options_for(subcommand: str | None) -> list[str]:
    """The options that the serve forms (``None``), ``logout`` or ``check`` take."""
    targets = SUBCOMMAND_TARGETS[subcommand]
    return [name for name, option in OPTIONS.items() if option.targets & targets]


def refusal(option: Option, target: Target) -> str:
    """Why ``target`` does not take ``option``."""
    if option.targets == LOGOUT_ONLY:
        return "only logout takes it"
    if option.targets == CHECK_ONLY:
        return "only check takes it"
    if target is Target.LOGOUT:
        return "logout does not take it"
    if target is Target.SECRET:
        return "secret takes only the options of the token store and --log-level"
    return "it applies only to the URL of an upstream server, not to an upstream command"
