"""The shared fixtures: the thread-leak check, the bounded calls and the Node.js peers."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

from conftest import REPO_ROOT, WAIT, NodePeers, bounded, bridge_cmd, read_line


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


def test_a_bounded_call_gives_what_the_call_returns_or_raises() -> None:
    assert bounded(lambda: 42, "the answer") == 42
    with pytest.raises(KeyError, match="missing"):
        bounded(lambda: {}["missing"], "a lookup")


def test_a_bounded_call_that_does_not_return_in_time_says_what_it_waited_for() -> None:
    never = threading.Event()
    try:
        with pytest.raises(TimeoutError, match=r"^waited 0.1 s for the line 'ready' of the saver$"):
            bounded(never.wait, "the line 'ready' of the saver", 0.1)
    finally:
        never.set()


def test_read_line_reads_the_next_line_of_a_pipe_within_its_bound() -> None:
    read_end, write_end = os.pipe()
    with open(read_end, "rb") as reader, open(write_end, "wb", buffering=0) as writer:
        writer.write(b"one\ntw")
        assert read_line(reader, "the first line") == b"one\n"
        with pytest.raises(TimeoutError, match="for the second line"):
            read_line(reader, "the second line", 0.1)
        writer.close()  # the end of the pipe ends the read that timed out
