"""The words of a command line of ``mcp-bridge-vscode``, and the errors of a command line.

This module is pure. :class:`Words` is a command line after the parse of its words and
before the rules of :mod:`mcpbridge.vscode.settings`; :class:`ArgError` is an invalid
command line, with a diagnostic that never holds a value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final

from mcpbridge.mcp.errorbase import UsageFault

from .options import OPTIONS, SUBCOMMANDS

__all__ = [
    "ArgError",
    "Words",
    "closest",
    "flag_with_value",
    "invalid_value",
    "missing_value",
    "plain_words",
    "unknown_option",
]

#: An unknown option is named in the diagnostic only when it looks like an option name; any
#: other text could be a secret typed at the wrong place.
_SHOWN_OPTION = re.compile(r"--[a-z0-9][a-z0-9\-]{0,40}\Z|--?\Z|-[A-Za-z0-9?]\Z")


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
    the usage to stderr (see :func:`~.cli._usage_error`) and exits with :attr:`exit_code`.
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
# Diagnostics
# ---------------------------------------------------------------------------------------------


#: How alike a word and a name must be for "did you mean": a letter or two apart
#: (``--nme``, ``--sign-in-timout``), not a neighbour (``--headless`` and ``--header``).
_CLOSE_RATIO: Final = 0.85


def closest(word: str, names: Iterable[str]) -> str | None:
    """The name of ``names`` that ``word`` misspells, or ``None`` (click's choice: difflib)."""
    import difflib  # only a command line with an error needs it

    close = difflib.get_close_matches(word.lower(), list(names), n=1, cutoff=_CLOSE_RATIO)
    return close[0] if close else None


def unknown_option(key: str, known: Iterable[str] = ()) -> ArgError:
    """The error of an option that is not known; ``key`` is the word up to its first ``=``.

    When ``key`` misspells an option name of ``known``, the error names that option: only
    an option name, never a value.
    """
    close = closest(key, known)
    suggestion = f": did you mean {close}?" if close is not None else ""
    if _SHOWN_OPTION.match(key):
        return ArgError("unknown_option", f"the option {key} is not known{suggestion}", key)
    return ArgError("unknown_option", f'an argument that starts with "-" is not a known option{suggestion}')


def missing_value(option: str) -> ArgError:
    """The error of an option without its value (a separate value never starts with ``--``)."""
    return ArgError("missing_value", f"the option {option} needs a value", option)


def flag_with_value(option: str) -> ArgError:
    """The error of a flag given with ``=value``."""
    return ArgError("invalid_value", f"the value of {option} is not valid: the option takes no value", option)


def invalid_value(option: str, hint: str, header: str | None = None) -> ArgError:
    """The error of a value that its option refuses; ``header`` names the header of a header option."""
    if header is not None:
        return ArgError("invalid_value", f"the header {header} of {option} is not valid: {hint}", option)
    return ArgError("invalid_value", f"the value of {option} is not valid: {hint}", option)


def plain_words(argv: Sequence[str]) -> Words | None:
    """The :class:`Words` of a plain serve command line, or ``None`` for any other.

    A plain one is what ``mcp.json`` holds: options of :data:`.options.OPTIONS` (``--x=v``,
    ``--x v`` with a value that does not start with ``-``, a flag without ``=``), then
    ``--`` and the upstream command, or one last argument that does not start with ``-``
    (the URL). For such a command line, typer's parser finds the same words; every other
    one (a subcommand, ``--help``, ``--version``, the completion, any word that the parser
    must judge) is left to it, so that its answers and its errors stay one.
    """
    if not argv or argv[0] in SUBCOMMANDS:
        return None
    occurrences: list[tuple[str, str | None]] = []
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            return Words(None, tuple(occurrences), (), tuple(argv[index + 1 :]))
        if not word.startswith("-"):
            rest = argv[index:]
            return Words(None, tuple(occurrences), (word,), None) if len(rest) == 1 else None
        key, equals, value = word.partition("=")
        option = OPTIONS.get(key)
        if option is None or (option.flag and equals):
            return None
        if option.flag:
            occurrences.append((key, None))
        elif equals:
            occurrences.append((key, value))
        elif index + 1 < len(argv) and not argv[index + 1].startswith("-"):
            index += 1
            occurrences.append((key, argv[index]))
        else:
            return None
        index += 1
    return None
