"""The configurations of "Other hosts" in ``docs/hosts.rst`` work: each starts the bridge as its host would.

Each block is read from the page in its host's format (TOML for Codex CLI, JSON for the
others). A command-form entry starts the real bridge in front of the fixture server, and a
client that names itself and asks for its revision as the host does gets that revision and
the generic profile; a URL-form entry is a valid command line of the URL form.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import pytest

from conftest import REPO_ROOT
from harness import Bridge, bridge_command, fixture_command
from mcpbridge.vscode.cli import parse
from mcpbridge.vscode.settings import Form, Settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the test extras install tomli before 3.11
    import tomli as tomllib

#: For each host of the page: the words before its block, the ``clientInfo.name`` it
#: sends, and the revision it asks for.
HOSTS: dict[str, tuple[str, str, str]] = {
    "Codex CLI": ("Codex CLI, in ``~/.codex/config.toml``", "codex-mcp-client", "2025-06-18"),
    "Cursor": ("Cursor, in ``.cursor/mcp.json``", "cursor-vscode", "2025-06-18"),
    "Claude Desktop": ("Claude Desktop, in ``claude_desktop_config.json``", "claude-ai", "2025-06-18"),
    "Zed": ("Zed, in its ``settings.json``", "Zed", "2025-03-26"),
}
HOSTS_PAGE = REPO_ROOT / "docs" / "hosts.rst"
#: Where each format keeps its servers.
SERVERS_KEYS = ("mcp_servers", "mcpServers", "context_servers")
EXAMPLE_COMMAND = ["--", "python", "-m", "my_server"]


def readme_block(lead: str) -> str:
    """The literal block after the paragraph that starts with ``lead``."""
    text = HOSTS_PAGE.read_text(encoding="utf-8")
    start = text.index(lead)
    block = re.search(r"::\n\n((?:    .*\n|\n)+)", text[start:])
    assert block is not None, f"no literal block after {lead!r}"
    return "\n".join(line[4:] for line in block.group(1).splitlines()).strip()


def servers_of(host: str) -> dict[str, dict[str, Any]]:
    block = readme_block(HOSTS[host][0])
    config = tomllib.loads(block) if host == "Codex CLI" else json.loads(block)
    [key] = [key for key in SERVERS_KEYS if key in config]
    servers: dict[str, dict[str, Any]] = config[key]
    assert servers, host
    return servers


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_each_host_entry_of_the_page_starts_the_bridge_with_the_revision_and_the_profile_of_the_host(
    host: str,
) -> None:
    _, name, revision = HOSTS[host]
    forms = set()
    for server in servers_of(host).values():
        assert server["command"] == "mcp-bridge-vscode", host
        args = [str(word) for word in server["args"]]
        if args[:1] == ["--"]:
            assert args == EXAMPLE_COMMAND
            forms.add("command")
            with Bridge(bridge_command(upstream=fixture_command()), revision=revision) as bridge:
                info = {"name": name, "version": "1.0.0"}
                response = bridge.initialize({}, client_info=info)
                assert response["result"]["protocolVersion"] == revision
                bridge.close_stdin()
                assert bridge.wait_exit() == 0
                assert f"the client MCP {revision}, with the host profile generic" in bridge.stderr_text
        else:
            forms.add("url")
            settings = parse(args, {})
            assert isinstance(settings, Settings) and settings.form is Form.URL
    assert forms, host


def test_the_page_shows_both_forms_across_the_hosts() -> None:
    forms = {
        "command" if server["args"][:1] == ["--"] else "url"
        for host in HOSTS
        for server in servers_of(host).values()
    }
    assert forms == {"command", "url"}
