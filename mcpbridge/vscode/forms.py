"""The settings of each form of the command line of ``mcp-bridge-vscode``.

This module is pure. The rules of :mod:`mcpbridge.vscode.settings` read a command line into
the settings of its form: :class:`ServeSettings` (the command form and the URL form),
:class:`CheckSettings`, :class:`LogoutSettings` or :class:`SecretSettings`. Each is made of the
parts that its form takes, and has no field for an option that its form refuses:

* :class:`CommandUpstream` or :class:`UrlUpstream`: the upstream server, where it is and how
  the bridge reads it (both are an :class:`Upstream`); a URL has its :class:`Store` and, unless
  a static authorization header replaces it, its :class:`SignIn`;
* :class:`Serving`: what the running bridge applies between VS Code and the server;
* :class:`Store`: the token store, which logout and secret take too.

Each code that runs a form takes the settings of that form, or only the parts it reads. The
fields that can hold a secret are left out of the ``repr``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TypeAlias

from mcpbridge.oauth.config import Registration, SignInFlow, SignInOptions, TokenStoreMode

from .headers import Header

__all__ = [
    "CheckSettings",
    "CommandUpstream",
    "Form",
    "LogoutSettings",
    "SecretSettings",
    "ServeSettings",
    "Serving",
    "Settings",
    "SignIn",
    "Store",
    "Upstream",
    "UrlUpstream",
]


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
    #: ``secret [options] (set <name> | delete <name> | list)``: the secrets of ``--header-secret``.
    SECRET = "secret"


@dataclass(frozen=True, slots=True)
class Store:
    """The token store: where the sign-in and the secrets of ``--header-secret`` are kept.

    The options ``--account``, ``--token-store`` and ``--token-key-file``, which the URL form,
    check of a URL, logout and secret take.
    """

    account: str
    token_store: TokenStoreMode
    token_key_file: str | None
    #: The 32 bytes of ``MCP_BRIDGE_TOKEN_KEY``, read for the stores ``auto`` and ``file`` when
    #: the form opens the store (a sign-in, ``--header-secret``, logout or secret); else ``None``.
    token_key: bytes | None = field(repr=False)


@dataclass(frozen=True, slots=True)
class SignIn:
    """The sign-in (OAuth) to an upstream URL: the sign-in options, and the client they give."""

    registration: Registration
    client_id: str | None
    client_issuer: str | None
    client_metadata_url: str | None
    redirect_port: int
    #: ``MCP_BRIDGE_CLIENT_SECRET``, read only with ``--client-id``.
    client_secret: str | None = field(repr=False)
    no_browser: bool
    #: ``--sign-in-timeout``.
    timeout: float
    #: ``--sign-in``.
    flow: SignInFlow
    #: ``--resource-indicator``: ``auto``, ``off`` or the URI to send as ``resource``.
    resource_indicator: str

    @property
    def redirect_uri(self) -> str:
        """The redirect URI of the sign-in: always the literal loopback address."""
        return f"http://127.0.0.1:{self.redirect_port}/callback"


@dataclass(frozen=True, slots=True)
class Upstream:
    """What both kinds of upstream server take: how the bridge reads the server.

    An upstream is a :class:`CommandUpstream` or a :class:`UrlUpstream`; code that reads only
    these fields takes an :class:`Upstream`.
    """

    #: ``--protocol``: ``auto``, the modern revision or ``legacy`` (also with ``--transport sse``).
    protocol: str
    discover_timeout: float
    #: ``--max-line-bytes``: a line from VS Code, and from an upstream command.
    max_line_bytes: int


@dataclass(frozen=True, slots=True)
class CommandUpstream(Upstream):
    """An upstream command on stdio (the command form, check of a command)."""

    #: The upstream command and its arguments.
    command: tuple[str, ...] = field(repr=False)


@dataclass(frozen=True, slots=True)
class UrlUpstream(Upstream):
    """An upstream server at a URL (the URL form, check of a URL), with the options of a URL."""

    url: str = field(repr=False)
    headers: tuple[Header, ...]
    max_response_bytes: int
    ca_file: str | None
    #: ``--transport``: ``auto``, ``streamable-http`` or ``sse`` (which implies ``--protocol legacy``).
    transport: str
    store: Store
    #: ``None`` with a static authorization header: then the bridge never signs in, and opens
    #: the token store only for ``--header-secret``.
    sign_in: SignIn | None

    @property
    def static_authorization(self) -> bool:
        """A header named ``authorization``: then the bridge never signs in."""
        return self.sign_in is None

    def sign_in_options(self) -> SignInOptions:
        """The options of the sign-in; only with a sign-in (:attr:`sign_in` is set)."""
        sign_in = self.sign_in
        assert sign_in is not None
        return SignInOptions(
            url=self.url,
            account=self.store.account,
            redirect_port=sign_in.redirect_port,
            registration=sign_in.registration,
            token_store=self.store.token_store,
            token_key=self.store.token_key,
            token_key_file=self.store.token_key_file,
            no_browser=sign_in.no_browser,
            sign_in_timeout=sign_in.timeout,
            sign_in=sign_in.flow,
            resource_indicator=sign_in.resource_indicator,
            header_variables=frozenset(h.from_env for h in self.headers if h.from_env),
        )


@dataclass(frozen=True, slots=True)
class Serving:
    """What the running bridge applies between VS Code and the server (the serve forms, check)."""

    #: The server name for VS Code when the upstream server sends none (§2.3).
    name: str
    #: ``--tasks``: ``auto`` or ``off``.
    tasks: str
    #: ``--allow-tool`` and ``--deny-tool``: shell-style patterns on the tool names.
    allow_tools: tuple[str, ...]
    deny_tools: tuple[str, ...]
    #: ``--host-profile``: ``auto``, ``vscode`` or ``generic``.
    host_profile: str


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """``[options] -- <command> [args...]`` and ``[options] <url>``: serve VS Code."""

    log_level: str
    #: Lines for the log at the warning level, for example a secret header on the command line.
    warnings: tuple[str, ...]
    upstream: CommandUpstream | UrlUpstream
    serving: Serving

    @property
    def form(self) -> Form:
        return Form.COMMAND if isinstance(self.upstream, CommandUpstream) else Form.URL


@dataclass(frozen=True, slots=True)
class CheckSettings:
    """``check [options] (-- <command> | <url>)``: connect one time and report."""

    log_level: str
    warnings: tuple[str, ...]
    upstream: CommandUpstream | UrlUpstream
    serving: Serving
    #: ``--json``.
    json: bool
    #: ``--call-tool``: the tool that the check calls once, and ``--call-arguments``.
    call_tool: str | None
    call_arguments: dict[str, object] = field(repr=False)

    @property
    def form(self) -> Form:
        return Form.CHECK


@dataclass(frozen=True, slots=True)
class LogoutSettings:
    """``logout [options] <url>`` or ``logout [options] --all``."""

    log_level: str
    warnings: tuple[str, ...]
    #: The upstream URL of ``logout <url>``; ``None`` with ``--all``.
    url: str | None = field(repr=False)
    #: ``--all``.
    all: bool
    ca_file: str | None
    redirect_port: int
    store: Store

    @property
    def form(self) -> Form:
        return Form.LOGOUT


@dataclass(frozen=True, slots=True)
class SecretSettings:
    """``secret [options] (set <name> | delete <name> | list)``."""

    log_level: str
    warnings: tuple[str, ...]
    store: Store
    #: ``set``, ``delete`` or ``list``.
    action: str
    #: The name of the secret; ``None`` for list.
    name: str | None

    @property
    def form(self) -> Form:
        return Form.SECRET


#: The result of a valid command line that is not ``--help`` or ``--version``: the settings of
#: its form, each with the parts that the form takes and no field for an option it refuses.
Settings: TypeAlias = ServeSettings | CheckSettings | LogoutSettings | SecretSettings
