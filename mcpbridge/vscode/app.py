"""The typer app of ``mcp-bridge-vscode``: its help, its shell completion, and the command
lines that are not plain.

:mod:`mcpbridge.vscode.cli` reads a plain serve command line by itself (see
:func:`.words.plain_words`); every other command line comes here: a subcommand, ``--help``,
``--version``, the completion, and each one that the parser of click must read to find
its error. The parameters and the help of each command come from the rows of
:data:`.options.OPTIONS`.

Two rules of the words come before click's parser (:func:`_split`): the first ``--``
ends the options and the rest goes to the upstream command unchanged, and a separate
value never starts with ``--`` (``--name -- cmd`` misses the name).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Final, Optional

import typer
from typer.core import TyperCommand, TyperGroup

from .. import __version__
from ..mcp.protocol import MODERN
from ..oauth.config import CLIENT_SECRET_VARIABLE, TOKEN_KEY_VARIABLE
from . import options, settings
from .settings import PROGRAM, ArgError, Settings, Words

__all__ = ["app", "parse", "read", "words"]


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


def _read_words(command: Any, ctx: typer.Context, args: Sequence[str], subcommand: str | None) -> list[str]:
    """Parse ``args`` with the parser of ``command``; keep the :class:`Words` in ``ctx.meta``."""
    options = {name: p for p in command.params if p.param_type_name == "option" for name in p.opts}

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
        if param.param_type_name != "option" or param.name is None:
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


def _parse(command: Any, ctx: typer.Context, args: list[str], subcommand: str | None) -> list[str]:
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


def _shown_options(command: Any, ctx: typer.Context) -> list[str]:
    """The names of the options that the help of ``command`` shows."""
    return [
        name
        for param in command.get_params(ctx)
        if param.param_type_name == "option" and not param.hidden
        for name in param.opts
    ]


def _flags_without_type(params: list[Any]) -> list[Any]:
    """``params`` with no type shown for a flag: typer would show ``<bool>``, which is no value
    that a user types (also for ``--help`` and the completion options that typer adds)."""
    for param in params:
        if param.param_type_name == "option" and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


def _usage(command: Any, ctx: typer.Context) -> list[str]:
    """The usage line as the README writes it: the options and one upstream (typer would
    write a list of them, ``[<url>]...``)."""
    upstream = next(param for param in command.get_params(ctx) if param.name == _UPSTREAM)
    return [str(command.options_metavar), str(upstream.metavar)]


def _completion(args: Sequence[str]) -> bool:
    """The words ask for the completion script or its installation."""
    return any(word.partition("=")[0] in _COMPLETION for word in args)


class _Program(TyperGroup):
    """The program: the serve forms, unless the first word names a subcommand."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = _flags_without_type(super().get_params(ctx))
        if ctx.command is not self:  # the usage line of a subcommand: no upstream of the program
            return [param for param in params if param.name != _UPSTREAM]
        return params

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _usage(self, ctx)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] in self.commands:
            rest = list(args[1:])
            ctx._protected_args, ctx.args = [args[0]], rest
            return rest
        if ctx.resilient_parsing or _completion(args):  # shell completion: typer's own way
            return super().parse_args(ctx, args)
        return _parse(self, ctx, args, None)


class _Subcommand(TyperCommand):
    """``check`` or ``logout``."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_without_type(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _usage(self, ctx)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
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
        row = settings.OPTIONS[name]
        annotation: object
        info = typer.Option(
            name,
            metavar=row.metavar,
            help=row.help,
            rich_help_panel=row.panel,
            hidden=name not in shown,
            show_default=False,
        )
        if row.flag:
            annotation, default = Annotated[bool, info], False
        else:
            annotation, default = Annotated[Optional[list[str]], info], None  # noqa: UP045 (typer reads it)
        params.append(inspect.Parameter(f"option_{number}", kind, default=default, annotation=annotation))
    version = typer.Option(
        "--version",
        callback=_show_version,
        is_eager=True,
        help="Show the version and exit.",
        rich_help_panel=options.GENERAL,
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

    def read_command(**params: Any) -> Settings | None:
        ctx = params["ctx"]
        if subcommand is None and ctx.invoked_subcommand is not None:
            return None
        return settings.resolve(ctx.meta[_WORDS_KEY], ctx.obj)

    read_command.__signature__ = _signature(subcommand)  # type: ignore[attr-defined]
    return read_command


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
# Reading
# ---------------------------------------------------------------------------------------------

#: The error of click's parser. typer exports only its subclass ``BadParameter``; click
#: documents the hierarchy, where ``NoSuchOption`` is one more subclass.
_UsageError: Final[type[Exception]] = next(
    cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "UsageError"
)


def read(argv: list[str], env: Mapping[str, str]) -> Settings | int:
    """The :class:`Settings` of ``argv``; or the exit code after typer answered it (help,
    version, completion) or gave up (an abort).

    Raises:
        ArgError: the command line is not valid (also for click's parser's own errors).
    """
    command = typer.main.get_command(app)
    try:
        result = command.main(argv, prog_name=PROGRAM, standalone_mode=False, obj=env)
    except _UsageError as exc:
        raise _arg_error(exc) from None
    except typer.Abort:
        return 1
    if isinstance(result, Settings):
        return result
    return result if isinstance(result, int) else 0


def _arg_error(exc: Any) -> ArgError:
    """An error of click's parser in the words of the rules (never a value)."""
    if hasattr(exc, "possibilities"):  # click's NoSuchOption
        known = _shown_options(exc.ctx.command, exc.ctx) if exc.ctx is not None else ()
        return settings.unknown_option(exc.option_name, known)
    return ArgError("usage", exc.format_message())


def parse(argv: Sequence[str], env: Mapping[str, str]) -> Settings | str:
    """The :class:`Settings` of ``argv`` as typer's side reads them, without running anything;
    ``"--help"`` or ``"--version"`` when the executable answers with the help or the version.

    Raises:
        ArgError: as the executable reports it (also for the parser's own errors).
    """
    found = words(argv)
    return found if isinstance(found, str) else settings.resolve(found, env)


def words(argv: Sequence[str]) -> Words | str:
    """The :class:`Words` of ``argv`` as typer's side reads them (``"--help"`` or ``"--version"``
    for an answer at once), before the rules.

    Raises:
        ArgError: as the executable reports it.
    """
    args = list(argv)
    subcommand = args[0] if args and args[0] in settings.SUBCOMMANDS else None
    group = typer.main.get_command(app)
    assert isinstance(group, _Program)
    command: Any = group.commands[subcommand] if subcommand else group
    ctx = command.make_context(PROGRAM, [])
    try:
        _read_words(command, ctx, args[1:] if subcommand else args, subcommand)
    except _UsageError as exc:
        # Not chained: click's message can quote a word of the command line, and a word at a
        # wrong place can be a secret that the log does not know.
        raise _arg_error(exc) from None
    at_once = ctx.meta.get(_AT_ONCE_KEY)
    if isinstance(at_once, str):
        return at_once
    words: Words = ctx.meta[_WORDS_KEY]
    return words
