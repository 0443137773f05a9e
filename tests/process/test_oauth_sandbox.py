"""The sign-in in the sandbox of VS Code: the real executable in front of :class:`AuthServer`.

In the sandbox no browser starts and the redirect port is closed: ``--sign-in auto`` takes
the device flow when the authorization server offers it, else the sign-in fails with the
cause ``sandbox`` and a log line that names the hosts the sandbox must allow.
"""

from __future__ import annotations

import errno

from mcpbridge.oauth.attempt import _refused_by_sandbox
from mcpbridge.oauth.receiver import ListenFailed
from tests.process import test_oauth_device_process as device
from tests.process.test_oauth_device_process import device_lines, sign_in_by_device
from tests.process.test_oauth_process import sign_in_lines

#: The fixtures of the device tests: an authorization server that offers the device sign-in.
ca = device.ca
auth = device.auth
setup = device.setup
SANDBOX = {"SANDBOX_RUNTIME": "1"}


def test_auto_in_the_sandbox_takes_the_device_flow_without_a_browser(setup):
    bridge = setup.bridge(env=SANDBOX)
    assert "result" in sign_in_by_device(setup, bridge)
    assert "the sign-in uses the device flow: a remote session (the sandbox of VS Code" in bridge.stderr_text
    assert setup.browser == [] and sign_in_lines(bridge) == []
    assert setup.auth.authorizations == []


def test_in_the_sandbox_without_a_device_sign_in_the_error_names_the_way_out_and_the_hosts(setup):
    setup.auth.switches.device = False
    bridge = setup.bridge(env=SANDBOX)
    error = bridge.initialize()["error"]
    assert error["data"]["cause"] == "sandbox"
    assert "--sign-in device" in error["message"] and "sandboxEnabled" in error["message"]
    assert setup.browser == [] and device_lines(bridge) == []
    stderr = bridge.stderr_text
    assert "the sandbox must allow the hosts 127.0.0.1 (the upstream server) and 127.0.0.1" in stderr
    assert "the sign-in needs --sign-in device" in stderr


def test_a_redirect_port_that_may_not_be_bound_is_the_sandbox_and_a_low_port_is_not() -> None:
    def failed(code: int) -> ListenFailed:
        try:
            raise ListenFailed("refused") from OSError(code, "refused")
        except ListenFailed as exc:
            return exc

    assert _refused_by_sandbox(failed(errno.EACCES), 41894)
    assert _refused_by_sandbox(failed(errno.EPERM), 41894)
    assert not _refused_by_sandbox(failed(errno.EACCES), 443)  # a port that needs privileges
    assert not _refused_by_sandbox(failed(errno.EADDRNOTAVAIL), 41894)


def test_check_in_the_sandbox_names_the_flow_and_the_hosts_to_allow(setup):
    import json

    done = setup.run("check", "--json", *setup.options(), setup.auth.url, env=SANDBOX)
    flows = json.loads(done.stdout)["signIn"]["flows"]
    assert flows["uses"] == "device", flows
    assert "the sandbox of VS Code (SANDBOX_RUNTIME is set)" in flows["why"]
    assert "the sandbox must allow the hosts 127.0.0.1 (the upstream server) and 127.0.0.1" in flows["why"]
    setup.auth.switches.device = False
    done = setup.run("check", "--json", *setup.options(), setup.auth.url, env=SANDBOX)
    flows = json.loads(done.stdout)["signIn"]["flows"]
    assert flows["uses"] is None and "--sign-in device" in flows["why"], flows
