"""The executable ``mcp-bridge-vscode``: one typer app.

The serve forms are the default command, thus the entries of VS Code's ``mcp.json``
need no subcommand word::

    mcp-bridge-vscode [options] -- <command> [args...]
    mcp-bridge-vscode [options] <url>
    mcp-bridge-vscode logout [options] (<url> | --all)
    mcp-bridge-vscode check [options] (-- <command> [args...] | <url>)

``check`` and ``logout`` are subcommands only as the first word. typer (click under
it) parses the words, writes the help and the shell completion; the rules of the values
live in :mod:`mcpbridge.vscode.settings`. Each command declares every option, and hides
from its help the ones that its forms do not take: then the rules, not the parser, refuse
them, with the reason.

Two rules of the words come before click's parser (:func:`_split`): the first ``--``
ends the options and the rest goes to the upstream command unchanged, and a separate
value never starts with ``--`` (``--name -- cmd`` misses the name).

Exit codes: 0 at the end of stdin; 1 after the loss of the upstream command or an
internal error; 2 for arguments that are not valid (one line with the problem and one
line that points to ``--help`` on stderr).

To add an option: its rule in :data:`settings.OPTIONS` and its help line in :data:`HELP`.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Final, Optional

import typer

# typer (0.29 and later) carries its own copy of click.
from typer._click.core import Command, Context
from typer._click.exceptions import NoSuchOption, UsageError
from typer.core import TyperCommand, TyperGroup, TyperOption

from .. import __version__, log
from ..mcp.protocol import MODERN
from ..oauth.config import (
    CLIENT_SECRET_VARIABLE,
    DEFAULT_RESOURCE_INDICATOR,
    DEFAULT_SIGN_IN_FLOW,
    TOKEN_KEY_VARIABLE,
)
from . import settings
from .settings import PROGRAM, ArgError, Settings, Words

__all__ = ["HELP", "app", "main", "parse", "register_secrets", "run"]

logger = logging.getLogger("mcpbridge.vscode")

#: The groups of ``--help``.
GENERAL: Final = "Options"
URL_PANEL: Final = "Options for <url>"
SIGN_IN: Final = "Sign-in options for <url> (OAuth)"
LOGOUT: Final = "Options for logout"
CHECK: Final = "Options for check"

_M = settings.MAX_SECONDS
_B = settings.MAX_BYTES_LIMIT
if settings.DEFAULT_CLIENT_METADATA_URL is None:
    _METADATA_DEFAULT = "Without it, the bridge uses dynamic client registration."
else:  # pragma: no cover - the bridge publishes no document yet
    _METADATA_DEFAULT = f"The default is the document of the bridge: {settings.DEFAULT_CLIENT_METADATA_URL}"

#: For each option of :data:`settings.OPTIONS`: its group in ``--help``, the name of its
#: value (``None`` for a flag) and its help.
HELP: Final[dict[str, tuple[str, str | None, str]]] = {
    "--name": (
        GENERAL,
        "<name>",
        "The server name for VS Code when the upstream server sends none. The default is the file "
        "name of <command> without its extension, or the host of <url>.",
    ),
    "--log-level": (
        GENERAL,
        "<level>",
        "The level of the log lines on stderr: err, warn, info or debug. "
        f"The default is {settings.DEFAULT_LOG_LEVEL}.",
    ),
    "--discover-timeout": (
        GENERAL,
        "<s>",
        f"The time in seconds for the first answer of the upstream server, from 1 to {_M}. "
        f"The default is {settings.DEFAULT_DISCOVER_TIMEOUT}.",
    ),
    "--max-line-bytes": (
        GENERAL,
        "<n>",
        f"The maximum length of one message from VS Code or from <command>, in bytes, from 1 to {_B}. "
        f"The default is {settings.DEFAULT_MAX_LINE_BYTES} (64 MiB).",
    ),
    "--protocol": (
        GENERAL,
        "<revision>",
        f"The revision of the upstream server: {MODERN}, legacy (2025-11-25) or auto. With auto, "
        f"the bridge asks the server which revision it speaks. The default is {settings.DEFAULT_PROTOCOL}.",
    ),
    "--tasks": (
        GENERAL,
        "<mode>",
        "auto or off. With auto, a tool of a 2026-07-28 server that runs as a task (the Tasks "
        "extension) works: the bridge declares the extension and carries the task to its end, and "
        "VS Code gets the result. With off, the bridge declares no tasks, and a tool that needs them "
        f"fails. The default is {settings.DEFAULT_TASKS}.",
    ),
    "--host-profile": (
        GENERAL,
        "<profile>",
        "What the bridge does for the host beyond the protocol: vscode (the _meta keys of VS Code go "
        "to the upstream server) or generic (every _meta key of the host goes, and results follow the "
        "schema strictly). With auto, the bridge picks it from the name and the revision that the host "
        f"sends. The default is {settings.DEFAULT_HOST_PROFILE}.",
    ),
    "--allow-tool": (
        GENERAL,
        "<pattern>",
        "Show VS Code only the tools whose name matches the pattern; give it again for more patterns. "
        "A pattern is shell-style and case-sensitive (* any text, ? one character, \\[abc] one of the "
        "characters) and matches the whole name, for example git_* or *_read.",
    ),
    "--deny-tool": (
        GENERAL,
        "<pattern>",
        "Hide the tools whose name matches the pattern, also from --allow-tool; give it again for more "
        "patterns. A hidden tool is not in the tool list, and a call of it gets the error of an unknown "
        "tool without reaching the server. A pattern that matches no tool of the server gives a warning "
        "line; check shows the tools before and after the filter.",
    ),
    "--header-env": (
        URL_PANEL,
        "<name>=<var>",
        "Send the header <name> with the value of the environment variable <var>. Use it for a secret, "
        "for example a static authorization header.",
    ),
    "--header": (
        URL_PANEL,
        "<name>:<value>",
        "Send the header <name> with <value>. Do not use it for a secret.",
    ),
    "--max-response-bytes": (
        URL_PANEL,
        "<n>",
        f"The maximum length of one response or one event of the upstream server, in bytes, from 1 to {_B}. "
        f"The default is {settings.DEFAULT_MAX_RESPONSE_BYTES} (64 MiB).",
    ),
    "--ca-file": (
        URL_PANEL,
        "<path>",
        "Also trust the CA certificates of this PEM file. The bridge always trusts the CA certificates "
        "of the system.",
    ),
    "--transport": (
        URL_PANEL,
        "<transport>",
        "How to reach a server of the 2025 era: streamable-http, sse (the HTTP+SSE transport of "
        "2024-11-05; it implies --protocol legacy) or auto: Streamable HTTP, and HTTP+SSE when the server "
        f"refuses the POST of initialize with 400, 404 or 405. The default is {settings.DEFAULT_TRANSPORT}.",
    ),
    "--client-id": (
        SIGN_IN,
        "<id>",
        "Use this client ID, which the authorization server issued. The client secret comes from the "
        f"environment variable {CLIENT_SECRET_VARIABLE}.",
    ),
    "--client-issuer": (SIGN_IN, "<url>", "The issuer of --client-id. A client with a secret needs it."),
    "--client-metadata-url": (
        SIGN_IN,
        "<url>",
        f"Use the client ID metadata document at this URL. {_METADATA_DEFAULT}",
    ),
    "--redirect-port": (
        SIGN_IN,
        "<port>",
        "The port of the redirect URI http://127.0.0.1:<port>/callback, from 1 to 65535. "
        f"The default is {settings.DEFAULT_REDIRECT_PORT}.",
    ),
    "--account": (
        SIGN_IN,
        "<label>",
        f"The account of the stored sign-in: 1 to {settings.MAX_ACCOUNT_CHARS} letters, digits and "
        f'. _ @ + -. The default is "{settings.DEFAULT_ACCOUNT}".',
    ),
    "--token-store": (
        SIGN_IN,
        "<store>",
        "Where the bridge keeps the tokens: auto, keychain, file or memory. The default is "
        f"{settings.DEFAULT_TOKEN_STORE}: the keychain, else the file store when it has a key, "
        "else the memory.",
    ),
    "--token-key-file": (
        SIGN_IN,
        "<path>",
        "The file with the key of the file store: 64 hexadecimal digits, readable by its owner only.",
    ),
    "--sign-in": (
        SIGN_IN,
        "<flow>",
        "How to sign in: browser (a browser on this machine), device (a code to enter at a page on any "
        "machine: for Remote-SSH, dev containers, Codespaces and headless machines), client-credentials "
        f"(no person: --client-id, --client-issuer and the secret in {CLIENT_SECRET_VARIABLE}), or auto: "
        "the device flow in a remote session when the server offers it, else the browser. The default is "
        f"{DEFAULT_SIGN_IN_FLOW}.",
    ),
    "--no-browser": (SIGN_IN, None, "Open no browser: write the sign-in URL to stderr."),
    "--resource-indicator": (
        SIGN_IN,
        "<mode>",
        "The resource parameter (RFC 8707) of the sign-in: auto sends the resource of the server's "
        "metadata, and when the authorization server refuses it (Microsoft Entra ID does on some "
        "endpoints), tries once more without it and remembers that with the stored sign-in; off never "
        "sends it; a URI, for example api://my-server, is sent instead. The default is "
        f"{DEFAULT_RESOURCE_INDICATOR}.",
    ),
    "--sign-in-timeout": (
        SIGN_IN,
        "<s>",
        f"The time in seconds for the sign-in in the browser or with the device code, from 1 to {_M}. "
        f"The default is {settings.DEFAULT_SIGN_IN_TIMEOUT}.",
    ),
    "--all": (LOGOUT, None, "Delete every stored sign-in, of each account."),
    "--json": (CHECK, None, "Write the report as one JSON object on stdout."),
    "--call-tool": (
        CHECK,
        "<name>",
        "Call this tool one time, as VS Code would, and report its answer; without it, check calls "
        "no tool. It tells, for example, whether the tool needs --protocol legacy.",
    ),
    "--call-arguments": (
        CHECK,
        "<json>",
        "The arguments of --call-tool, a JSON object. The default is {}.",
    ),
}


def _paragraphs(text: str) -> str:
    """``text`` with each paragraph on one line: the help wraps it to the terminal."""
    return "\n\n".join(" ".join(paragraph.split("\n")) for paragraph in text.strip().split("\n\n"))


_PROGRAM_HELP = _paragraphs(
    f"""
Connect VS Code (MCP revision 2025-11-25) to an MCP server of revision {MODERN}.

VS Code starts the bridge and speaks to it over stdin and stdout. The bridge starts <command> as the
upstream server and speaks to it over stdio, or it connects to the upstream server at <url> over
Streamable HTTP. The URL uses https, or http with a loopback host such as 127.0.0.1.

The options come first: --name x or --name=x. When an option occurs more than one time, the last
value applies; each --header and --header-env adds one header, each --allow-tool and --deny-tool
one pattern. The arguments after "--" go to
<command> without a change. The URL is the last argument. Never put a secret on the command line:
VS Code writes the command line to its log, and the process list shows it. A static authorization
header and the sign-in options exclude each other.
"""
)

_EPILOG = "\n".join(
    [
        "[bold]Environment variables[/bold]",
        f"{TOKEN_KEY_VARIABLE}: the key of the file store, 64 hexadecimal digits.",
        f"{CLIENT_SECRET_VARIABLE}: the client secret of --client-id (also of --sign-in client-credentials).",
        "HTTPS_PROXY, ALL_PROXY, NO_PROXY: the proxy for <url> and the sign-in. Put the user and the "
        "password of the proxy into its URL. A loopback host never goes through the proxy.",
        "BROWSER: the program that opens the sign-in page.",
        'SANDBOX_RUNTIME: "1" makes each sign-in in a browser fail at once (the device and '
        "client-credentials sign-ins need no browser).",
        "XDG_STATE_HOME, HOME, LOCALAPPDATA: where the file store keeps its directory.",
        "",
        "[bold]Exit codes[/bold]",
        "0: VS Code closed stdin. A failure of <url> does not stop the bridge.",
        "1: the upstream command stopped, or an internal error.",
        "2: the arguments are not valid, a variable of --header-env is missing, the --ca-file is not usable, "
        "the token key options are not usable, or --sign-in client-credentials lacks --client-id or its "
        "secret. (A token store that does not open fails each request "
        "that needs a sign-in.)",
        "check: 0 when the upstream server works, 1 when it does not or the check found a problem, "
        "2 as above.",
    ]
)

_CHECK_HELP = _paragraphs(
    """
Connect to the upstream server one time, report what it found, and exit.

check takes the options of the form that it checks; --discover-timeout bounds the whole check.
Exit codes: 0 when the upstream server works, 1 when it does not or the check found a problem, 2
when the arguments are not valid.
"""
)

_LOGOUT_HELP = _paragraphs(
    """
Delete the stored sign-in of the server at <url>, or every stored sign-in with --all.

Exit codes: 0 when it deleted the sign-in or there was nothing to delete, 1 when a deletion
failed, 2 when the arguments are not valid or a token store that was asked for does not open.
"""
)

#: The names of the help option.
_HELP: Final = ("-h", "--help")
#: The options that answer at once when the parser meets them; the rest of the words then
#: does not count.
_AT_ONCE: Final = frozenset({*_HELP, "--version"})
#: The options of the shell completion (typer's); they take the words as they are.
_COMPLETION: Final = frozenset({"--install-completion", "--show-completion"})
_WORDS_KEY: Final = "mcpbridge.words"
_AT_ONCE_KEY: Final = "mcpbridge.at-once"
_UPSTREAM: Final = "upstream"


# ---------------------------------------------------------------------------------------------
# The words
# ---------------------------------------------------------------------------------------------


def _split(
    args: Sequence[str], takes_value: Callable[[str], bool]
) -> tuple[list[str], tuple[str, ...] | None]:
    """The words for click's parser, and the upstream command after ``--`` (``None`` without it).

    ``takes_value(option)`` is true for an option with a value and false for a flag; it
    raises for an unknown option. The first ``--`` ends the words for the parser, also
    after a word that is not an option: then the rules refuse the two upstream servers.
    """
    index = 0
    while index < len(args):
        word = args[index]
        if word == "--":
            return list(args[:index]), tuple(args[index + 1 :])
        if len(word) < 2 or not word.startswith("-"):
            break
        key, equals, _value = word.partition("=")
        if key in _AT_ONCE:
            if equals:
                raise settings.flag_with_value(key)
            return list(args[: index + 1]), None
        if key in _COMPLETION:
            break
        kind = takes_value(key)
        if not kind and equals:
            raise settings.flag_with_value(key)
        if kind and not equals:
            # A separate value never starts with "--": `--name -- cmd` misses the name.
            if index + 1 >= len(args) or args[index + 1].startswith("--"):
                raise settings.missing_value(key)
            index += 1
        index += 1
    if "--" in args[index:]:
        end = args.index("--", index)
        return list(args[:end]), tuple(args[end + 1 :])
    return list(args), None


def _read_words(command: Command, ctx: Context, args: Sequence[str], subcommand: str | None) -> list[str]:
    """Parse ``args`` with the parser of ``command``; keep the :class:`Words` in ``ctx.meta``."""
    options = {name: p for p in command.params if isinstance(p, TyperOption) for name in p.opts}

    def takes_value(key: str) -> bool:
        param = options.get(key)
        if param is None:
            raise settings.unknown_option(key, _shown_options(command, ctx))
        return not param.is_flag

    head, upstream = _split(args, takes_value)
    values, _rest, order = command.make_parser(ctx).parse_args(list(head))
    pending: dict[str, list[Any]] = {}
    occurrences: list[tuple[str, str | None]] = []
    for param in order:
        if not isinstance(param, TyperOption) or param.name is None:
            continue
        name = max(param.opts, key=len)  # the long name: --help for -h
        if name in _AT_ONCE:
            ctx.meta[_AT_ONCE_KEY] = name
            continue
        if param.is_flag:
            occurrences.append((name, None))
            continue
        if param.name not in pending:
            pending[param.name] = list(values.get(param.name) or ())
        occurrences.append((name, str(pending[param.name].pop(0))))
    positional = tuple(str(word) for word in values.get(_UPSTREAM) or ())
    ctx.meta[_WORDS_KEY] = Words(subcommand, tuple(occurrences), positional, upstream)
    return head


def _parse(command: Command, ctx: Context, args: list[str], subcommand: str | None) -> list[str]:
    """Read the words of ``args`` into ``ctx.meta``; answer ``--help`` and ``--version`` at once.

    click's parser splits the words; the values are left to the rules: typer's own conversion
    of a value would load pydantic, which costs more than the whole start of the bridge.
    """
    _read_words(command, ctx, args, subcommand)
    at_once = ctx.meta.get(_AT_ONCE_KEY)
    if at_once is not None:
        for param in command.get_params(ctx):
            if at_once in param.opts and param.name is not None:
                param.handle_parse_result(ctx, {param.name: True}, [])  # writes and exits
    return []


def _shown_options(command: Command, ctx: Context) -> list[str]:
    """The names of the options that the help of ``command`` shows."""
    return [
        name
        for param in command.get_params(ctx)
        if isinstance(param, TyperOption) and not param.hidden
        for name in param.opts
    ]


def _flags_without_type(params: list[Any]) -> list[Any]:
    """``params`` with no type shown for a flag: typer would show ``<bool>``, which is no value
    that a user types (also for ``--help`` and the completion options that typer adds)."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


def _usage(command: Command, ctx: Context) -> list[str]:
    """The usage line as the README writes it: the options and one upstream (typer would
    write a list of them, ``[<url>]...``)."""
    upstream = next(param for param in command.get_params(ctx) if param.name == _UPSTREAM)
    return [str(command.options_metavar), str(upstream.metavar)]


def _completion(args: Sequence[str]) -> bool:
    """The words ask for the completion script or its installation."""
    return any(word.partition("=")[0] in _COMPLETION for word in args)


class _Program(TyperGroup):
    """The program: the serve forms, unless the first word names a subcommand."""

    def get_params(self, ctx: Context) -> list[Any]:
        params = _flags_without_type(super().get_params(ctx))
        if ctx.command is not self:  # the usage line of a subcommand: no upstream of the program
            return [param for param in params if param.name != _UPSTREAM]
        return params

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        return _usage(self, ctx)

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if args and args[0] in self.commands:
            ctx._protected_args, ctx.args = [args[0]], list(args[1:])
            return ctx.args
        if ctx.resilient_parsing or _completion(args):  # shell completion: typer's own way
            return super().parse_args(ctx, args)
        return _parse(self, ctx, args, None)


class _Subcommand(TyperCommand):
    """``check`` or ``logout``."""

    def get_params(self, ctx: Context) -> list[Any]:
        return _flags_without_type(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        return _usage(self, ctx)

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if ctx.resilient_parsing:
            return super().parse_args(ctx, args)
        return _parse(self, ctx, args, self.name)


# ---------------------------------------------------------------------------------------------
# The app
# ---------------------------------------------------------------------------------------------


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"{PROGRAM} {__version__}")
        raise typer.Exit(0)


def _signature(subcommand: str | None) -> inspect.Signature:
    """The parameters of a command for typer: every option, hidden where the form refuses it."""
    shown = set(settings.options_for(subcommand))
    kind = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("ctx", kind, annotation=typer.Context)]
    for number, name in enumerate(settings.OPTIONS):
        panel, metavar, text = HELP[name]
        hidden = name not in shown
        annotation: object
        info = typer.Option(
            name, metavar=metavar, help=text, rich_help_panel=panel, hidden=hidden, show_default=False
        )
        if metavar is None:
            annotation, default = Annotated[bool, info], False
        else:
            annotation, default = Annotated[Optional[list[str]], info], None  # noqa: UP045 (typer reads it)
        params.append(inspect.Parameter(f"option_{number}", kind, default=default, annotation=annotation))
    version = typer.Option(
        "--version",
        callback=_show_version,
        is_eager=True,
        help="Show the version and exit.",
        rich_help_panel=GENERAL,
    )
    params.append(inspect.Parameter("version", kind, default=False, annotation=Annotated[bool, version]))
    metavar = "(<url> | --all)" if subcommand == "logout" else "(<url> | -- <command> [args...])"
    upstream = typer.Argument(metavar=metavar, show_default=False, hidden=True)
    params.append(
        inspect.Parameter(_UPSTREAM, kind, default=None, annotation=Annotated[Optional[list[str]], upstream])  # noqa: UP045
    )
    return inspect.Signature(params)


def _command(subcommand: str | None) -> Callable[..., Any]:
    """The function of a command; typer reads its parameters from its signature."""

    def run_command(**params: Any) -> int | None:
        ctx = params["ctx"]
        assert isinstance(ctx, Context)
        if subcommand is None and ctx.invoked_subcommand is not None:
            return None
        return run_settings(settings.resolve(ctx.meta[_WORDS_KEY], os.environ))

    run_command.__signature__ = _signature(subcommand)  # type: ignore[attr-defined]
    return run_command


_CONTEXT: Final = {"help_option_names": list(_HELP)}

app: Final = typer.Typer(
    name=PROGRAM,
    cls=_Program,
    help=_PROGRAM_HELP,
    epilog=_EPILOG,
    options_metavar="[options]",
    subcommand_metavar="",
    invoke_without_command=True,
    context_settings=_CONTEXT,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode="rich",
)
app.callback()(_command(None))
app.command(
    "check", cls=_Subcommand, help=_CHECK_HELP, options_metavar="[options]", context_settings=_CONTEXT
)(_command("check"))
app.command(
    "logout", cls=_Subcommand, help=_LOGOUT_HELP, options_metavar="[options]", context_settings=_CONTEXT
)(_command("logout"))


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line and exit the process with its code."""
    from .serving import exit_now

    exit_now(run(list(sys.argv[1:] if argv is None else argv)))


def run(argv: list[str]) -> int:
    """Run the command line; the exit code."""
    subcommand = argv[0] if argv and argv[0] in settings.SUBCOMMANDS else None
    try:
        result = typer.main.get_command(app).main(argv, prog_name=PROGRAM, standalone_mode=False)
    except ArgError as exc:
        return _usage_error(exc.diagnostic, subcommand)
    except UsageError as exc:
        return _usage_error(_arg_error(exc).diagnostic, subcommand)
    except typer.Abort:
        return 1
    return result if isinstance(result, int) else 0


def _arg_error(exc: UsageError) -> ArgError:
    """An error of click's parser in the words of the rules (never a value)."""
    if isinstance(exc, NoSuchOption):
        known = _shown_options(exc.ctx.command, exc.ctx) if exc.ctx is not None else ()
        return settings.unknown_option(exc.option_name, known)
    return ArgError("usage", exc.format_message())


def _usage_error(diagnostic: str, subcommand: str | None) -> int:
    """Two lines on stderr: the problem, and where the usage is."""
    log.write_line("vscode", "error", diagnostic)
    where = f"{PROGRAM} {subcommand} --help" if subcommand else f"{PROGRAM} --help"
    log.write_line("vscode", "error", f'see "{where}"')
    return ArgError.exit_code


#: The proxy variables, whose credentials are secret (the proxy code reads either case).
_PROXY_VARIABLES: Final = ("https_proxy", "http_proxy", "all_proxy")


def register_secrets(parsed: Settings, env: Mapping[str, str]) -> None:
    """Tell the log every secret of the command line and the environment, before anything runs.

    The upstream URL (whole, its credentials, its path and query), each header value, the
    client secret, the token key and the credentials of the proxy variables.
    """
    if parsed.url is not None:
        log.add_url_secrets(parsed.url)
    for header in parsed.headers:
        log.add_secret(header.value)
    log.add_secret(parsed.client_secret)
    if parsed.token_key is not None:
        log.add_secret(parsed.token_key.hex())
        log.add_secret(parsed.token_key.hex().upper())
    log.add_secret(env.get(TOKEN_KEY_VARIABLE))
    for name in _PROXY_VARIABLES:
        for variable in (name, name.upper()):
            proxy = env.get(variable)
            if proxy:  # a proxy URL without a scheme is read as http
                log.add_url_secrets(proxy if "://" in proxy else f"http://{proxy}", whole=False)


def run_settings(parsed: Settings) -> int:
    """Run the form of ``parsed``; the exit code."""
    register_secrets(parsed, os.environ)
    log.configure(parsed.log_level)
    for warning in parsed.warnings:
        logger.warning("%s", warning)
    if parsed.form is settings.Form.COMMAND:
        from .serve_command import serve_command

        return serve_command(parsed)
    if parsed.form is settings.Form.URL:
        from .serve_url import serve_url

        return serve_url(parsed)
    if parsed.form is settings.Form.LOGOUT:
        from .logout import logout

        return logout(parsed)
    from .check import check

    return check(parsed)


def parse(argv: Sequence[str], env: Mapping[str, str]) -> Settings | str:
    """The :class:`Settings` of ``argv``, as the executable finds them, without running anything;
    ``"--help"`` or ``"--version"`` when the executable answers with the help or the version.

    Raises:
        ArgError: as the executable reports it (also for the parser's own errors).
    """
    args = list(argv)
    subcommand = args[0] if args and args[0] in settings.SUBCOMMANDS else None
    group = typer.main.get_command(app)
    assert isinstance(group, _Program)
    command: Command = group.commands[subcommand] if subcommand else group
    rest = args[1:] if subcommand else args
    ctx = command.make_context(PROGRAM, [])
    try:
        _read_words(command, ctx, rest, subcommand)
    except UsageError as exc:
        # Not chained: click's message can quote a word of the command line, and a word at a
        # wrong place can be a secret that the log does not know.
        raise _arg_error(exc) from None
    at_once = ctx.meta.get(_AT_ONCE_KEY)
    if isinstance(at_once, str):
        return at_once
    return settings.resolve(ctx.meta[_WORDS_KEY], env)
