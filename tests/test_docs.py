"""The documentation against the code it describes.

``docs/configuration.rst`` describes every option of each command of ``mcp-bridge-vscode``
and names no other; every ``mcp.json`` example of the pages starts the bridge with valid
settings; ``docs/troubleshooting.rst`` explains every cause of the error table and no other;
each relative link of the pages leads to a file of the repository, and the README links to
every page. The commands are read from the typer app itself, as ``--help`` shows them, and
the causes from the table, so an option or a cause added without its documentation fails
here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer

from conftest import REPO_ROOT
from mcpbridge.bridge.rules.errortable import ERRORS, INTERNAL_CAUSE
from mcpbridge.vscode.app import app
from mcpbridge.vscode.cli import parse
from mcpbridge.vscode.settings import PROGRAM, Header, Settings

DOCS = REPO_ROOT / "docs"
CONFIGURATION = DOCS / "configuration.rst"
TROUBLESHOOTING = DOCS / "troubleshooting.rst"

#: The columns of the table of commands and options on the configuration page, and the
#: subcommand of each (``None``: the serve forms, which take no subcommand word).
COMMANDS: dict[str, str | None] = {"serve": None, "check": "check", "logout": "logout", "secret": "secret"}

_OPTION = re.compile(r"(?<![\w-])(--?[a-z][a-z0-9-]*)")
_LONG_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_CAUSE_TERM = re.compile(r"``([a-z][a-z_]*)``")
_LINK = re.compile(r"`[^`<]*<([^>`]+)>`_|^\.\. _[^:]+: (\S+)$", re.MULTILINE)


def read(path: Path) -> str:
    assert path.is_file(), f"{path.relative_to(REPO_ROOT)} does not exist"
    return path.read_text(encoding="utf-8")


def pages() -> list[Path]:
    """The README, SECURITY.rst and each page of ``docs/``."""
    found = sorted(DOCS.glob("*.rst"))
    assert found, "docs/ has no pages"
    return [REPO_ROOT / "README.rst", REPO_ROOT / "SECURITY.rst", *found]


def command_options(subcommand: str | None) -> set[str]:
    """Every name of every option that the help of a command shows (its hidden ones are refused)."""
    group = typer.main.get_command(app)
    command = group.commands[subcommand] if subcommand is not None else group  # type: ignore[attr-defined]
    names: set[str] = set()
    for param in command.get_params(typer.Context(command, info_name=PROGRAM)):
        if param.param_type_name == "option" and not getattr(param, "hidden", False):
            names.update(param.opts)
            names.update(param.secondary_opts)
    assert names, f"the command {subcommand or PROGRAM} has no options: the walk finds nothing"
    return names


def definition_terms(text: str) -> list[str]:
    """The terms of the definition lists of a page: a line at the margin, its definition indented."""
    lines = text.splitlines()
    return [
        line
        for line, following in zip(lines, lines[1:], strict=False)
        if line[:1] not in ("", " ", "=", "-", "~", ".") and following.startswith("    ")
    ]


def option_table(text: str) -> dict[str, set[str]]:
    """The table of options and commands: each option name and the commands marked ``yes``."""
    lines = text.splitlines()
    header = next(
        (n for n, line in enumerate(lines) if line.split() == ["option", *COMMANDS]),
        None,
    )
    assert header is not None, "the page has no table with the columns option, " + ", ".join(COMMANDS)
    border = lines[header - 1]
    spans = [match.span() for match in re.finditer(r"=+", border)]
    assert len(spans) == 1 + len(COMMANDS), border
    table: dict[str, set[str]] = {}
    for line in lines[header + 2 :]:
        if line.startswith("="):
            break
        cells = [line[start:end].strip() for start, end in spans[:-1]] + [line[spans[-1][0] :].strip()]
        marked = {name for name, cell in zip(COMMANDS, cells[1:], strict=True) if cell == "yes"}
        for option in _OPTION.findall(cells[0]):
            table[option] = marked
    assert table, "the table of options and commands has no rows"
    return table


# ---------------------------------------------------------------------------------------------
# The configuration page
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("column", list(COMMANDS))
def test_the_table_of_the_configuration_page_marks_exactly_the_options_of_each_command(column: str) -> None:
    table = option_table(read(CONFIGURATION))
    marked = {option for option, commands in table.items() if column in commands}
    options = command_options(COMMANDS[column])
    assert sorted(options - marked) == [], f"options of {column} that the table does not mark"
    assert sorted(marked - options) == [], f"options that the table marks for {column}, which it lacks"


def test_the_configuration_page_describes_every_option_and_names_no_other() -> None:
    text = read(CONFIGURATION)
    every = set().union(*(command_options(subcommand) for subcommand in COMMANDS.values()))
    described = {option for term in definition_terms(text) for option in _OPTION.findall(term)}
    assert sorted(every - described) == [], "options without a description on the page"
    named = set(_LONG_OPTION.findall(text))
    assert sorted(named - every) == [], "the page names options that no command has"
    assert sorted(set(option_table(text)) - every) == []


def test_the_option_checks_find_an_option_that_is_missing_and_one_that_does_not_exist() -> None:
    text = read(CONFIGURATION)
    every = set().union(*(command_options(subcommand) for subcommand in COMMANDS.values()))
    without_name = "\n".join(line for line in text.splitlines() if "--name" not in line)
    described = {option for term in definition_terms(without_name) for option in _OPTION.findall(term)}
    assert every - described == {"--name"}
    invented = text + "\nGive ``--colour`` or --frobnicate here.\n"
    named = set(_LONG_OPTION.findall(invented))
    assert named - every == {"--colour", "--frobnicate"}


# ---------------------------------------------------------------------------------------------
# The mcp.json examples
# ---------------------------------------------------------------------------------------------

ANSWER = "6b1f" * 16
"""What the user types at each prompt of an example: 64 hexadecimal digits fit every secret, a key too."""


#: Where each format keeps its servers: ``servers`` in ``mcp.json`` and ``.vscode/mcp.json``,
#: ``mcpServers`` in ``.mcp.json`` and ``~/.copilot/mcp-config.json`` (and other hosts' files).
SERVERS_KEYS = ("servers", "mcpServers")


def mcp_json_blocks(text: str) -> list[dict[str, Any]]:
    """The ``mcp.json`` and ``.mcp.json`` examples of a page: each literal block that is a JSON
    object with servers, under either key."""
    found = []
    for block in re.findall(r"::\n\n((?:    .*\n|\n)+)", text):
        source = "\n".join(line[4:] for line in block.splitlines())
        if source.lstrip().startswith("{") and any(f'"{key}"' in source for key in SERVERS_KEYS):
            found.append(json.loads(source))
    return found


def servers_of(example: dict[str, Any]) -> dict[str, Any]:
    """The servers of an example, under the one key of its format."""
    [key] = [key for key in SERVERS_KEYS if key in example]
    servers: dict[str, Any] = example[key]
    return servers


def answered_env(example: dict[str, Any], server: dict[str, Any]) -> dict[str, str]:
    """The environment that VS Code gives a server: each ``${input:<id>}`` replaced by the answer."""
    env: dict[str, str] = dict(server.get("env", {}))
    for prompt in example.get("inputs", []):
        reference = "${input:" + prompt["id"] + "}"
        env = {name: value.replace(reference, ANSWER) for name, value in env.items()}
    assert "${input:" not in "".join(env.values()), "an example uses an input that it does not declare"
    return env


def bridge_examples() -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    """Each server of an example that starts the bridge: where it is, the server and its environment."""
    found = []
    for page in pages():
        for example in mcp_json_blocks(read(page)):
            for name, server in servers_of(example).items():
                if server["command"] == PROGRAM:
                    found.append((f"{page.name}: {name}", server, answered_env(example, server)))
    return found


def test_every_mcp_json_example_of_the_pages_starts_the_bridge_with_valid_settings() -> None:
    examples = bridge_examples()
    assert len(examples) >= 6
    for where, server, env in examples:
        assert isinstance(parse(server["args"], env), Settings), where


def test_the_pages_show_the_files_of_current_vs_code_first_and_their_entries_start_the_bridge() -> None:
    for page in (REPO_ROOT / "README.rst", DOCS / "hosts.rst"):
        examples = mcp_json_blocks(read(page))
        kinds = [next(key for key in SERVERS_KEYS if key in example) for example in examples]
        assert kinds[:2] == ["mcpServers", "servers"], page.name  # .mcp.json first, then mcp.json
        # Both formats hold the same entries of the bridge.
        assert servers_of(examples[0])["my-server"] == servers_of(examples[1])["my-server"], page.name
    portable = [
        (page.name, server)
        for page in (REPO_ROOT / "README.rst", CONFIGURATION)
        for example in mcp_json_blocks(read(page))
        if "mcpServers" in example and "inputs" not in example
        for server in servers_of(example).values()
        if server["command"] == PROGRAM
    ]
    assert len(portable) >= 3
    for where, server in portable:
        assert server["type"] == "stdio", where
        assert isinstance(parse(server["args"], {}), Settings), where


def test_the_header_secret_example_names_a_stored_secret_and_needs_no_input() -> None:
    examples = [
        example
        for example in mcp_json_blocks(read(CONFIGURATION))
        if "mcpServers" in example and "--header-secret" in json.dumps(example)
    ]
    assert len(examples) == 1
    [example] = examples
    assert "inputs" not in example and "${input:" not in json.dumps(example)
    [server] = servers_of(example).values()
    assert "env" not in server
    parsed = parse(server["args"], {})
    assert isinstance(parsed, Settings)
    [header] = parsed.upstream.headers
    assert (header.name, header.value, header.from_secret) == ("X-Api-Key", "", "example-api-key")
    assert f"{PROGRAM} secret set example-api-key" in read(CONFIGURATION)


def test_every_prompt_of_the_examples_hides_what_the_user_types() -> None:
    prompts = [
        prompt
        for page in pages()
        for example in mcp_json_blocks(read(page))
        for prompt in example.get("inputs", [])
    ]
    assert len(prompts) >= 3
    assert all(prompt["type"] == "promptString" and prompt["password"] is True for prompt in prompts), prompts


def test_the_secret_header_example_sends_the_input_of_vs_code_as_the_header() -> None:
    examples = [example for example in mcp_json_blocks(read(CONFIGURATION)) if "inputs" in example]
    assert len(examples) == 1
    [example] = examples
    [server] = servers_of(example).values()
    env = answered_env(example, server)
    parsed = parse(server["args"], env)
    assert isinstance(parsed, Settings)
    [variable] = env
    assert parsed.upstream.headers == (Header("Authorization", f"Bearer {ANSWER}", variable),)


# ---------------------------------------------------------------------------------------------
# The troubleshooting page
# ---------------------------------------------------------------------------------------------


def cause_terms(text: str) -> set[str]:
    """The causes that a page explains: each term of a definition list that is a cause's name."""
    matches = (_CAUSE_TERM.fullmatch(term.strip()) for term in definition_terms(text))
    return {match.group(1) for match in matches if match}


def test_the_troubleshooting_page_explains_every_cause_of_the_error_table_and_no_other() -> None:
    explained = cause_terms(read(TROUBLESHOOTING))
    causes = set(ERRORS) | {INTERNAL_CAUSE}
    assert sorted(causes - explained) == [], "causes of the error table that the page does not explain"
    assert sorted(explained - causes) == [], "causes on the page that the error table does not have"


def test_the_cause_check_reads_a_term_with_its_definition_only() -> None:
    text = "``timeout``\n    It did not answer.\n\n``closed``\nno definition\n\n  ``rpc``\n    indented\n"
    assert cause_terms(text) == {"timeout"}


# ---------------------------------------------------------------------------------------------
# Links
# ---------------------------------------------------------------------------------------------


def relative_links(text: str) -> list[str]:
    """The targets of the links of a page that point into the repository."""
    targets = [inline or named for inline, named in _LINK.findall(text)]
    return [target for target in targets if not re.match(r"[a-z]+:", target) and not target.endswith("_")]


def section_ids(text: str) -> set[str]:
    """The ids of the sections of a page, as docutils makes them (and a forge links to them)."""
    lines = text.splitlines()
    titles = [
        title
        for title, underline in zip(lines, lines[1:], strict=False)
        if title.strip() and len(underline) >= len(title) and re.fullmatch(r"([=~-])\1+", underline)
    ]
    return {re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") for title in titles}


def test_each_relative_link_of_the_pages_leads_to_a_file_and_section_of_the_repository() -> None:
    checked = 0
    for page in pages():
        for target in relative_links(read(page)):
            file, _, section = target.partition("#")
            path = (page.parent / file).resolve()
            assert path.is_relative_to(REPO_ROOT) and path.exists(), f"{page.name}: {target}"
            if section:
                assert section in section_ids(read(path)), f"{page.name}: {target}"
            checked += 1
    assert checked >= len(pages())


def test_the_section_ids_are_those_of_docutils() -> None:
    text = "Title\n=====\n\nWhat is it waiting for?\n-----------------------\n\nA, b & C\n~~~~~~~~\n\nplain\n"
    assert section_ids(text) == {"title", "what-is-it-waiting-for", "a-b-c"}


def test_the_link_check_reads_inline_and_named_targets_and_skips_urls_and_references() -> None:
    text = (
        "See `the sign-in <docs/signin.rst>`_, `Hiding tools`_ and `MCP <https://modelcontextprotocol.io/>`_.\n"
        ".. _LICENSE: LICENSE\n"
        ".. _site: https://example.org/\n"
    )
    assert relative_links(text) == ["docs/signin.rst", "LICENSE"]


def test_the_readme_links_to_every_page_and_the_license() -> None:
    readme = REPO_ROOT / "README.rst"
    links = {(REPO_ROOT / target.partition("#")[0]).resolve() for target in relative_links(read(readme))}
    wanted = [page for page in pages() if page != readme] + [REPO_ROOT / "LICENSE"]
    assert [path.name for path in wanted if path.resolve() not in links] == []
