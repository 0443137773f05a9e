"""The troubleshooting page against the words that the user sees.

Each cause of the error table of the bridge (:data:`mcpbridge.bridge.rules.errortable.ERRORS`)
has its message, with its fix, in its entry on ``docs/troubleshooting.rst``, as VS Code
shows it; each problem of the sign-in (:data:`mcpbridge.oauth.errors.SIGN_IN_PROBLEMS`)
is there with its words and what to do, as the ``detail`` of a sign-in error says it; and
each problem that ``mcp-bridge-vscode check`` names
(:data:`mcpbridge.vscode.check_advice.CHECK_PROBLEMS`) is there with its fix, as the text
report of the check shows them. A cause that is missing, or worded otherwise than the code
words it, fails here.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping

from conftest import REPO_ROOT
from mcpbridge.bridge.rules.errortable import ERRORS, INTERNAL_CAUSE, connect_fix, internal_error
from mcpbridge.mcp.protocol import MODERN
from mcpbridge.oauth import identity
from mcpbridge.oauth.errors import SIGN_IN_PROBLEMS, problem_text
from mcpbridge.vscode.check_advice import CHECK_PROBLEMS
from mcpbridge.vscode.options import DEFAULT_SIGN_IN_TIMEOUT

PAGE = REPO_ROOT / "docs" / "troubleshooting.rst"

#: The values that the page shows in the messages with a placeholder: the defaults.
EXAMPLES: Mapping[str, object] = {
    "seconds": DEFAULT_SIGN_IN_TIMEOUT,
    "port": identity.DEFAULT_REDIRECT_PORT,
    "redirect_uri": identity.redirect_uri(identity.DEFAULT_REDIRECT_PORT),
    "name": identity.PROGRAM,
    "versions": MODERN,
}

_TERM = re.compile(r"``([a-z][a-z_]*)``")


def page() -> str:
    assert PAGE.is_file(), "docs/troubleshooting.rst does not exist"
    return PAGE.read_text(encoding="utf-8")


def words(text: str) -> str:
    """``text`` with each run of white space as one space: the words as a reader sees them."""
    return " ".join(text.split())


def cause_entries(text: str) -> dict[str, str]:
    """The entry of each cause on the page: the words of the indented definition of its term."""
    entries: dict[str, str] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = _TERM.fullmatch(line)
        if match is None or i + 1 >= len(lines) or not lines[i + 1].startswith("    "):
            continue
        body: list[str] = []
        for following in lines[i + 1 :]:
            if following and not following.startswith(" "):
                break
            body.append(following)
        entries[match.group(1)] = words("\n".join(body))
    return entries


def section(text: str, title: str) -> str:
    """The words of the section ``title`` of the page, up to the next title."""
    lines = text.splitlines()
    assert title in lines, f"the page has no section {title!r}"
    start = lines.index(title) + 2
    end = next(
        (
            i
            for i in range(start, len(lines) - 1)
            if lines[i] and re.fullmatch(r"([=~-])\1+", lines[i + 1]) and len(lines[i + 1]) >= len(lines[i])
        ),
        len(lines),
    )
    return words("\n".join(lines[start:end]))


def message(cause: str) -> str:
    """The message of ``cause`` as VS Code shows it, with the defaults in its placeholders."""
    if cause == INTERNAL_CAUSE:
        return str(internal_error()["message"])
    template = ERRORS[cause][1]
    return template.format(**EXAMPLES) if "{" in template else template


def missing_messages(text: str) -> list[str]:
    """The causes whose entry on ``text`` lacks their message, as the bridge words it."""
    entries = cause_entries(text)
    causes = [*ERRORS, INTERNAL_CAUSE]
    return [cause for cause in causes if message(cause) not in entries.get(cause, "")]


def test_each_cause_of_the_error_table_has_its_message_and_fix_in_its_entry_on_the_page() -> None:
    assert missing_messages(page()) == []


def test_the_message_check_finds_a_cause_that_is_missing_or_worded_otherwise() -> None:
    text = page()
    timeout = message("timeout")
    assert timeout in cause_entries(text)["timeout"]
    reworded = text.replace(timeout.split(". ")[0], "The upstream server did not answer soon enough")
    assert missing_messages(reworded) == ["timeout"]
    wrapped = "\n    ".join(message("closed").split(" "))
    assert "closed" not in missing_messages(text.replace("``closed``", "``closed``\n    " + wrapped, 1))
    without = re.sub(r"``canceled``\n(    .*\n|\n)*", "", text)
    assert missing_messages(without) == ["canceled"]


def test_the_page_shows_each_message_with_the_defaults_in_its_placeholders() -> None:
    placeholders = {name for _code, template in ERRORS.values() for name in re.findall(r"{(\w+)}", template)}
    assert placeholders == set(EXAMPLES), "a placeholder of the error table without its value on the page"


def test_each_problem_of_the_sign_in_is_on_the_page_with_its_words_and_what_to_do() -> None:
    problems = section(page(), "The problems of the sign-in")
    missing = [key for key in SIGN_IN_PROBLEMS if problem_text(key) not in problems]
    assert missing == []
    assert not any(key in words(page()) for key in SIGN_IN_PROBLEMS), "an internal name of a problem"


def with_marks(template: str) -> str:
    """A problem or a fix of the check as the page shows it: each placeholder as ``<name>``."""
    names = [name for _text, name, _spec, _conversion in string.Formatter().parse(template) if name]
    return template.format(**{name: f"<{name}>" for name in names})


def check_entries() -> list[str]:
    """Each problem of the check with its fix, as the text report shows them: ``- problem fix: fix``.

    The fix of a failed connection is one of :func:`connect_fix`, so that problem comes
    once with each of them.
    """
    entries = []
    for problem, fix in CHECK_PROBLEMS.values():
        fixes = [fix]
        if fix == "{fix}":
            fixes = [connect_fix(refused=r, loopback=lo) for r in (True, False) for lo in (True, False)]
        entries.extend(f"- {with_marks(problem)} fix: {with_marks(each)}" for each in fixes)
    return entries


def test_each_problem_of_the_check_is_on_the_page_with_its_fix() -> None:
    shown = section(page(), "Check the server from a terminal")
    entries = check_entries()
    assert len(entries) == len(CHECK_PROBLEMS) + 3
    assert [entry for entry in entries if words(entry) not in shown] == []


def test_the_check_entries_pair_each_problem_with_its_own_fix() -> None:
    text = page()
    problem, fix = CHECK_PROBLEMS["not_trusted"]
    assert f"- {problem} fix: {fix}" in check_entries()
    other_fix = CHECK_PROBLEMS["wrong_host_name"][1]
    swapped = text.replace(f"fix: {fix}", f"fix: {other_fix}")
    assert swapped != text
    shown = section(swapped, "Check the server from a terminal")
    assert words(f"- {problem} fix: {fix}") not in shown
