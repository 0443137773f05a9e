"""The root of the errors of the package.

The error tree
--------------

Every error of :mod:`mcpbridge` is a :class:`BridgeError`. Beside its layer
(:class:`~.errors.McpError` for the MCP layer, :class:`mcpbridge.oauth.errors.OAuthError` for the
sign-in), an error says whose fault it is with a second base where that is
clear:

* :class:`LocalFault`: this host failed (a port, a pipe, a keychain, a file);
* :class:`PeerFault`: a peer (the client, the upstream server, the
  authorization server) sent what is not valid, refused, or did not answer;
* :class:`UsageFault`: the configuration, the options, or the caller's input.

An error that wraps a lower-level one chains it (``raise ... from exc``), so
that the debug log shows the cause. The places that print an error (the error
table and the log) remove secrets; an error message itself names no secret.

This module imports nothing, so that every module of the package can use it.
"""

from __future__ import annotations

__all__ = ["BridgeError", "LocalFault", "PeerFault", "UsageFault"]


class BridgeError(Exception):
    """The root of every error of :mod:`mcpbridge`."""


class LocalFault(BridgeError):
    """The fault of this host: a port, a pipe, a keychain, a file."""


class PeerFault(BridgeError):
    """The fault of a peer: it sent what is not valid, refused, or did not answer."""


class UsageFault(BridgeError):
    """The fault of the configuration, the options, or the caller's input."""
