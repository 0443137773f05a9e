"""The rules of the command line of ``mcp-bridge-vscode``.

This module is pure: :func:`resolve` takes the words of a command line, as typer
parsed them (:class:`Words`), and the environment as a mapping, and returns a frozen
:class:`Settings` or raises :class:`ArgError`. It opens no file: the CA file and the
key file are checked later, by the code that reads them.

The forms::

    mcp-bridge-vscode [options] -- <command> [args...]
    mcp-bridge-vscode [options] <url>
    mcp-bridge-vscode logout [options] <url>
    mcp-bridge-vscode logout [options] --all
    mcp-bridge-vscode check [options] (-- <command> [args...] | <url>)

Rules (the words themselves are parsed by :mod:`mcpbridge.vscode.cli`):

* The last occurrence of an option wins, yet each value is checked; each ``--header``
  and ``--header-env`` adds one header.
* ``--`` ends the options: the rest is the upstream command, unchanged.
* An argument that is not an option is the URL only if it has ``://``, and then it must
  be the last argument. There is one upstream server: one URL, or a command after ``--``.
* A misspelled option or subcommand is named in the error with the name it misspells.
* The rules first check each value, then the form (which options it takes), then the
  URL, then the environment and the options that exclude each other.

A secret never goes on the command line, because VS Code writes the command line to its
log and the process list shows it. Thus no diagnostic ever holds a value of the command
line or of the environment: it names options, header names and variable names only. For
the same reason, the fields of the results that can hold a secret are left out of their
``repr``.

To add an option: add its row to :data:`OPTIONS` (the forms that take it and the check
of its value), its field to :class:`Settings` and its line in :func:`_settings`, and its
help line to ``cli.HELP``.
"""

from __future__ import annotations

import difflib
import enum
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final, TypeVar, cast

from mcpbridge.bridge.revisions import HOST_PROFILES
from mcpbridge.mcp.errorbase import UsageFault
from mcpbridge.mcp.netloc import DIGITS as _DIGITS
from mcpbridge.mcp.netloc import HOST_NAME as _HOST_NAME
from mcpbridge.mcp.netloc import IPV4 as _IPV4
from mcpbridge.mcp.netloc import NOT_IN_URL as _NOT_IN_URL
from mcpbridge.mcp.netloc import is_loopback as _is_loopback
from mcpbridge.mcp.netloc import split_url as _split_url
from mcpbridge.mcp.protocol import MODERN
from mcpbridge.oauth.config import (
    CLIENT_SECRET_VARIABLE,
    DEFAULT_RESOURCE_INDICATOR,
    DEFAULT_SIGN_IN_FLOW,
    RESOURCE_INDICATOR_MODES,
    SIGN_IN_FLOWS,
    TOKEN_KEY_VARIABLE,
    ClientMetadataDocument,
    DynamicRegistration,
    PreRegistered,
    Registration,
    SignInOptions,
)

__all__ = [
    "OPTIONS",
    "SUBCOMMANDS",
    "ArgError",
    "ClientMetadataDocument",
    "DynamicRegistration",
    "Form",
    "Header",
    "PreRegistered",
    "Registration",
    "Settings",
    "Words",
    "default_name_for_command",
    "default_name_for_url",
    "flag_with_value",
    "missing_value",
    "options_for",
    "resolve",
    "unknown_option",
    "upstream_url_hint",
]

#: The name of the program, the tag of its log lines, and the last-resort server name.
PROGRAM: Final = "mcp-bridge-vscode"
#: The subcommands, each only as the first word of the command line.
SUBCOMMANDS: Final = ("check", "logout")

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
TOKEN_STORES: Final = ("auto", "keychain", "file", "memory")
DEFAULT_TOKEN_STORE: Final = "auto"

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

#: Header names that ``--header`` and ``--header-env`` refuse (lower case): the HTTP client or
#: the protocol layer sends them, or they change the connection. A second copy would make
#: the request ambiguous.
REFUSED_HEADER_NAMES: Final = frozenset(
    {
        "host",
        "connection",
        "content-length",
        "transfer-encoding",
        "accept",
        "content-type",
        "accept-encoding",
        "dpop",
        "te",
        "trailer",
        "upgrade",
        "keep-alive",
        "proxy-connection",
        "expect",
    }
)
#: A user header goes to the upstream server (also through the tunnel of a proxy), never to
#: the proxy: the proxy credentials belong in the proxy URL.
PROXY_AUTHORIZATION: Final = "proxy-authorization"
#: The header names of the protocol, for example ``mcp-protocol-version``.
REFUSED_HEADER_PREFIX: Final = "mcp-"
#: Header names whose value is usually a secret: ``--header`` with one of them gives a warning.
SECRET_HEADER_NAMES: Final = frozenset({"authorization", "cookie", "x-api-key", "api-key"})


class Form(enum.Enum):
    """The form of the command line."""

    #: ``[options] -- <command> [args...]``: the upstream server is a child process.
    COMMAND = "command"
    #: ``[options] <url>``: the upstream server is at a Streamable HTTP URL.
    URL = "url"
    #: ``logout [options] <url>`` or ``logout [options] --all``.
    LOGOUT = "logout"
    #: ``check [options] (-- <command> | <url>)``: connect one time and report.
    CHECK = "check"


@dataclass(frozen=True, slots=True)
class Header:
    """One header of ``--header`` or ``--header-env``, in command-line order."""

    name: str
    #: The value without spaces and tabs at its ends. Send it as
    #: ``value.encode("utf-8", "surrogateescape")``: that gives back the bytes of the
    #: command line or the environment.
    value: str = field(repr=False)
    #: The variable of ``--header-env``, or ``None`` for ``--header``.
    from_env: str | None


@dataclass(frozen=True, slots=True)
class Settings:
    """The result of a valid command line that is not ``--help`` or ``--version``.

    Options that a form does not take keep their defaults. ``registration`` is ``None`` when
    no sign-in can happen: the command form, and a static authorization header.
    """

    form: Form
    #: The upstream command and its arguments (command form, or check of a command); else ().
    command: tuple[str, ...] = field(repr=False)
    #: The upstream URL (URL form, check of a URL, ``logout <url>``); else ``None``.
    url: str | None = field(repr=False)
    #: The server name for VS Code when the upstream server sends none (§2.3). Empty for logout.
    name: str
    log_level: str
    discover_timeout: float
    max_line_bytes: int
    protocol: str
    #: ``--tasks``: ``auto`` or ``off``.
    tasks: str
    headers: tuple[Header, ...]
    max_response_bytes: int
    ca_file: str | None
    client_id: str | None
    client_issuer: str | None
    client_metadata_url: str | None
    redirect_port: int
    account: str
    token_store: str
    token_key_file: str | None
    #: The 32 bytes of ``MCP_BRIDGE_TOKEN_KEY``, read for the stores ``auto`` and ``file``.
    token_key: bytes | None = field(repr=False)
    #: ``MCP_BRIDGE_CLIENT_SECRET``, read only with ``--client-id``.
    client_secret: str | None = field(repr=False)
    no_browser: bool
    sign_in_timeout: float
    #: ``--sign-in``: ``auto``, ``browser``, ``device`` or ``client-credentials``.
    sign_in: str
    #: ``--resource-indicator``: ``auto``, ``off`` or the URI to send as ``resource``.
    resource_indicator: str
    #: ``logout --all``.
    all: bool
    #: ``check --json``.
    json: bool
    #: A header named ``authorization``: then the bridge never signs in and opens no token store.
    static_authorization: bool
    registration: Registration | None
    #: Lines for the log at the warning level, for example a secret header on the command line.
    warnings: tuple[str, ...]
    #: ``--allow-tool`` and ``--deny-tool``: shell-style patterns on the tool names.
    allow_tools: tuple[str, ...] = ()
    deny_tools: tuple[str, ...] = ()
    #: ``check --call-tool``: the tool that the check calls once, and ``--call-arguments``.
    call_tool: str | None = None
    call_arguments: dict[str, object] = field(default_factory=dict, repr=False)
    #: ``--host-profile``: ``auto``, ``vscode`` or ``generic``.
    host_profile: str = DEFAULT_HOST_PROFILE
    #: ``--transport``: ``auto``, ``streamable-http`` or ``sse`` (which implies ``--protocol legacy``).
    transport: str = DEFAULT_TRANSPORT

    @property
    def redirect_uri(self) -> str:
        """The redirect URI of the sign-in: always the literal loopback address."""
        return f"http://127.0.0.1:{self.redirect_port}/callback"

    def sign_in_options(self) -> SignInOptions:
        """The options of the sign-in; only for a URL with a sign-in (``registration`` is set)."""
        assert self.url is not None and self.registration is not None
        return SignInOptions(
            url=self.url,
            account=self.account,
            redirect_port=self.redirect_port,
            registration=self.registration,
            token_store=self.token_store,
            token_key=self.token_key,
            token_key_file=self.token_key_file,
            no_browser=self.no_browser,
            sign_in_timeout=self.sign_in_timeout,
            sign_in=self.sign_in,
            resource_indicator=self.resource_indicator,
            header_variables=frozenset(h.from_env for h in self.headers if h.from_env),
        )


@dataclass(frozen=True, slots=True)
class Words:
    """A command line after the parse of its words, before the rules."""

    #: ``"logout"``, ``"check"``, or ``None`` for the serve forms.
    subcommand: str | None
    #: Each option in command-line order: its name and its value, ``None`` for a flag given
    #: without ``=``.
    options: tuple[tuple[str, str | None], ...] = field(repr=False)
    #: The arguments after the options that are not options (the URL is the only one).
    positional: tuple[str, ...] = field(repr=False)
    #: The words after ``--``, or ``None`` without ``--``.
    command: tuple[str, ...] | None = field(repr=False)


class ArgError(UsageFault):
    """An invalid command line.

    ``diagnostic`` names options, header names and variable names, never a value. The
    executable writes ``mcp-bridge-vscode: vscode: error: <diagnostic>``, a blank line and
    the usage to stderr (see :meth:`render`) and exits with :attr:`exit_code`.
    """

    exit_code: ClassVar[int] = 2

    def __init__(self, kind: str, diagnostic: str, option: str | None = None) -> None:
        super().__init__(diagnostic)
        #: What is wrong, in snake case, for example ``"unknown_option"`` or ``"conflict"``.
        self.kind = kind
        self.diagnostic = diagnostic
        #: The option of the error, when it has one.
        self.option = option


# ---------------------------------------------------------------------------------------------
# Default server names (§2.3)
# ---------------------------------------------------------------------------------------------


def default_name_for_command(argv0: str, *, windows: bool | None = None) -> str:
    """The file name of the upstream command without its last extension.

    ``./my.server.py`` gives ``my.server``, ``/srv/.server`` stays ``.server``, ``server.``
    gives ``server``, ``bin/server/`` gives ``server``, ``/`` stays ``/`` and ``""`` stays
    ``""``. With the path rules of Windows (the default on Windows), ``\\`` and a drive also
    separate: ``C:\\Program Files\\nodejs\\npx.cmd`` gives ``npx``.
    """
    if windows is None:
        windows = sys.platform == "win32"
    separators = "/\\" if windows else "/"
    path = argv0
    if windows and len(path) >= 2 and path[1] == ":" and path[0].isascii() and path[0].isalpha():
        path = path[2:]
    path = path.rstrip(separators)
    start = max(path.rfind(s) for s in separators) + 1
    base = path[start:]
    if not base:
        return argv0
    dot = base.rfind(".")
    if dot <= 0:
        return base
    return base[:dot]


def default_name_for_url(url: str) -> str:
    """The host of ``url`` as written, without port (``[::1]`` keeps its brackets).

    ``https://mcp.example.com:8443/v1/mcp?tenant=a`` gives ``mcp.example.com``; a text
    that is not a URL gives ``""``.
    """
    parts = _split_url(url)
    return parts.host if parts is not None else ""


# ---------------------------------------------------------------------------------------------
# URL syntax (the grammar is in mcpbridge.mcp.netloc)
# ---------------------------------------------------------------------------------------------


def _port_hint(port: str | None) -> str | None:
    """Why the port of a URL is not valid (digits only were checked), or ``None``."""
    if port is None:
        return None
    digits = port.lstrip("0")
    if not port or len(digits) > 5 or int(digits or "0") > 65535:
        return "use a port from 1 to 65535"
    if not digits:
        return "the port 0 is not valid"
    return None


def upstream_url_hint(url: str) -> str | None:
    """Why ``url`` is not a valid URL of an upstream server, or ``None`` when it is valid.

    A valid URL has visible ASCII characters only, uses ``https`` (or ``http`` with a
    loopback host), has a host, a port from 1 to 65535 if any, and no user, no password
    and no fragment. The hint never holds a part of the URL.
    """
    parts = _split_url(url)
    if parts is None:
        return "use an http or https URL with visible ASCII characters only"
    if parts.scheme not in ("https", "http"):
        return "use https, or http with a loopback host such as 127.0.0.1"
    if parts.has_userinfo:
        return "remove the user and the password from the URL: give a secret with --header-env"
    if parts.fragment is not None:
        return "remove the fragment from the URL"
    if not parts.host:
        return "the URL has no host"
    port_hint = _port_hint(parts.port)
    if port_hint is not None:
        return port_hint
    if parts.scheme == "http" and not _is_loopback(parts.host):
        return "use https: http is permitted only for a loopback host such as 127.0.0.1"
    return None


def _issuer_hint(text: str) -> str | None:
    """Why ``text`` is not an issuer (RFC 8414: https, a host, no query, no fragment)."""
    parts = _split_url(text)
    if parts is None or parts.scheme != "https":
        return "use an https URL"
    if not parts.host:
        return "the URL has no host"
    if parts.has_userinfo:
        return "remove the user and the password from the URL"
    if parts.query is not None or parts.fragment is not None:
        return "an issuer has no query and no fragment"
    return _port_hint(parts.port)


def _client_metadata_url_ok(text: str) -> bool:
    """A client ID metadata document URL: https, a host, a path other than ``/`` without dot
    segments, no user, no password, no fragment."""
    parts = _split_url(text)
    if parts is None or parts.scheme != "https" or not parts.host:
        return False
    if parts.has_userinfo or parts.fragment is not None or _port_hint(parts.port) is not None:
        return False
    if parts.path in ("", "/"):
        return False
    segments = (segment.lower().replace("%2e", ".") for segment in parts.path.split("/"))
    return not any(segment in (".", "..") for segment in segments)


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------

#: The characters of an HTTP token (RFC 9110 section 5.6.2).
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ACCOUNT = re.compile(rf"[A-Za-z0-9._@+\-]{{1,{MAX_ACCOUNT_CHARS}}}\Z")
_HEX_KEY = re.compile(r"[0-9A-Fa-f]{64}\Z")
#: An unknown option is named in the diagnostic only when it looks like an option name; any
#: other text could be a secret typed at the wrong place.
_SHOWN_OPTION = re.compile(r"--[a-z0-9][a-z0-9\-]{0,40}\Z|--?\Z|-[A-Za-z0-9?]\Z")


class _Invalid(UsageFault):
    """A value is not valid; the parser turns it into an :class:`ArgError` with the option."""

    def __init__(self, hint: str, header: str | None = None) -> None:
        super().__init__(hint)
        self.hint = hint
        self.header = header


def _trim(text: str) -> str:
    return text.strip(" \t")


def _variable(env: Mapping[str, str], name: str) -> str | None:
    """The value of ``name`` without spaces and tabs at its ends; ``None`` if unset or empty."""
    value = _trim(env.get(name, ""))
    return value or None


def _field_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be an HTTP field value, or ``None``: no control character other
    than the tab; its bytes are those of the command line or the environment."""
    try:
        data = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return "the value has a character that is not valid"
    if any((b < 0x20 and b != 0x09) or b == 0x7F for b in data):
        return "the value has a control character"
    return None


def _number(low: int, high: int, hint: str) -> Callable[[str], int]:
    """A converter for decimal digits only (no sign, space, underscore), then a range check."""

    def convert(text: str) -> int:
        digits = text.lstrip("0")
        if not _DIGITS.match(text) or len(digits) > len(str(high)):
            raise _Invalid(hint)
        number = int(digits or "0")
        if not low <= number <= high:
            raise _Invalid(hint)
        return number

    return convert


def _one_of(choices: Sequence[str], hint: str) -> Callable[[str], str]:
    def convert(text: str) -> str:
        if text not in choices:
            raise _Invalid(hint)
        return text

    return convert


def _non_empty(hint: str) -> Callable[[str], str]:
    def convert(text: str) -> str:
        if not text:
            raise _Invalid(hint)
        return text

    return convert


def _client_id(text: str) -> str:
    if not text:
        raise _Invalid("the client ID cannot be empty")
    if not all(" " <= c <= "~" for c in text):
        raise _Invalid("a client ID has only visible ASCII characters and spaces")
    return text


def _client_issuer(text: str) -> str:
    hint = _issuer_hint(text)
    if hint is not None:
        raise _Invalid(hint)
    return text


def _client_metadata_url(text: str) -> str:
    if not _client_metadata_url_ok(text):
        raise _Invalid("use an https URL with a path, without a user, a password and a fragment")
    return text


#: An absolute URI (RFC 3986): a scheme, then visible ASCII; RFC 8707 allows no fragment.
_ABSOLUTE_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[!-~]+\Z")


def _resource_indicator(text: str) -> str:
    if text in RESOURCE_INDICATOR_MODES:
        return text
    if not _ABSOLUTE_URI.match(text) or "#" in text or any(c in _NOT_IN_URL for c in text):
        raise _Invalid("use auto, off, or an absolute URI without a fragment, for example api://my-server")
    return text


_JSON_OBJECT_HINT = 'use a JSON object, for example {"text": "hello"}'


def _json_object(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise _Invalid(_JSON_OBJECT_HINT) from None
    if not isinstance(value, dict):
        raise _Invalid(_JSON_OBJECT_HINT)
    return value


def _account(text: str) -> str:
    if not _ACCOUNT.match(text):
        raise _Invalid(f"use 1 to {MAX_ACCOUNT_CHARS} letters, digits and the characters . _ @ + -")
    return text


_SECONDS_HINT = f"use a number of seconds from 1 to {MAX_SECONDS}"
_BYTES_HINT = f"use a number of bytes from 1 to {MAX_BYTES_LIMIT}"
_PATH_HINT = "the path cannot be empty"
_PATTERN_HINT = "the pattern cannot be empty"


# ---------------------------------------------------------------------------------------------
# The option table
# ---------------------------------------------------------------------------------------------


class _Target(enum.Enum):
    """What the command line addresses; an option applies to some targets only."""

    COMMAND = "command"
    URL = "url"
    LOGOUT = "logout"
    CHECK_COMMAND = "check-command"
    CHECK_URL = "check-url"


_ALL_TARGETS = frozenset(_Target)
_SERVE_AND_CHECK = frozenset(_ALL_TARGETS - {_Target.LOGOUT})
_URL_TARGETS = frozenset({_Target.URL, _Target.CHECK_URL})
_URL_AND_LOGOUT = frozenset({_Target.URL, _Target.CHECK_URL, _Target.LOGOUT})
_LOGOUT_ONLY = frozenset({_Target.LOGOUT})
_CHECK_ONLY = frozenset({_Target.CHECK_COMMAND, _Target.CHECK_URL})


@dataclass(frozen=True, slots=True)
class _Option:
    #: The targets that take the option.
    targets: frozenset[_Target]
    #: Converts and checks a value; ``None`` for a flag (an option without a value).
    convert: Callable[[str], object] | None = None
    #: A sign-in option: a static authorization header excludes it.
    sign_in: bool = False
    #: Each occurrence adds a header instead of replacing the value.
    header: bool = False
    #: Each occurrence adds a value instead of replacing the value.
    repeat: bool = False

    @property
    def flag(self) -> bool:
        """True for an option without a value."""
        return self.convert is None and not self.header


OPTIONS: Final[Mapping[str, _Option]] = {
    "--log-level": _Option(_ALL_TARGETS, _one_of(LOG_LEVELS, "use err, warn, info or debug")),
    "--name": _Option(_SERVE_AND_CHECK, _non_empty("the name cannot be empty")),
    "--discover-timeout": _Option(_SERVE_AND_CHECK, _number(1, MAX_SECONDS, _SECONDS_HINT)),
    "--max-line-bytes": _Option(_SERVE_AND_CHECK, _number(1, MAX_BYTES_LIMIT, _BYTES_HINT)),
    "--protocol": _Option(_SERVE_AND_CHECK, _one_of(PROTOCOLS, f"use auto, {MODERN} or legacy")),
    "--tasks": _Option(_SERVE_AND_CHECK, _one_of(TASK_MODES, "use auto or off")),
    "--host-profile": _Option(_SERVE_AND_CHECK, _one_of(HOST_PROFILES, "use auto, vscode or generic")),
    "--allow-tool": _Option(_SERVE_AND_CHECK, _non_empty(_PATTERN_HINT), repeat=True),
    "--deny-tool": _Option(_SERVE_AND_CHECK, _non_empty(_PATTERN_HINT), repeat=True),
    "--header": _Option(_URL_TARGETS, header=True),
    "--header-env": _Option(_URL_TARGETS, header=True),
    "--max-response-bytes": _Option(_URL_TARGETS, _number(1, MAX_BYTES_LIMIT, _BYTES_HINT)),
    "--ca-file": _Option(_URL_AND_LOGOUT, _non_empty(_PATH_HINT)),
    "--transport": _Option(_URL_TARGETS, _one_of(TRANSPORTS, "use auto, streamable-http or sse")),
    "--client-id": _Option(_URL_TARGETS, _client_id, sign_in=True),
    "--client-issuer": _Option(_URL_TARGETS, _client_issuer, sign_in=True),
    "--client-metadata-url": _Option(_URL_TARGETS, _client_metadata_url, sign_in=True),
    "--redirect-port": _Option(
        _URL_AND_LOGOUT, _number(1, 65535, "use a port from 1 to 65535"), sign_in=True
    ),
    "--account": _Option(_URL_AND_LOGOUT, _account, sign_in=True),
    "--token-store": _Option(
        _URL_AND_LOGOUT, _one_of(TOKEN_STORES, "use auto, keychain, file or memory"), sign_in=True
    ),
    "--token-key-file": _Option(_URL_AND_LOGOUT, _non_empty(_PATH_HINT), sign_in=True),
    "--no-browser": _Option(_URL_TARGETS, sign_in=True),
    "--sign-in": _Option(
        _URL_TARGETS, _one_of(SIGN_IN_FLOWS, "use auto, browser, device or client-credentials"), sign_in=True
    ),
    "--sign-in-timeout": _Option(_URL_TARGETS, _number(1, MAX_SECONDS, _SECONDS_HINT), sign_in=True),
    "--resource-indicator": _Option(_URL_TARGETS, _resource_indicator, sign_in=True),
    "--all": _Option(_LOGOUT_ONLY),
    "--json": _Option(_CHECK_ONLY),
    "--call-tool": _Option(_CHECK_ONLY, _non_empty("the tool name cannot be empty")),
    "--call-arguments": _Option(_CHECK_ONLY, _json_object),
}

_HINT_FORMS = 'give the URL of the upstream server, or put the upstream command after "--"'
_HINT_URL_LAST = "put the options before the URL of the upstream server"
_HINT_STATIC = "a static authorization header and the sign-in options exclude each other"


def _refusal(option: _Option, target: _Target) -> str:
    """Why ``target`` does not take ``option``."""
    if option.targets == _LOGOUT_ONLY:
        return "only logout takes it"
    if option.targets == _CHECK_ONLY:
        return "only check takes it"
    if target is _Target.LOGOUT:
        return "logout does not take it"
    return "it applies only to the URL of an upstream server, not to an upstream command"


# ---------------------------------------------------------------------------------------------
# Diagnostics
# ---------------------------------------------------------------------------------------------


#: How alike a word and a name must be for "did you mean": a letter or two apart
#: (``--nme``, ``--sign-in-timout``), not a neighbour (``--headless`` and ``--header``).
_CLOSE_RATIO: Final = 0.85


def _closest(word: str, names: Iterable[str]) -> str | None:
    """The name of ``names`` that ``word`` misspells, or ``None`` (click's choice: difflib)."""
    close = difflib.get_close_matches(word.lower(), list(names), n=1, cutoff=_CLOSE_RATIO)
    return close[0] if close else None


def unknown_option(key: str, known: Iterable[str] = ()) -> ArgError:
    """The error of an option that is not known; ``key`` is the word up to its first ``=``.

    When ``key`` misspells an option name of ``known``, the error names that option: only
    an option name, never a value.
    """
    close = _closest(key, known)
    suggestion = f": did you mean {close}?" if close is not None else ""
    if _SHOWN_OPTION.match(key):
        return ArgError("unknown_option", f"the option {key} is not known{suggestion}", key)
    return ArgError("unknown_option", f'an argument that starts with "-" is not a known option{suggestion}')


def missing_value(option: str) -> ArgError:
    """The error of an option without its value (a separate value never starts with ``--``)."""
    return ArgError("missing_value", f"the option {option} needs a value", option)


def flag_with_value(option: str) -> ArgError:
    """The error of a flag given with ``=value``."""
    return _invalid_value(option, "the option takes no value")


def _invalid_value(option: str, hint: str, header: str | None = None) -> ArgError:
    if header is not None:
        return ArgError("invalid_value", f"the header {header} of {option} is not valid: {hint}", option)
    return ArgError("invalid_value", f"the value of {option} is not valid: {hint}", option)


def _conflict(option: str, hint: str) -> ArgError:
    return ArgError("conflict", f"the option {option} cannot be used here: {hint}", option)


def _unexpected(hint: str) -> ArgError:
    return ArgError("unexpected_argument", f"an argument is not an option: {hint}")


# ---------------------------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------------------------


_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class _HeaderArg:
    option: str  # "--header" or "--header-env"
    name: str
    source: str  # the value of --header, or the variable of --header-env


@dataclass(slots=True)
class _Raw:
    """The command line after the check of each value, before the check of the form."""

    values: dict[str, object] = field(default_factory=dict)
    headers: list[_HeaderArg] = field(default_factory=list)
    #: The values of each repeatable option, in order.
    repeated: dict[str, list[object]] = field(default_factory=dict)
    #: Each option once, in the order of its first occurrence.
    order: list[str] = field(default_factory=list)

    def get(self, key: str, default: _T) -> _T:
        return cast(_T, self.values.get(key, default))

    def optional(self, key: str) -> str | None:
        return cast("str | None", self.values.get(key))


def _parse_header(earlier: Sequence[_HeaderArg], option: str, value: str) -> _HeaderArg:
    """``<name>:<value>`` of ``--header`` or ``<name>=<VAR>`` of ``--header-env``.

    The name is shown in a diagnostic only once it is a valid HTTP token.
    """
    from_env = option == "--header-env"
    if from_env:
        syntax = "use <name>=<variable>, with an HTTP header name and the name of an environment variable"
    else:
        syntax = "use <name>:<value>, with an HTTP header name"
    name, separator, rest = value.partition("=" if from_env else ":")
    if not separator or not _TOKEN.match(name):
        raise _invalid_value(option, syntax)
    lower = name.lower()
    if lower in REFUSED_HEADER_NAMES:
        hint = "the bridge or the HTTP connection sets this header"
    elif lower == PROXY_AUTHORIZATION:
        hint = (
            "the header goes to the upstream server and not to the proxy: "
            "put the user and the password in the proxy URL of HTTPS_PROXY"
        )
    elif lower.startswith(REFUSED_HEADER_PREFIX):
        hint = "the header names that start with mcp- are for the protocol"
    else:
        hint = ""
    if hint:
        raise ArgError("refused_header", f"the header {name} of {option} is not permitted: {hint}", option)
    if any(h.name.lower() == lower for h in earlier):
        raise ArgError(
            "duplicate_header",
            f"the header {name} occurs more than one time in --header and --header-env",
            option,
        )
    if from_env:
        if not _VARIABLE_NAME.match(rest):
            raise _invalid_value(option, syntax)
        return _HeaderArg(option, name, rest)
    header_value = _trim(rest)
    if not header_value:
        raise _invalid_value(option, "the header has no value", name)
    problem = _field_value_problem(header_value)
    if problem is not None:
        raise _invalid_value(option, problem, name)
    return _HeaderArg(option, name, header_value)


def options_for(subcommand: str | None) -> list[str]:
    """The options that the serve forms (``None``), ``logout`` or ``check`` take."""
    targets = _SUBCOMMAND_TARGETS[subcommand]
    return [name for name, option in OPTIONS.items() if option.targets & targets]


_SUBCOMMAND_TARGETS: Final[Mapping[str | None, frozenset[_Target]]] = {
    None: frozenset({_Target.COMMAND, _Target.URL}),
    "logout": _LOGOUT_ONLY,
    "check": _CHECK_ONLY,
}


def resolve(words: Words, env: Mapping[str, str]) -> Settings:
    """Apply the rules to ``words``.

    ``env`` is the environment of the process: the rules read the variables of
    ``--header-env``, ``MCP_BRIDGE_CLIENT_SECRET`` and ``MCP_BRIDGE_TOKEN_KEY`` from it.

    Raises:
        ArgError: the command line is not valid, a variable of ``--header-env`` is missing
            or not valid, or ``MCP_BRIDGE_TOKEN_KEY`` is not valid.
    """
    raw = _Raw()
    for key, value in words.options:
        option = OPTIONS.get(key)
        if option is None:
            raise unknown_option(key)
        if key not in raw.order:
            raw.order.append(key)
        if option.flag:
            if value is not None:
                raise flag_with_value(key)
            raw.values[key] = True
        elif value is None:
            raise missing_value(key)
        elif option.header:
            raw.headers.append(_parse_header(raw.headers, key, value))
        else:
            assert option.convert is not None
            try:
                converted = option.convert(value)
            except _Invalid as exc:
                raise _invalid_value(key, exc.hint) from exc
            if option.repeat:
                raw.repeated.setdefault(key, []).append(converted)
            else:
                raw.values[key] = converted
    url = _upstream_url(words)
    subcommand, command = words.subcommand, words.command
    target = _target(subcommand, command, url, raw)
    for key in raw.order:
        if target not in OPTIONS[key].targets:
            raise _conflict(key, _refusal(OPTIONS[key], target))
    if url is not None:
        hint = upstream_url_hint(url)
        if hint is not None:
            raise ArgError("invalid_url", f"the URL of the upstream server is not valid: {hint}")
    return _settings(target, raw, command or (), url, env)


def _upstream_url(words: Words) -> str | None:
    """The URL among the arguments that are not options, or ``None`` without one.

    The URL is the one such argument, and the last one. A diagnostic never shows an
    argument (a secret at a wrong place must not reach the log of VS Code); it says what
    the argument looks like: a URL without its scheme, or a subcommand in a wrong place.
    """
    if not words.positional:
        return None
    if sum("://" in word for word in words.positional) > 1:
        raise ArgError("two_upstreams", "give one upstream server: the command line has more than one URL")
    url, *rest = words.positional
    if "://" not in url:
        scheme = _missing_scheme(url)
        if scheme is not None:
            raise ArgError(
                "invalid_url", f"an argument looks like a URL without its scheme: write {scheme}:// before it"
            )
        subcommand = _closest(url, SUBCOMMANDS) if words.subcommand is None else None
        if subcommand is not None:
            raise _unexpected(f"did you mean the subcommand {subcommand}? It is the first word")
        raise _unexpected(_HINT_FORMS)
    if rest:
        raise _unexpected(_HINT_URL_LAST)
    return url


def _missing_scheme(word: str) -> str | None:
    """The scheme to put before ``word`` when it looks like a URL without one, else ``None``.

    Such a word has a host (a name with a dot, ``localhost`` or an IP address) and a port
    or a path: ``example.com/mcp``, ``localhost:8000``. A loopback host gets ``http``, any
    other ``https``. A file name (``server.py``) or a relative path (``dist/index.js``) is
    no URL.
    """
    parts = _split_url(f"https://{word}")
    if parts is None or (parts.port is None and not parts.path):
        return None
    if _is_loopback(parts.host):
        return "http"
    if _HOST_NAME.match(parts.host) or _IPV4.match(parts.host) or parts.host.startswith("["):
        return "https"
    return None


def _target(subcommand: str | None, command: tuple[str, ...] | None, url: str | None, raw: _Raw) -> _Target:
    """The target of the command line, after the checks of the form."""
    if subcommand == "logout":
        if command is not None:
            raise _unexpected("logout takes no upstream command")
        if raw.get("--all", False) and url is not None:
            raise _conflict("--all", "give the URL of one server, or --all")
        if not raw.get("--all", False) and url is None:
            raise ArgError(
                "missing_url",
                "the URL of the upstream server is missing: "
                "give it after the options of logout, or give --all",
            )
        return _Target.LOGOUT
    if url is not None:
        if command is not None:
            raise ArgError(
                "two_upstreams",
                'give one upstream server: its URL, or an upstream command after "--", not both',
            )
        return _Target.CHECK_URL if subcommand == "check" else _Target.URL
    if command is None or not command or not command[0]:
        raise ArgError(
            "missing_command",
            'the upstream server is missing: give its URL, or put the upstream command after "--"',
        )
    return _Target.CHECK_COMMAND if subcommand == "check" else _Target.COMMAND


_FORMS: Final = {
    _Target.COMMAND: Form.COMMAND,
    _Target.URL: Form.URL,
    _Target.LOGOUT: Form.LOGOUT,
    _Target.CHECK_COMMAND: Form.CHECK,
    _Target.CHECK_URL: Form.CHECK,
}


def _settings(
    target: _Target, raw: _Raw, command: tuple[str, ...], url: str | None, env: Mapping[str, str]
) -> Settings:
    """Resolve the environment and the options that exclude each other."""
    headers: list[Header] = []
    warnings: list[str] = []
    static_authorization = False
    for h in raw.headers:
        if h.option == "--header-env":
            value = _variable(env, h.source)
            if value is None:
                raise ArgError(
                    "missing_variable",
                    f"the environment variable {h.source} of {h.option} is not set, or it is empty",
                    h.option,
                )
            if _field_value_problem(value) is not None:
                raise ArgError(
                    "invalid_variable",
                    f"the environment variable {h.source} is not valid: "
                    "the value is not a valid HTTP header value",
                    h.option,
                )
            headers.append(Header(h.name, value, h.source))
        else:
            headers.append(Header(h.name, h.source, None))
            if h.name.lower() in SECRET_HEADER_NAMES and not warnings:
                # One warning is enough: the first secret header on the command line.
                warnings.append(
                    f"the value of the header {h.name} is on the command line. VS Code writes the command "
                    "line to its log, and the process list shows it. Use --header-env."
                )
        if h.name.lower() == "authorization":
            static_authorization = True

    if static_authorization:
        for key in raw.order:
            if OPTIONS[key].sign_in:
                raise _conflict(key, _HINT_STATIC)

    if "--call-arguments" in raw.values and "--call-tool" not in raw.values:
        raise _conflict("--call-arguments", "it needs --call-tool")

    if target is _Target.LOGOUT and raw.get("--all", False) and "--account" in raw.values:
        raise _conflict("--account", "logout --all deletes the sign-in of each account")

    signs_in = target in (_Target.URL, _Target.CHECK_URL, _Target.LOGOUT) and not static_authorization
    registration: Registration | None = None
    client_secret: str | None = None
    token_key: bytes | None = None
    redirect_port = raw.get("--redirect-port", DEFAULT_REDIRECT_PORT)
    token_store = raw.get("--token-store", DEFAULT_TOKEN_STORE)
    sign_in = raw.get("--sign-in", DEFAULT_SIGN_IN_FLOW)
    if signs_in:
        registration, client_secret = _registration(raw, env, redirect_port)
        token_key = _token_key(raw, env, token_store)
        if sign_in == "client-credentials":
            _check_client_credentials(registration)

    if target in (_Target.COMMAND, _Target.CHECK_COMMAND):
        name = raw.optional("--name") or default_name_for_command(command[0]) or PROGRAM
    elif target is _Target.LOGOUT:
        name = ""
    else:
        assert url is not None
        name = raw.optional("--name") or default_name_for_url(url) or PROGRAM

    return Settings(
        form=_FORMS[target],
        command=command if target in (_Target.COMMAND, _Target.CHECK_COMMAND) else (),
        url=url,
        name=name,
        log_level=raw.get("--log-level", DEFAULT_LOG_LEVEL),
        discover_timeout=float(raw.get("--discover-timeout", DEFAULT_DISCOVER_TIMEOUT)),
        max_line_bytes=raw.get("--max-line-bytes", DEFAULT_MAX_LINE_BYTES),
        protocol="legacy" if raw.get("--transport", "") == "sse" else raw.get("--protocol", DEFAULT_PROTOCOL),
        tasks=raw.get("--tasks", DEFAULT_TASKS),
        headers=tuple(headers),
        max_response_bytes=raw.get("--max-response-bytes", DEFAULT_MAX_RESPONSE_BYTES),
        ca_file=raw.optional("--ca-file"),
        client_id=raw.optional("--client-id"),
        client_issuer=raw.optional("--client-issuer"),
        client_metadata_url=raw.optional("--client-metadata-url"),
        redirect_port=redirect_port,
        account=raw.get("--account", DEFAULT_ACCOUNT),
        token_store=token_store,
        token_key_file=raw.optional("--token-key-file"),
        token_key=token_key,
        client_secret=client_secret,
        no_browser=raw.get("--no-browser", False),
        sign_in_timeout=float(raw.get("--sign-in-timeout", DEFAULT_SIGN_IN_TIMEOUT)),
        sign_in=sign_in,
        resource_indicator=raw.get("--resource-indicator", DEFAULT_RESOURCE_INDICATOR),
        all=raw.get("--all", False),
        json=raw.get("--json", False),
        static_authorization=static_authorization,
        registration=registration,
        warnings=tuple(warnings),
        allow_tools=tuple(str(v) for v in raw.repeated.get("--allow-tool", ())),
        deny_tools=tuple(str(v) for v in raw.repeated.get("--deny-tool", ())),
        call_tool=raw.optional("--call-tool"),
        call_arguments=raw.get("--call-arguments", {}),
        host_profile=raw.get("--host-profile", DEFAULT_HOST_PROFILE),
        transport=raw.get("--transport", DEFAULT_TRANSPORT),
    )


def _registration(raw: _Raw, env: Mapping[str, str], redirect_port: int) -> tuple[Registration, str | None]:
    """§1.2: ``--client-id``, else ``--client-metadata-url``, else dynamic for another port,
    else the document of the bridge (dynamic while the bridge publishes none)."""
    client_id = raw.optional("--client-id")
    issuer = raw.optional("--client-issuer")
    metadata_url = raw.optional("--client-metadata-url")
    if issuer is not None and client_id is None:
        raise _conflict("--client-issuer", "it needs --client-id")
    if client_id is not None:
        if metadata_url is not None:
            raise _conflict(
                "--client-metadata-url", "--client-id and --client-metadata-url exclude each other"
            )
        # Without an issuer the client binds to the authorization server that the upstream
        # server names. The upstream server is not trusted with a secret.
        secret = _variable(env, CLIENT_SECRET_VARIABLE)
        if secret is not None and issuer is None:
            raise _conflict(
                "--client-id", f"a client with a secret in {CLIENT_SECRET_VARIABLE} needs --client-issuer"
            )
        return PreRegistered(client_id, issuer, secret), secret
    if metadata_url is not None:
        return ClientMetadataDocument(metadata_url, explicit=True), None
    if redirect_port != DEFAULT_REDIRECT_PORT or DEFAULT_CLIENT_METADATA_URL is None:
        # The document of the bridge lists only the default redirect URI.
        return DynamicRegistration(), None
    return ClientMetadataDocument(DEFAULT_CLIENT_METADATA_URL, explicit=False), None


def _check_client_credentials(registration: Registration) -> None:
    """``--sign-in client-credentials`` needs ``--client-id`` and the secret of the client."""
    if not isinstance(registration, PreRegistered):
        raise _conflict(
            "--sign-in",
            "--sign-in client-credentials needs --client-id, --client-issuer and the client secret "
            f"in {CLIENT_SECRET_VARIABLE}",
        )
    if registration.client_secret is None:
        raise ArgError(
            "missing_variable",
            f"--sign-in client-credentials needs the client secret in {CLIENT_SECRET_VARIABLE}: "
            "the environment variable is not set, or it is empty",
            "--sign-in",
        )


def _token_key(raw: _Raw, env: Mapping[str, str], token_store: str) -> bytes | None:
    """The key of ``MCP_BRIDGE_TOKEN_KEY`` for the stores that take a key, after its checks."""
    key_file = raw.optional("--token-key-file")
    if token_store in ("keychain", "memory"):
        if key_file is not None:
            raise _conflict(
                "--token-key-file", "only the file store takes a key: use --token-store file or auto"
            )
        return None
    text = _variable(env, TOKEN_KEY_VARIABLE)
    if text is not None and key_file is not None:
        raise _conflict("--token-key-file", f"give the key in {TOKEN_KEY_VARIABLE} or in a file, not in both")
    key: bytes | None = None
    if text is not None:
        if not _HEX_KEY.match(text):
            raise ArgError(
                "invalid_variable",
                f"the environment variable {TOKEN_KEY_VARIABLE} is not valid: use 64 hexadecimal digits",
            )
        key = bytes.fromhex(text)
    if token_store == "file" and key is None and key_file is None:
        raise ArgError(
            "missing_token_key",
            f"--token-store file needs a key: set the environment variable {TOKEN_KEY_VARIABLE}, "
            "or give --token-key-file",
            "--token-store",
        )
    return key
