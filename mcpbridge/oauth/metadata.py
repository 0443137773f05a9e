"""What the authorizer learned of the servers of its upstream URL, kept for the next sign-in.

The metadata of the protected resource (by the ``resource_metadata`` of a challenge)
and of each authorization server is fetched once (:mod:`.discovery`), and the flow of
a sign-in at each authorization server is chosen once (:func:`.grants.choose_flow`).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..mcp.droplog import DropLog
from . import urls
from .challenge import Challenge
from .config import SignInFlow
from .context import SignInContext
from .errors import DeviceSignInUnavailable
from .flow import ResourceMetadata, ServerMetadata

if TYPE_CHECKING:
    from .grants import FlowChoice

__all__ = ["Metadata"]

log = logging.getLogger("mcpbridge.oauth")


class Metadata:
    """The discovered metadata of one upstream URL and the flow chosen for each authorization server."""

    def __init__(self, context: SignInContext) -> None:
        self._context = context
        #: The lines of a sandbox that blocks a sign-in, which each refused request repeats.
        self._drops = DropLog(log)
        self._lock = threading.Lock()
        # Guarded by _lock:
        self._resources: dict[str | None, ResourceMetadata] = {}
        self._servers: dict[str, ServerMetadata] = {}
        self._choices: dict[str, FlowChoice] = {}

    def discover(self, challenge: Challenge | None) -> tuple[ResourceMetadata, ServerMetadata]:
        """The protected resource of ``challenge`` (or of the upstream URL) and its authorization server."""
        from . import discovery

        source = challenge.resource_metadata if challenge is not None else None
        with self._lock:
            resource = self._resources.get(source)
        if resource is None:
            resource = discovery.discover_resource(self._context.web(), self._context.config.url, source)
            with self._lock:
                self._resources[source] = resource
        return resource, self.server(resource.issuer)

    def server(self, issuer: str) -> ServerMetadata:
        """The metadata of the authorization server ``issuer``."""
        from . import discovery

        with self._lock:
            server = self._servers.get(issuer)
        if server is None:
            local = urls.local_upstream(self._context.config.url)
            server = discovery.discover_server(self._context.web(), issuer, local=local)
            with self._lock:
                self._servers[issuer] = server
        return server

    def flow_choice(self, server: ServerMetadata) -> FlowChoice:
        """The flow of a sign-in at ``server`` and why; logged once per authorization server.

        Raises:
            DeviceSignInUnavailable: ``--sign-in device`` and ``server`` offers no device sign-in.
        """
        from . import grants

        with self._lock:
            known = self._choices.get(server.issuer)
        if known is not None:
            return known
        try:
            choice = grants.choose_flow(
                self._context.config.sign_in, remote=self._context.config.remote, server=server
            )
        except grants.DeviceUnavailable as exc:
            log.warning("the authorization server offers no device sign-in (%s): use --sign-in browser", exc)
            raise DeviceSignInUnavailable(str(exc)) from exc
        with self._lock:
            self._choices[server.issuer] = choice
        log.info("the sign-in uses the %s flow: %s", choice.flow, choice.reason)
        return choice

    def device_after_sandbox(self, server: ServerMetadata) -> bool:
        """Whether a browser sign-in that the sandbox of VS Code blocks goes on with the device
        flow: with ``--sign-in auto``, when ``server`` offers it. Logs the hosts that the
        sandbox must allow either way."""
        from . import grants

        upstream = urlsplit(self._context.config.url).hostname or "?"
        issuer = urlsplit(server.issuer).hostname or "?"
        self._drops(
            logging.WARNING,
            "sign-ins that the sandbox blocks",
            "the sandbox of VS Code blocks the browser and the redirect port of the sign-in; the sandbox "
            "must allow the hosts %s (the upstream server) and %s (the authorization server)",
            upstream,
            issuer,
        )
        flow = self._context.config.sign_in
        if flow is not SignInFlow.AUTO or grants.device_endpoint_problem(server) is not None:
            self._drops(
                logging.WARNING,
                "sign-ins that need the device flow in the sandbox",
                "the sign-in needs --sign-in device, which the authorization server must offer, "
                "or a server entry without sandboxEnabled",
            )
            return False
        log.info("the sign-in uses the device flow: the sandbox of VS Code blocks the browser")
        with self._lock:
            self._choices[server.issuer] = grants.FlowChoice(
                "device", "the sandbox of VS Code blocks the browser"
            )
        return True
