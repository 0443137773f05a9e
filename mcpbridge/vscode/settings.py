"""The rules of the command line of ``mcp-bridge-vscode``.

This module is pure: :func:`resolve` takes the words of a command line, as typer
parsed them (:class:`Words`), and the environment as a mapping, and returns the frozen
settings of its form (:data:`.forms.Settings`) or raises :class:`ArgError`. It opens no
file: the CA file and the key file are checked later, by the code that reads them.

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

To add an option: add its row to :data:`.options.OPTIONS` (the forms that take it, the
check of its value and its help), its field to the part of :mod:`.forms` that the forms
taking it share, and its line in :func:`_settings`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from mcpbridge.mcp.protocol import MODERN
from mcpbridge.oauth.config import (
    CLIENT_SECRET_VARIABLE,
    SECRET_NAME,
    TOKEN_KEY_VARIABLE,
    ClientMetadataDocument,
    DynamicRegistration,
    PreRegistered,
    Registration,
    SignInFlow,
    TokenStoreMode,
)

from .forms import (
    CheckSettings,
    CommandUpstream,
    Form,
    LogoutSettings,
    SecretSettings,
    ServeSettings,
    Serving,
    Settings,
    SignIn,
    Store,
    Upstream,
    UrlUpstream,
)
from .headers import (
    REFUSED_HEADER_NAMES,
    Header,
    HeaderArg,
    parse_header,
    resolve_headers,
    variable,
)
from .options import (
    DEFAULT_ACCOUNT,
    DEFAULT_CLIENT_METADATA_URL,
    DEFAULT_DISCOVER_TIMEOUT,
    DEFAULT_HOST_PROFILE,
    DEFAULT_LOG_LEVEL,
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_PROTOCOL,
    DEFAULT_REDIRECT_PORT,
    DEFAULT_SIGN_IN_TIMEOUT,
    DEFAULT_TASKS,
    DEFAULT_TOKEN_STORE,
    DEFAULT_TRANSPORT,
    MAX_ACCOUNT_CHARS,
    MAX_BYTES_LIMIT,
    MAX_SECONDS,
    OPTIONS,
    PROGRAM,
    SUBCOMMANDS,
    InvalidValue,
    Target,
    options_for,
    refusal,
)
from .urls import HOST_NAME, IPV4, is_loopback, split_url, upstream_url_hint
from .words import ArgError, Words, closest, flag_with_value, invalid_value, missing_value, unknown_option

__all__ = [
    "DEFAULT_ACCOUNT",
    "DEFAULT_CLIENT_METADATA_URL",
    "DEFAULT_DISCOVER_TIMEOUT",
    "DEFAULT_HOST_PROFILE",
    "DEFAULT_LOG_LEVEL",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_PROTOCOL",
    "DEFAULT_REDIRECT_PORT",
    "DEFAULT_SIGN_IN_TIMEOUT",
    "DEFAULT_TASKS",
    "DEFAULT_TOKEN_STORE",
    "DEFAULT_TRANSPORT",
    "MAX_ACCOUNT_CHARS",
    "MAX_BYTES_LIMIT",
    "MAX_SECONDS",
    "OPTIONS",
    "PROGRAM",
    "REFUSED_HEADER_NAMES",
    "SUBCOMMANDS",
    "ArgError",
    "CheckSettings",
    "ClientMetadataDocument",
    "CommandUpstream",
    "DynamicRegistration",
    "Form",
    "Header",
    "LogoutSettings",
    "PreRegistered",
    "Registration",
    "SecretSettings",
    "ServeSettings",
    "Serving",
    "Settings",
    "SignIn",
    "Store",
    "Upstream",
    "UrlUpstream",
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
    parts = split_url(url)
    return parts.host if parts is not None else ""


_HINT_FORMS = 'give the URL of the upstream server, or put the upstream command after "--"'
_HINT_URL_LAST = "put the options before the URL of the upstream server"
_HINT_STATIC = "a static authorization header and the sign-in options exclude each other"


def _conflict(option: str, hint: str) -> ArgError:
    return ArgError("conflict", f"the option {option} cannot be used here: {hint}", option)


def _unexpected(hint: str) -> ArgError:
    return ArgError("unexpected_argument", f"an argument is not an option: {hint}")


_HEX_KEY = re.compile(r"[0-9A-Fa-f]{64}\Z")
#: The options of the token store: with ``--header-secret``, they say where the secret is.
_STORE_OPTIONS: Final = frozenset({"--account", "--token-store", "--token-key-file"})
_SECRET_USAGE: Final = "give set <name>, delete <name> or list after the options of secret"


def _secret_words(positional: tuple[str, ...]) -> tuple[str, str | None]:
    """The action and the name of ``secret``; a diagnostic never shows a word (it could be
    a value typed at the wrong place)."""
    if not positional or positional[0] not in ("set", "delete", "list"):
        raise ArgError("missing_action", f"the action of secret is missing or unknown: {_SECRET_USAGE}")
    action, *rest = positional
    if action == "list":
        if rest:
            raise _unexpected("secret list takes no name")
        return action, None
    if len(rest) != 1:
        raise _unexpected(
            f"secret {action} takes one secret name; the value is read from stdin or a prompt, "
            "never from the command line"
        )
    if not SECRET_NAME.match(rest[0]):
        raise ArgError(
            "invalid_secret_name",
            "the secret name is not valid: use 1 to 64 letters, digits and the characters . _ @ + -",
        )
    return action, rest[0]


# ---------------------------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Raw:
    """The command line after the check of each value, before the check of the form."""

    values: dict[str, object] = field(default_factory=dict)
    headers: list[HeaderArg] = field(default_factory=list)
    #: The values of each repeatable option, in order.
    repeated: dict[str, list[object]] = field(default_factory=dict)
    #: Each option once, in the order of its first occurrence.
    order: list[str] = field(default_factory=list)

    def value(self, key: str) -> Any:
        """The value of the option ``key``, else its default of :data:`.options.OPTIONS`."""
        return self.values.get(key, OPTIONS[key].default)

    def optional(self, key: str) -> str | None:
        return cast("str | None", self.values.get(key))


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
            raw.headers.append(parse_header(raw.headers, key, value))
        else:
            assert option.convert is not None
            try:
                converted = option.convert(value)
            except InvalidValue as exc:
                raise invalid_value(key, exc.hint) from exc
            if option.repeat:
                raw.repeated.setdefault(key, []).append(converted)
            else:
                raw.values[key] = converted
    subcommand, command = words.subcommand, words.command
    url = None if subcommand == "secret" else _upstream_url(words)
    target = _target(subcommand, command, url, raw)
    for key in raw.order:
        if target not in OPTIONS[key].targets:
            raise _conflict(key, refusal(OPTIONS[key], target))
    if url is not None:
        hint = upstream_url_hint(url)
        if hint is not None:
            raise ArgError("invalid_url", f"the URL of the upstream server is not valid: {hint}")
    return _settings(target, raw, command or (), url, env, words.positional)


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
        subcommand = closest(url, SUBCOMMANDS) if words.subcommand is None else None
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
    parts = split_url(f"https://{word}")
    if parts is None or (parts.port is None and not parts.path):
        return None
    if is_loopback(parts.host):
        return "http"
    if HOST_NAME.match(parts.host) or IPV4.match(parts.host) or parts.host.startswith("["):
        return "https"
    return None


def _target(subcommand: str | None, command: tuple[str, ...] | None, url: str | None, raw: _Raw) -> Target:
    """The target of the command line, after the checks of the form."""
    if subcommand == "secret":
        if command is not None:
            raise _unexpected("secret takes no upstream command")
        return Target.SECRET
    if subcommand == "logout":
        if command is not None:
            raise _unexpected("logout takes no upstream command")
        if raw.value("--all") and url is not None:
            raise _conflict("--all", "give the URL of one server, or --all")
        if not raw.value("--all") and url is None:
            raise ArgError(
                "missing_url",
                "the URL of the upstream server is missing: "
                "give it after the options of logout, or give --all",
            )
        return Target.LOGOUT
    if url is not None:
        if command is not None:
            raise ArgError(
                "two_upstreams",
                'give one upstream server: its URL, or an upstream command after "--", not both',
            )
        return Target.CHECK_URL if subcommand == "check" else Target.URL
    if command is None or not command or not command[0]:
        raise ArgError(
            "missing_command",
            'the upstream server is missing: give its URL, or put the upstream command after "--"',
        )
    return Target.CHECK_COMMAND if subcommand == "check" else Target.COMMAND


def _settings(
    target: Target,
    raw: _Raw,
    command: tuple[str, ...],
    url: str | None,
    env: Mapping[str, str],
    positional: tuple[str, ...] = (),
) -> Settings:
    """Resolve the environment and the options that exclude each other."""
    headers, warnings, static_authorization = resolve_headers(raw.headers, env)
    from_secret = any(header.from_secret for header in headers)
    if static_authorization:
        for key in raw.order:
            # With --header-secret, the options of the token store say where the secret is.
            if OPTIONS[key].sign_in and not (from_secret and key in _STORE_OPTIONS):
                raise _conflict(key, _HINT_STATIC)

    if raw.value("--transport") == "sse" and raw.value("--protocol") == MODERN:
        raise _conflict(
            "--protocol",
            f"the transport HTTP+SSE (--transport sse) is of the 2024-11-05 era; a server of {MODERN} "
            "speaks Streamable HTTP: remove --transport sse",
        )

    if "--call-arguments" in raw.values and "--call-tool" not in raw.values:
        raise _conflict("--call-arguments", "it needs --call-tool")

    if target is Target.LOGOUT and raw.value("--all") and "--account" in raw.values:
        raise _conflict("--account", "logout --all deletes the sign-in of each account")

    sign_in: SignIn | None = None
    token_key: bytes | None = None
    if target in (Target.URL, Target.CHECK_URL) and not static_authorization:
        sign_in, token_key = _sign_in(raw, env)
    elif from_secret or target in (Target.LOGOUT, Target.SECRET):
        token_key = _token_key(raw, env)
    key_file = raw.optional("--token-key-file")
    store = Store(raw.value("--account"), _token_store(raw), key_file, token_key)
    log_level: str = raw.value("--log-level")

    if target is Target.SECRET:
        action, name = _secret_words(positional)
        return SecretSettings(log_level, tuple(warnings), store, action, name)
    if target is Target.LOGOUT:
        return LogoutSettings(
            log_level,
            tuple(warnings),
            url=url,
            all=raw.value("--all"),
            ca_file=raw.optional("--ca-file"),
            redirect_port=raw.value("--redirect-port"),
            store=store,
        )
    upstream = _upstream(target, raw, command, url, tuple(headers), store, sign_in)
    serving = Serving(
        name=_server_name(target, raw, command, url),
        tasks=raw.value("--tasks"),
        allow_tools=tuple(str(v) for v in raw.repeated.get("--allow-tool", ())),
        deny_tools=tuple(str(v) for v in raw.repeated.get("--deny-tool", ())),
        host_profile=raw.value("--host-profile"),
    )
    if target in (Target.COMMAND, Target.URL):
        return ServeSettings(log_level, tuple(warnings), upstream, serving)
    return CheckSettings(
        log_level,
        tuple(warnings),
        upstream,
        serving,
        json=raw.value("--json"),
        call_tool=raw.optional("--call-tool"),
        call_arguments=raw.value("--call-arguments") or {},
    )


def _upstream(
    target: Target,
    raw: _Raw,
    command: tuple[str, ...],
    url: str | None,
    headers: tuple[Header, ...],
    store: Store,
    sign_in: SignIn | None,
) -> CommandUpstream | UrlUpstream:
    """The upstream server of the serve forms and of check."""
    protocol = "legacy" if raw.value("--transport") == "sse" else raw.value("--protocol")
    discover_timeout = float(raw.value("--discover-timeout"))
    max_line_bytes: int = raw.value("--max-line-bytes")
    if target in (Target.COMMAND, Target.CHECK_COMMAND):
        return CommandUpstream(protocol, discover_timeout, max_line_bytes, command)
    assert url is not None
    return UrlUpstream(
        protocol,
        discover_timeout,
        max_line_bytes,
        url=url,
        headers=headers,
        max_response_bytes=raw.value("--max-response-bytes"),
        ca_file=raw.optional("--ca-file"),
        transport=raw.value("--transport"),
        store=store,
        sign_in=sign_in,
    )


def _sign_in(raw: _Raw, env: Mapping[str, str]) -> tuple[SignIn, bytes | None]:
    """The sign-in to a URL, and the key of the token store, after their checks."""
    redirect_port: int = raw.value("--redirect-port")
    flow = SignInFlow(raw.value("--sign-in"))
    registration, client_secret = _registration(raw, env, redirect_port)
    token_key = _token_key(raw, env)
    if flow is SignInFlow.CLIENT_CREDENTIALS:
        _check_client_credentials(registration)
    sign_in = SignIn(
        registration=registration,
        client_id=raw.optional("--client-id"),
        client_issuer=raw.optional("--client-issuer"),
        client_metadata_url=raw.optional("--client-metadata-url"),
        redirect_port=redirect_port,
        client_secret=client_secret,
        no_browser=raw.value("--no-browser"),
        timeout=float(raw.value("--sign-in-timeout")),
        flow=flow,
        resource_indicator=raw.value("--resource-indicator"),
    )
    return sign_in, token_key


def _server_name(target: Target, raw: _Raw, command: tuple[str, ...], url: str | None) -> str:
    """``--name``, else the default name of the upstream server (§2.3); empty for logout."""
    if target in (Target.COMMAND, Target.CHECK_COMMAND):
        return raw.optional("--name") or default_name_for_command(command[0]) or PROGRAM
    if target in (Target.LOGOUT, Target.SECRET):
        return ""
    assert url is not None
    return raw.optional("--name") or default_name_for_url(url) or PROGRAM


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
        secret = variable(env, CLIENT_SECRET_VARIABLE)
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


def _token_store(raw: _Raw) -> TokenStoreMode:
    """``--token-store``, one of the words its row accepts."""
    return TokenStoreMode(raw.value("--token-store"))


def _token_key(raw: _Raw, env: Mapping[str, str]) -> bytes | None:
    """The key of ``MCP_BRIDGE_TOKEN_KEY`` for the stores that take a key, after its checks."""
    token_store = _token_store(raw)
    key_file = raw.optional("--token-key-file")
    if token_store in (TokenStoreMode.KEYCHAIN, TokenStoreMode.MEMORY):
        if key_file is not None:
            raise _conflict(
                "--token-key-file", "only the file store takes a key: use --token-store file or auto"
            )
        return None
    text = variable(env, TOKEN_KEY_VARIABLE)
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
    if token_store is TokenStoreMode.FILE and key is None and key_file is None:
        raise ArgError(
            "missing_token_key",
            f"--token-store file needs a key: set the environment variable {TOKEN_KEY_VARIABLE}, "
            "or give --token-key-file",
            "--token-store",
        )
    return key
