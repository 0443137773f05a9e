"""The shared fixtures: the thread-leak check and the Node.js peers."""

from __future__ import annotations

import subprocess

import pytest

from conftest import REPO_ROOT, WAIT, NodePeers, bridge_cmd


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """A scratch test suite that uses a copy of our conftest, with a short join grace."""
    source = (REPO_ROOT / "tests" / "conftest.py").read_text(encoding="utf-8")
    pytester.makeconftest(source.replace("THREAD_JOIN_GRACE = 5.0", "THREAD_JOIN_GRACE = 0.5"))
    return pytester


def test_a_test_that_leaves_a_bridge_thread_running_fails_and_names_it(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        import threading

        never = threading.Event()

        def test_leaks():
            threading.Thread(target=never.wait, name="mcpbridge-leaky", daemon=True).start()
        """
    )
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*threads still running after the test: mcpbridge-leaky*"])


def test_threads_that_are_finishing_or_not_ours_are_not_leaks(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        import threading

        never = threading.Event()

        def test_stops_its_thread_without_joining():
            stop = threading.Event()
            threading.Thread(target=stop.wait, name="mcpbridge-finishing").start()
            stop.set()

        def test_other_threads_are_not_checked():
            threading.Thread(target=never.wait, name="someone-else", daemon=True).start()
        """
    )
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def version_of(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT * 3, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_bridge_command_runs_the_bridge_with_this_interpreter() -> None:
    assert version_of([*bridge_cmd(), "--version"]) == "mcp-bridge-vscode 0.1.0"


def test_the_node_peers_are_installed_and_the_conformance_suites_run_on_node_22(node: NodePeers) -> None:
    assert version_of([str(node.node22), "--version"]).startswith("v22.")
    assert version_of(node.command(node.conformance, "--version")) == "0.1.16"
    assert version_of(node.command(node.conformance_next, "--version")) == "0.2.0-alpha.12"
    assert version_of(node.command(node.supergateway, "--version")) == "4.0.0"
