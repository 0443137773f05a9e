"""The stderr log: the secret registry and the causes of a failure.

The registry is global to the process and only grows, so each test registers values of
its own that no other test writes.
"""

from __future__ import annotations

import io
import logging
import ssl
import threading
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from mcpbridge import log


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """The ``mcpbridge`` logs go to a text buffer; the handlers are put back after the test."""
    root = logging.getLogger("mcpbridge")
    saved = (list(root.handlers), root.level, root.propagate)
    buffer = io.StringIO()
    yield buffer
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    root.propagate = saved[2]


def three_deep(secret: str) -> RuntimeError:
    """A RuntimeError caused by a ValueError caused by an SSL verification error with ``secret``."""
    try:
        try:
            try:
                raise ssl.SSLCertVerificationError(1, f"certificate verify failed for {secret}")
            except ssl.SSLError as exc:
                raise ValueError("the handshake failed") from exc
        except ValueError:
            raise RuntimeError("the connection failed")  # noqa: B904 - the implicit context is the point
    except RuntimeError as exc:
        return exc


def test_a_registered_secret_is_replaced_also_percent_encoded() -> None:
    secret = "tok/3e7a x+y@z"
    log.add_secret(secret)
    encoded = quote(secret, safe="")
    text = f"a {secret} b {encoded} c {encoded.lower()} d {quote(secret, safe='/:@')}"
    assert log.redact(text) == f"a {log.REDACTED} b {log.REDACTED} c {log.REDACTED} d {log.REDACTED}"
    line = log.format_line("http", "debug", f"the request to {encoded} failed").decode()
    assert line == f"mcp-bridge-vscode: http: debug: the request to {log.REDACTED} failed\n"


def test_a_secret_with_a_tab_is_replaced_before_the_tab_becomes_a_space() -> None:
    log.add_secret("tab\tsecret-5a0c")
    assert log.describe_causes(ValueError("bad tab\tsecret-5a0c")) == f"ValueError: bad {log.REDACTED}"
    line = log.format_line("x", "debug", "tab\tsecret-5a0c").decode()
    assert line == f"mcp-bridge-vscode: x: debug: {log.REDACTED}\n"


def test_a_short_value_is_not_registered() -> None:
    log.add_secret("q7z")
    log.add_secret("")
    log.add_secret(None)
    assert log.redact("q7z q7z") == "q7z q7z"


def test_the_longest_secret_wins() -> None:
    url = "https://h.example/mcp/p-81d0?key=k-81d0-value"
    log.add_url_secrets(url)
    assert log.redact(f"at {url}.") == f"at {log.REDACTED}."
    assert log.redact("url: /mcp/p-81d0?key=k-81d0-value (x)") == f"url: {log.REDACTED} (x)"
    assert log.redact("the key k-81d0-value") == f"the key {log.REDACTED}"
    pool = "HTTPSConnectionPool(host='h.example', port=443): Max retries exceeded"
    assert log.redact(pool) == f"HTTPSConnectionPool({log.REDACTED}): Max retries exceeded"


def test_a_short_path_and_a_short_query_value_stay_common_text() -> None:
    log.add_url_secrets("https://short-e4c2.example/mcp?flag=true")
    assert log.redact("mcpbridge/mcp-bridge-vscode: /mcp true") == "mcpbridge/mcp-bridge-vscode: /mcp true"
    assert log.redact("?flag=true") == f"?{log.REDACTED}"


def test_a_proxy_url_registers_only_its_credentials() -> None:
    log.add_url_secrets("http://proxy-user-6c1:p%40ss-6c1@proxy.example:8080", whole=False)
    assert log.redact("p@ss-6c1 p%40ss-6c1 proxy-user-6c1") == " ".join([log.REDACTED] * 3)
    assert log.redact("proxy.example:8080") == "proxy.example:8080"


def test_registration_from_many_threads_keeps_every_value() -> None:
    values = [f"thread-secret-{n:02d}-4b9e" for n in range(8)]
    barrier = threading.Barrier(len(values))

    def register(value: str) -> None:
        barrier.wait(timeout=10)
        log.add_secret(value)

    threads = [threading.Thread(target=register, args=(v,), name=f"test-secret-{v}") for v in values]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
        assert not thread.is_alive()
    assert log.redact(" ".join(values)) == " ".join([log.REDACTED] * len(values))


def test_the_chain_of_three_names_each_type_and_message_without_the_secret() -> None:
    secret = "cause-secret-0a5f"
    log.add_secret(secret)
    text = log.describe_causes(three_deep(secret))
    assert text == (
        "RuntimeError: the connection failed; caused by: ValueError: the handshake failed; "
        f"SSLCertVerificationError: certificate verify failed for {log.REDACTED}"
    )
    assert log.describe_causes(three_deep(secret), include_self=False).startswith("caused by: ValueError")
    assert log.describe_causes(ValueError("alone"), include_self=False) == ""


def test_a_suppressed_context_and_a_cycle_end_the_chain() -> None:
    try:
        try:
            raise KeyError("hidden")
        except KeyError:
            raise ValueError("shown") from None
    except ValueError as exc:
        assert log.describe_causes(exc) == "ValueError: shown"
    first, second = ValueError("one"), ValueError("two")
    first.__cause__, second.__cause__ = second, first
    assert log.describe_causes(first) == "ValueError: one; caused by: ValueError: two"


def test_the_causes_are_bounded() -> None:
    exc: BaseException = OSError("x" * 5000)
    for n in range(20):
        outer = RuntimeError(f"level {n}")
        outer.__cause__ = exc
        exc = outer
    text = log.describe_causes(exc)
    assert text.count(";") == log.MAX_CAUSES - 1
    assert len(text) < log.MAX_CAUSES * (log.MAX_CAUSE_CHARS + 40)
    line = log.format_line("bridge", "debug", "y" * 10_000 + text)
    assert len(line) <= log.MAX_LINE_BYTES and line.endswith(b"...\n")


def test_a_secret_across_the_cut_leaves_no_part() -> None:
    secret = "cut-secret-d93b-" + "s" * 40
    log.add_secret(secret)
    prefix = "p" * (log.MAX_LINE_BYTES - 60)
    line = log.format_line("bridge", "debug", prefix + secret).decode()
    assert "cut-secret" not in line


def test_the_debug_log_shows_the_causes_and_the_other_levels_do_not(stream: io.StringIO) -> None:
    secret = "handler-secret-7e21"
    log.add_secret(secret)
    failure = three_deep(secret)
    logger = logging.getLogger("mcpbridge.http")
    log.configure("debug", stream)
    logger.debug("the request failed: %s", "server/discover", exc_info=failure)
    logger.warning("the stream failed: %s", failure)
    log.configure("info", stream)
    logger.warning("the stream failed: %s", failure, exc_info=failure)
    lines = stream.getvalue().splitlines()
    assert lines == [
        "mcp-bridge-vscode: http: debug: the request failed: server/discover - RuntimeError: the connection "
        "failed; caused by: ValueError: the handshake failed; SSLCertVerificationError: "
        f"certificate verify failed for {log.REDACTED}",
        "mcp-bridge-vscode: http: warning: the stream failed: the connection failed - caused by: ValueError: "
        f"the handshake failed; SSLCertVerificationError: certificate verify failed for {log.REDACTED}",
        "mcp-bridge-vscode: http: warning: the stream failed: the connection failed",
    ]
    assert "Traceback" not in stream.getvalue()


def test_write_line_replaces_secrets(capfd: pytest.CaptureFixture[str]) -> None:
    log.add_secret("write-line-secret-2c4a")
    log.write_line("vscode", "error", "the value write-line-secret-2c4a is not valid")
    expected = f"mcp-bridge-vscode: vscode: error: the value {log.REDACTED} is not valid\n"
    assert capfd.readouterr().err == expected
