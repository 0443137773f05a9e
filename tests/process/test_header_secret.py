"""``secret set/delete/list`` and ``--header-secret``: the real executable, the test keychain
behind keyring's backend seam, and the file store.

The value is written to stdin once; then the URL form sends it as a header to a loopback
server, and it never shows on stderr, even at the debug level, nor on stdout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import WAIT, Bridge, bridge_command
from tests.peers.scripted_http import ScriptedServer, default_script

VALUE = "hdr-secret-5e1b7a9c04"
TOKEN_KEY = "ab" * 32


def keychain_env(tmp_path: Path) -> dict[str, str]:
    return {
        "PYTHON_KEYRING_BACKEND": "tests.oauth_keyring.FileKeyring",
        "MCPBRIDGE_TEST_KEYRING": str(tmp_path / "keychain.json"),
    }


def file_env(tmp_path: Path) -> dict[str, str]:
    # No keychain: the fail backend; the file store with a key, in a state directory of the test.
    return {
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
        "MCP_BRIDGE_TOKEN_KEY": TOKEN_KEY,
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }


def run(env: dict[str, str], *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "mcpbridge", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=WAIT,
        check=False,
    )


def sent_value(env: dict[str, str], *options: str) -> tuple[str | None, str]:
    """The value of X-Api-Key that the upstream server got, and the stderr of the bridge."""
    with ScriptedServer(default_script) as server:
        command = bridge_command(
            "--log-level", "debug", "--header-secret", "X-Api-Key=api-key", *options, server.url()
        )
        with Bridge(command, env=env) as bridge:
            assert "result" in bridge.initialize()
            bridge.close_stdin()
            assert bridge.wait_exit() == 0
            stderr = bridge.stderr_text
            frames = b"".join(bridge.raw_lines).decode("utf-8", "replace")
        assert VALUE not in frames
        return server.wait_requests(1)[0].header("X-Api-Key"), stderr


@pytest.mark.parametrize("store", ["keychain", "file"])
def test_a_secret_set_once_goes_as_the_header_and_never_shows(tmp_path, store):
    env = keychain_env(tmp_path) if store == "keychain" else file_env(tmp_path)
    stored = run(env, "secret", "--log-level", "debug", "set", "api-key", stdin=VALUE + "\n")
    assert stored.returncode == 0, stored.stderr
    assert 'stored the secret "api-key" of the account "default"' in stored.stderr
    assert VALUE not in stored.stderr and VALUE not in stored.stdout
    if store == "keychain":
        text = (tmp_path / "keychain.json").read_text()
        assert VALUE not in text  # base64 of the bytes, as the store keeps it
    listed = run(env, "secret", "list")
    assert listed.returncode == 0 and listed.stdout == "api-key\n"

    value, stderr = sent_value(env)
    assert value == VALUE
    assert VALUE not in stderr

    deleted = run(env, "secret", "delete", "api-key")
    assert deleted.returncode == 0 and 'deleted the secret "api-key"' in deleted.stderr
    assert run(env, "secret", "list").stdout == ""


def test_a_missing_secret_stops_the_start_and_names_the_command_to_run(tmp_path):
    env = keychain_env(tmp_path)
    command = bridge_command(
        "--header-secret", "Authorization=token", "--account", "work", "http://127.0.0.1:9/mcp"
    )
    with Bridge(command, env=env) as bridge:
        assert bridge.wait_exit(WAIT) == 2
        bridge.close_stdin()
        stderr = bridge.stderr_text
    assert (
        'the secret "token" of --header-secret is not stored for the account "work": '
        'run "mcp-bridge-vscode secret set --account work token" and type its value'
    ) in stderr


def test_accounts_keep_their_secrets_apart_and_an_authorization_secret_takes_the_store_options(tmp_path):
    env = keychain_env(tmp_path)
    assert run(env, "secret", "--account", "work", "set", "api-key", stdin=VALUE).returncode == 0
    assert run(env, "secret", "list").stdout == ""
    assert run(env, "secret", "--account", "work", "list").stdout == "api-key\n"
    value, stderr = sent_value(env, "--account", "work", "--token-store", "keychain")
    assert value == VALUE and VALUE not in stderr


def test_secret_refuses_a_value_on_the_command_line_an_empty_value_and_the_memory_store(tmp_path):
    env = keychain_env(tmp_path)
    on_line = run(env, "secret", "set", "api-key", VALUE)
    assert on_line.returncode == 2 and VALUE not in on_line.stderr
    assert "never from the command line" in on_line.stderr
    empty = run(env, "secret", "set", "api-key", stdin="\n")
    assert empty.returncode == 2 and "the value of the secret is empty" in empty.stderr
    memory = run(env, "secret", "--token-store", "memory", "set", "api-key", stdin=VALUE)
    assert memory.returncode == 2 and "the memory store keeps no secret" in memory.stderr
    assert VALUE not in memory.stderr
    no_store = run(
        {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", "XDG_STATE_HOME": str(tmp_path)},
        "secret",
        "set",
        "api-key",
        stdin=VALUE,
    )
    assert no_store.returncode == 2
    assert "the keychain is not available and no token key is set" in no_store.stderr


def test_check_reads_the_secret_too_and_shows_it_nowhere(tmp_path):
    env = keychain_env(tmp_path)
    assert run(env, "secret", "set", "api-key", stdin=VALUE).returncode == 0
    with ScriptedServer(default_script) as server:
        done = run(env, "check", "--log-level", "debug", "--header-secret", "X-Api-Key=api-key", server.url())
        sent = {request.header("X-Api-Key") for request in server.wait_requests(1)}
    assert sent == {VALUE}
    assert VALUE not in done.stdout and VALUE not in done.stderr
    missing = run(env, "check", "--header-secret", "X-Api-Key=other", "http://127.0.0.1:9/mcp")
    assert missing.returncode == 2 and 'run "mcp-bridge-vscode secret set other"' in missing.stderr
