"""The debug log names the cause of a failure, and no secret, from the real executable.

``python -m mcpbridge`` in the URL form connects to an https server on 127.0.0.1 whose
certificate comes from a CA that the bridge does not trust. The URL carries a secret in
its path and its query, and ``--header`` and ``--header-env`` carry one each. urllib3
names the path and the query in its error, which is one of the causes in the log line.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import trustme

from tests.harness import WAIT, Bridge, bridge_command

PATH_SECRET = "log-path-secret-91fe"
QUERY_SECRET = "log-query-secret-91fe"
HEADER_SECRET = "log-header-secret-91fe"
ENV_SECRET = "log-env-secret-91fe"
SECRETS = (PATH_SECRET, QUERY_SECRET, HEADER_SECRET, ENV_SECRET)


@contextmanager
def untrusted_tls_server() -> Iterator[int]:
    """A port on 127.0.0.1 that answers TLS with a certificate of a fresh, untrusted CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    trustme.CA().issue_cert("127.0.0.1").configure_cert(context)
    listener = socket.create_server(("127.0.0.1", 0))
    handshakes = threading.Event()

    def serve() -> None:
        while True:
            try:
                client, _address = listener.accept()
            except OSError:  # the listener closed: the test is over
                return
            with client:
                client.settimeout(WAIT)
                try:
                    context.wrap_socket(client, server_side=True).close()
                except (ssl.SSLError, OSError):
                    handshakes.set()  # the client refused the certificate

    thread = threading.Thread(target=serve, name="test-untrusted-tls", daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
        assert handshakes.is_set(), "the bridge never tried the TLS handshake"
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        listener.close()
        thread.join(timeout=WAIT)
        assert not thread.is_alive()


def run_bridge(port: int, level: str) -> tuple[dict[str, object], str]:
    """Initialize through the bridge at ``level``; the response and the whole output of the bridge."""
    url = f"https://127.0.0.1:{port}/mcp/{PATH_SECRET}?key={QUERY_SECRET}"
    command = bridge_command(
        "--log-level", level, "--header", f"x-tenant:{HEADER_SECRET}",
        "--header-env", "x-api-key=LOG_TEST_KEY", "--discover-timeout", "20", url,
    )  # fmt: skip
    with Bridge(command, {"LOG_TEST_KEY": ENV_SECRET}) as bridge:
        response = bridge.initialize()
    stdout = b"".join(bridge.raw_lines).decode("utf-8", "replace")
    return response, stdout + "".join(bridge.stderr_lines)


def test_the_debug_log_shows_the_certificate_failure_and_no_secret() -> None:
    with untrusted_tls_server() as port:
        response, output = run_bridge(port, "debug")
    error = response["error"]
    assert isinstance(error, dict) and error["data"]["cause"] == "transport_failed", response
    # The first request of --protocol auto is the client's initialize.
    lines = [line for line in output.splitlines() if "initialize failed" in line]
    assert len(lines) == 1, output
    line = lines[0]
    assert "caused by: " in line and "SSLCertVerificationError: " in line, line
    assert "CERTIFICATE_VERIFY_FAILED" in line, line
    assert "Traceback" not in output
    # urllib3 named the path and the query of the URL: the log shows the marker instead.
    assert "[secret]" in line, line
    assert [secret for secret in SECRETS if secret in output] == [], output


def test_the_info_log_keeps_the_failure_line_short() -> None:
    with untrusted_tls_server() as port:
        response, output = run_bridge(port, "info")
    assert "error" in response, response
    lines = [line for line in output.splitlines() if "initialize failed" in line]
    assert len(lines) == 1, output
    assert "caused by" not in lines[0] and "SSL" not in lines[0], lines[0]
    # The line still says what failed, in the words of the bridge.
    assert lines[0].endswith("initialize failed: TLS: the certificate of the server is not trusted"), lines[0]
    assert [secret for secret in SECRETS if secret in output] == [], output
