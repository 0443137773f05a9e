"""The executable ``mcp-bridge-vscode``: its command line, and the run of its form.

The serve forms are the default command, thus the entries of VS Code's ``mcp.json``
need no subcommand word::

    mcp-bridge-vscode [options] -- <command> [args...]
    mcp-bridge-vscode [options] <url>
    mcp-bridge-vscode logout [options] (<url> | --all)
    mcp-bridge-vscode check [options] (-- <command> [args...] | <url>)
    mcp-bridge-vscode secret [options] (set <name> | delete <name> | list)
    mcp-bridge-vscode help [check | logout | secret]

``check``, ``logout`` and ``secret`` are subcommands only as the first word; ``help`` as the
first word shows the help of ``--help`` (of the subcommand after it). ``-h`` shows a short
help: the usage and the options that most people need. Each option is declared
once, in :data:`.options.OPTIONS`. A plain serve command line (known options, then ``--``
and the command, or the URL) is read without typer (:func:`.words.plain_words`), so the
bridge starts without loading the machinery of the help; every other command line goes
to the typer app of :mod:`mcpbridge.vscode.app` (click under it), which parses the words,
writes the help and the shell completion. Both read the same words into the same
:class:`.words.Words`; the rules of the values live in :mod:`mcpbridge.vscode.settings`.
Each command declares every option, and hides from its help the ones that its forms do
not take: then the rules, not the parser, refuse them, with the reason.

Exit codes: 0 at the end of stdin; 1 after the loss of the upstream command or an
internal error; 2 for arguments that are not valid (one line with the problem and one
line that points to ``--help`` on stderr).

To add an option: its row in :data:`.options.OPTIONS`, which declares its parsing, its
check and its help.
"""

from __future__ import annotations

import dataclasses
import errno
import gc
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Final

from .. import log
from ..oauth.config import TOKEN_KEY_VARIABLE
from . import settings
from .settings import PROGRAM, ArgError, Settings
from .words import plain_words

__all__ = ["main", "parse", "register_secrets", "run", "run_settings"]

logger = logging.getLogger("mcpbridge.vscode")

#: The variable of click's shell completion for this program: with it set, typer answers.
_COMPLETE_VARIABLE: Final = "_MCP_BRIDGE_VSCODE_COMPLETE"


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line and exit the process with its code.

    The collector waits until the form runs (:func:`run_settings`; a serve form: once its
    modules are frozen, see :func:`.serving.serve`): the start makes many objects and no
    garbage, so each of its passes would be lost time.
    """
    gc.disable()
    try:
        from .serving import exit_now

        code = run(list(sys.argv[1:] if argv is None else argv))
    finally:
        gc.enable()
    exit_now(code)


#: The first word that asks for the help: ``help``, ``help check``, ``help logout``, ``help secret``.
HELP_WORD: Final = "help"


def _help_words(argv: list[str]) -> list[str]:
    """``argv`` with ``help [<subcommand>]`` read as ``[<subcommand>] --help``.

    Raises:
        ArgError: ``help`` with another word.
    """
    if not argv or argv[0] != HELP_WORD:
        return argv
    rest = argv[1:]
    if not rest:
        return ["--help"]
    if len(rest) == 1 and rest[0] in settings.SUBCOMMANDS:
        return [rest[0], "--help"]
    names = ", ".join(settings.SUBCOMMANDS[:-1]) + " and " + settings.SUBCOMMANDS[-1]
    raise ArgError("usage", f"help takes one subcommand or none: the subcommands are {names}")


def run(argv: list[str]) -> int:
    """Run the command line; the exit code."""
    subcommand = argv[0] if argv and argv[0] in settings.SUBCOMMANDS else None
    try:
        argv = _help_words(argv)
        parsed = _read(argv, os.environ)
        if isinstance(parsed, int):
            return parsed
        return _run_form(parsed)
    except ArgError as exc:
        return _usage_error(exc.diagnostic, subcommand)


def _read(argv: list[str], env: Mapping[str, str]) -> Settings | int:
    """The :class:`Settings` of ``argv``, or the exit code once typer answered (see :func:`.app.read`)."""
    words = None if _COMPLETE_VARIABLE in env else plain_words(argv)
    if words is not None:
        return settings.resolve(words, env)
    from .app import read

    return read(argv, env)


def _run_form(parsed: Settings) -> int:
    """:func:`run_settings`, with the exit codes of the end by a signal or a closed stream
    (as click gives them: 130 for Ctrl-C, 1 for end of input at a prompt or a broken pipe)."""
    try:
        return run_settings(parsed)
    except KeyboardInterrupt:
        return 130
    except EOFError:
        sys.stderr.write("\n")
        return 1
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            return 1
        raise


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
    store: settings.Store | None = None
    if isinstance(parsed, (settings.ServeSettings, settings.CheckSettings)):
        upstream = parsed.upstream
        if isinstance(upstream, settings.UrlUpstream):
            log.add_url_secrets(upstream.url)
            for header in upstream.headers:
                log.add_secret(header.value)
            if upstream.sign_in is not None:
                log.add_secret(upstream.sign_in.client_secret)
            store = upstream.store
    else:
        if isinstance(parsed, settings.LogoutSettings) and parsed.url is not None:
            log.add_url_secrets(parsed.url)
        store = parsed.store
    if store is not None and store.token_key is not None:
        log.add_secret(store.token_key.hex())
        log.add_secret(store.token_key.hex().upper())
    log.add_secret(env.get(TOKEN_KEY_VARIABLE))
    for name in _PROXY_VARIABLES:
        for variable in (name, name.upper()):
            proxy = env.get(variable)
            if proxy:  # a proxy URL without a scheme is read as http
                log.add_url_secrets(proxy if "://" in proxy else f"http://{proxy}", whole=False)


def run_settings(parsed: Settings) -> int:
    """Run the form of ``parsed``; the exit code."""
    if not isinstance(parsed, settings.ServeSettings):
        gc.enable()
    register_secrets(parsed, os.environ)
    log.configure(parsed.log_level)
    for warning in parsed.warnings:
        logger.warning("%s", warning)
    if isinstance(parsed, settings.SecretSettings):
        from .secret_command import secret

        return secret(parsed)
    if isinstance(parsed, settings.LogoutSettings):
        from .logout import logout

        return logout(parsed)
    upstream = parsed.upstream
    if isinstance(upstream, settings.UrlUpstream) and any(header.from_secret for header in upstream.headers):
        from .secret_command import with_header_secrets

        resolved = with_header_secrets(upstream)
        if isinstance(resolved, int):
            return resolved
        upstream = resolved
    if isinstance(parsed, settings.CheckSettings):
        from .check import check

        return check(dataclasses.replace(parsed, upstream=upstream))
    if isinstance(upstream, settings.CommandUpstream):
        from .serve_command import serve_command

        return serve_command(upstream, parsed.serving, parsed.log_level)
    from .serve_url import serve_url

    return serve_url(upstream, parsed.serving, parsed.log_level)


def parse(argv: Sequence[str], env: Mapping[str, str]) -> Settings | str:
    """The :class:`Settings` of ``argv``, as the executable finds them, without running anything;
    ``"--help"``, ``"-h"`` or ``"--version"`` when the executable answers with the help, the short
    help or the version.

    Raises:
        ArgError: as the executable reports it (also for the parser's own errors).
    """
    words = plain_words(argv)
    if words is not None:
        return settings.resolve(words, env)
    from .app import parse as parse_with_typer

    return parse_with_typer(argv, env)
