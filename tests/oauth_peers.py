"""Test peers of the sign-in: an authorization server with a protected MCP endpoint, and a browser.

:class:`AuthServer` serves, on one loopback TLS port (certificates from ``trustme``):

* ``/.well-known/oauth-protected-resource[/mcp]``: RFC 9728 metadata of ``/mcp``;
* ``/.well-known/oauth-authorization-server<issuer path>``: RFC 8414 metadata;
* ``/register`` (RFC 7591), ``/authorize`` (a redirect at once, no page), ``/token``;
* with the switch ``device``: ``/device`` (RFC 8628 device authorization), the device
  grant at ``/token``, the verification page ``/device/verify`` and the test-only
  ``/device/approve`` where the test "person" (:func:`approve`) enters the user code;
* the client credentials grant at ``/token`` for a client with a secret;
* with the switch ``refuse_resource``: the refusals of the ``resource`` parameter that
  Microsoft Entra ID gives (``invalid_target``, or ``invalid_request`` with a description
  that names the parameter) at the authorization, token and device endpoints;
* with the switches ``token_raw`` and ``device_raw``: members of the token and device answers
  written as raw JSON text (``1e400``, 400 digits, ``NaN``), which :mod:`json` cannot write;
* with the switch ``dribble``: the answers of some endpoints sent one byte at a time, a
  pause between two, the head at once (``body``) or byte by byte too (``head``);
* ``POST /mcp``: a 2026-07-28 server that wants a bearer token; ``whoami`` needs
  ``mcp:read``, ``guarded`` needs ``mcp:write`` (a 403 with ``insufficient_scope``).
  With the switch ``legacy`` it is a 2025-11-25 server with the same tools (a session
  id, ``server/discover`` refused with -32601, ``GET`` and ``DELETE`` with 405).

:class:`Switches` make it misbehave. It records every request, so a test can scan
them for secrets and count registrations, authorizations and token requests.

:func:`browser_script` writes a program for ``BROWSER``: it logs its arguments and
follows the start URL and every redirect to the receiver of the bridge.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import socket
import ssl
import stat
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import trustme

from tests.peers.scripted_http import Exchange, ScriptedServer

DISCOVER_RESULT = {
    "resultType": "complete",
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {}},
    "ttlMs": 0,
    "cacheScope": "public",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "oauth-peer", "version": "1.0"}},
}
#: Numbers of a hostile peer, as raw JSON text: none is a number of seconds. :mod:`json` reads
#: ``1e400`` as infinity, ``NaN`` as a float that is not a number, 400 digits as a huge int.
HOSTILE_NUMBERS = (
    "1e400",
    "-1e400",
    "9" * 400,
    "-" + "9" * 400,
    "NaN",
    "Infinity",
    "-Infinity",
    "-1",
    "true",
    '"soon"',
    '"\\u00b2"',
    '"1e3"',
    "[60]",
    '{"seconds": 60}',
)
TOOLS = [
    {"name": "whoami", "inputSchema": {"type": "object"}},
    {"name": "guarded", "inputSchema": {"type": "object"}},
]


class TestCA:
    """A CA, the server context of 127.0.0.1 and localhost, and the CA file for ``--ca-file``."""

    __test__ = False

    def __init__(self, directory: Path) -> None:
        self.ca = trustme.CA()
        cert = self.ca.issue_cert("127.0.0.1", "localhost")
        self.server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        cert.configure_cert(self.server_context)
        self.ca_file = directory / "test-ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context


@dataclass
class Switches:
    """Ways for the authorization server to misbehave (all off by default)."""

    issuer_path: str = ""
    wrong_issuer: bool = False
    no_s256: bool = False
    registration: bool = True
    cimd: bool = False
    iss_supported: bool = True
    send_iss: bool = True
    wrong_iss: bool = False
    bad_state: bool = False
    deny: bool = False
    authorize_error: str | None = None
    #: The authorization server shows a page and never redirects (it forgot the client).
    no_redirect: bool = False
    refresh_error: str | None = None
    token_error: str | None = None
    token_lifetime: int = 3600
    #: The authorization endpoint waits this long before it answers.
    slow_authorize: float = 0.0
    prm_resource: str | None = None
    challenge_scope: str = "mcp:read"
    offline_access: bool = False
    auth_methods: list[str] = field(default_factory=lambda: ["none", "client_secret_basic"])
    #: A second authorization URL in the metadata that the bridge must refuse.
    authorization_endpoint: str | None = None
    #: The upstream refuses every token with 401 (a revoked grant).
    refuse_all: bool = False
    #: The authorization server grants at most these scopes.
    grant_only: set[str] | None = None
    #: The MCP endpoint is a 2025-11-25 server.
    legacy: bool = False
    #: The metadata has a device authorization endpoint (RFC 8628).
    device: bool = False
    #: Another device endpoint in the metadata (one that is not https).
    device_endpoint: str | None = None
    #: The ``interval`` of the device answers (seconds); ``None`` leaves it out.
    device_interval: int | None = 1
    device_expires_in: int = 600
    #: Send no ``verification_uri_complete``.
    device_no_complete: bool = False
    #: The token endpoint answers ``authorization_pending`` to this many polls at least.
    device_pending: int = 0
    #: The token endpoint answers ``slow_down`` to this many polls first.
    device_slow_down: int = 0
    #: The token endpoint answers ``expired_token``.
    device_expired: bool = False
    #: The person refuses: the token endpoint answers ``access_denied`` after the approval.
    device_deny: bool = False
    #: The metadata lists the client credentials grant.
    client_credentials: bool = False
    #: Refuse each request with a ``resource``: ``invalid_target``, or ``described``
    #: (``invalid_request`` with the description of Entra ID's ``AADSTS901002``).
    refuse_resource: str | None = None
    #: The endpoints that refuse it: ``authorize``, ``token`` and ``device``.
    refuse_resource_at: tuple[str, ...] = ("authorize", "token", "device")
    #: Refuse also the requests without a ``resource`` (the sign-in cannot succeed).
    refuse_resource_always: bool = False
    #: Members of the token answers as raw JSON text, in place of their values.
    token_raw: dict[str, str] = field(default_factory=dict)
    #: Members of the device authorization answers as raw JSON text.
    device_raw: dict[str, str] = field(default_factory=dict)
    #: The answers sent one byte at a time: the endpoint (``prm``, ``server``, ``register``,
    #: ``token``, ``device``) to ``body`` (the head at once) or ``head`` (all of it).
    dribble: dict[str, str] = field(default_factory=dict)
    #: The pause between two bytes of a dribbled answer.
    dribble_pause: float = 1.0


@dataclass
class Client:
    client_id: str
    redirect_uris: list[str]
    secret: str | None = None


class AuthServer:
    """The authorization server and the protected MCP endpoint; see the module docstring."""

    def __init__(self, ca: TestCA, switches: Switches | None = None, *, tls: bool = True) -> None:
        """``tls=False``: plain http on 127.0.0.1 (a local test of a sign-in)."""
        self.switches = switches or Switches()
        self.lock = threading.Lock()
        self.clients: dict[str, Client] = {}
        self.codes: dict[str, dict[str, Any]] = {}
        self.access: dict[str, dict[str, Any]] = {}
        self.refresh: dict[str, dict[str, Any]] = {}
        self.registrations: list[dict[str, Any]] = []
        #: Each refusal of a ``resource``: the endpoint and whether the request had one.
        self.resource_refusals: list[tuple[str, bool]] = []
        self.authorizations: list[dict[str, str]] = []
        self.token_requests: list[dict[str, str]] = []
        self.token_headers: list[str | None] = []
        self.issued: list[str] = []
        self.mcp_calls: list[str] = []
        self.device_requests: list[dict[str, str]] = []
        #: Each token request of the device grant: (time.monotonic(), the answer's error or "tokens").
        self.device_polls: list[tuple[float, str]] = []
        #: user_code -> the grant of the device code (approved, client, resource, scope).
        self.device_grants: dict[str, dict[str, Any]] = {}
        self.device_approved = threading.Event()
        #: Set at each answer of the device endpoint.
        #: Set when the server closes: a dribbled answer stops.
        self.closing = threading.Event()
        #: The dribbled answers that ended: the bytes each sent before the client closed it or
        #: the server closed.
        self.dribbles: list[int] = []
        #: Set when a dribbled answer sent its first byte.
        self.dribble_started = threading.Event()
        self.dribble_ended = threading.Condition(self.lock)
        self.server = ScriptedServer(self.handle, ssl_context=ca.server_context if tls else None)
        self.origin = f"{'https' if tls else 'http'}://127.0.0.1:{self.server.port}"

    # ---------------------------------------------------------------- helpers

    @property
    def issuer(self) -> str:
        return self.origin + self.switches.issuer_path

    @property
    def url(self) -> str:
        return self.origin + "/mcp"

    @property
    def prm_url(self) -> str:
        return self.origin + "/.well-known/oauth-protected-resource/mcp"

    def add_client(self, client_id: str, redirect_uri: str, secret: str | None = None) -> None:
        with self.lock:
            self.clients[client_id] = Client(client_id, [redirect_uri], secret)

    def forget_clients(self) -> None:
        with self.lock:
            self.clients.clear()

    def revoke_all(self) -> None:
        with self.lock:
            self.access.clear()

    def expire_all(self) -> None:
        with self.lock:
            for entry in self.access.values():
                entry["expires"] = 0.0

    def close(self) -> None:
        self.closing.set()
        self.server.close()

    def wait_dribbles(self, count: int, timeout: float) -> list[int]:
        """Wait until ``count`` dribbled answers ended (bounded); the bytes each sent."""
        with self.dribble_ended:
            if not self.dribble_ended.wait_for(lambda: len(self.dribbles) >= count, timeout):
                raise TimeoutError(f"{len(self.dribbles)} dribbled answers ended, not {count}")
            return list(self.dribbles)

    def answer(
        self, ex: Exchange, endpoint: str, obj: Any, status: int = 200, raw: dict[str, str] | None = None
    ) -> None:
        """Answer ``obj`` as JSON, its members ``raw`` as raw text, dribbled when the switch says so."""
        body = json_with_raw(obj, raw or {})
        how = self.switches.dribble.get(endpoint)
        if how is None:
            ex.body(status, body, "application/json")
            return
        head = (
            f"HTTP/1.1 {status} Status\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode("latin-1")
        ex.close()
        if how == "body":
            ex.send(head)
            rest = body
        else:
            rest = head + body
        sent = 0
        try:
            for byte in rest:
                if self.closing.wait(self.switches.dribble_pause):
                    break
                ex.send(bytes([byte]))
                sent += 1
                self.dribble_started.set()
        except OSError:
            pass
        finally:
            with self.dribble_ended:
                self.dribbles.append(sent)
                self.dribble_ended.notify_all()

    def secrets_seen(self) -> list[str]:
        """Every token and code that the server issued."""
        with self.lock:
            return list(self.issued)

    # --------------------------------------------------------------- routing

    def handle(self, ex: Exchange) -> None:
        request = ex.request
        path, _, query = request.target.partition("?")
        ex.close()
        sw = self.switches
        if request.method == "GET" and path.startswith("/.well-known/oauth-protected-resource"):
            if path not in (
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource",
            ):
                ex.body(404, b"", "text/plain")
                return
            prm = {
                "resource": sw.prm_resource or self.url,
                "authorization_servers": [self.issuer],
                "scopes_supported": ["mcp:read", "mcp:write"],
            }
            self.answer(ex, "prm", prm)
            return
        if request.method == "GET" and path == "/.well-known/oauth-authorization-server" + sw.issuer_path:
            self.answer(ex, "server", self.metadata())
            return
        if request.method == "POST" and path == "/register":
            self.register(ex)
            return
        if request.method == "GET" and path == "/authorize":
            self.authorize(ex, dict(parse_qsl(query, keep_blank_values=True)))
            return
        if request.method == "POST" and path == "/token":
            self.token(ex)
            return
        if request.method == "POST" and path == "/device":
            self.device_authorization(ex)
            return
        if request.method == "GET" and path == "/device/verify":
            ex.body(200, b"<p>enter the code</p>", "text/html")
            return
        if request.method == "POST" and path == "/device/approve":
            self.device_approve(ex)
            return
        if request.method == "POST" and path == "/mcp":
            self.mcp(ex)
            return
        if request.method in ("GET", "DELETE") and path == "/mcp" and sw.legacy:
            ex.body(405, b"", "text/plain", [("Allow", "POST")])
            return
        ex.body(404, b"not found\n", "text/plain")

    def metadata(self) -> dict[str, Any]:
        sw = self.switches
        scopes = ["mcp:read", "mcp:write"] + (["offline_access"] if sw.offline_access else [])
        doc: dict[str, Any] = {
            "issuer": self.issuer + ("/other" if sw.wrong_issuer else ""),
            "authorization_endpoint": sw.authorization_endpoint or self.origin + "/authorize",
            "token_endpoint": self.origin + "/token",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["plain"] if sw.no_s256 else ["S256"],
            "scopes_supported": scopes,
            "token_endpoint_auth_methods_supported": sw.auth_methods,
            "authorization_response_iss_parameter_supported": sw.iss_supported,
        }
        if sw.registration:
            doc["registration_endpoint"] = self.origin + "/register"
        if sw.cimd:
            doc["client_id_metadata_document_supported"] = True
        if sw.device or sw.device_endpoint:
            doc["device_authorization_endpoint"] = sw.device_endpoint or self.origin + "/device"
            doc["grant_types_supported"].append("urn:ietf:params:oauth:grant-type:device_code")
        if sw.client_credentials:
            doc["grant_types_supported"].append("client_credentials")
        return doc

    def register(self, ex: Exchange) -> None:
        body = ex.request.json or {}
        with self.lock:
            self.registrations.append(body)
        if body.get("application_type") != "native" or not body.get("redirect_uris"):
            ex.json({"error": "invalid_client_metadata"}, 400)
            return
        client_id = "dyn-" + secrets.token_hex(4)
        self.add_client(client_id, body["redirect_uris"][0])
        registered = {"client_id": client_id, "token_endpoint_auth_method": "none", **body}
        self.answer(ex, "register", registered, 201)

    def authorize(self, ex: Exchange, q: dict[str, str]) -> None:
        sw = self.switches
        with self.lock:
            self.authorizations.append(q)
        if sw.slow_authorize:
            threading.Event().wait(sw.slow_authorize)
        client_id = q.get("client_id", "")
        with self.lock:
            client = self.clients.get(client_id)
        cimd_client = sw.cimd and client_id.startswith("https://")
        if sw.no_redirect or (client is None and not cimd_client):
            ex.body(200, b"<p>unknown client</p>", "text/html")
            return
        redirect = q.get("redirect_uri", "")
        if client is not None and redirect not in client.redirect_uris:
            ex.body(400, b"bad redirect_uri", "text/plain")
            return
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge") or not q.get("state"):
            ex.body(400, b"bad request", "text/plain")
            return
        params: dict[str, str] = {"state": "not-the-state" if sw.bad_state else q["state"]}
        refusal = self._resource_refusal("authorize", q)
        if refusal is not None:
            params.update(refusal)
        elif sw.deny:
            params["error"] = "access_denied"
        elif sw.authorize_error:
            params["error"] = sw.authorize_error
        else:
            code = "code-" + secrets.token_urlsafe(16)
            with self.lock:
                self.issued.append(code)
                self.codes[code] = {
                    "client_id": client_id,
                    "redirect_uri": redirect,
                    "challenge": q["code_challenge"],
                    "resource": q.get("resource"),
                    "scope": q.get("scope", ""),
                }
            params["code"] = code
        if sw.send_iss:
            params["iss"] = self.issuer + ("x" if sw.wrong_iss else "")
        ex.head(302, [("Location", f"{redirect}?{urlencode(params)}"), ("Content-Length", "0")])

    def _client_auth(self, ex: Exchange, form: dict[str, str]) -> str | None:
        header = ex.request.header("Authorization")
        with self.lock:
            self.token_headers.append(header)
        if header and header.startswith("Basic "):
            client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
            with self.lock:
                client = self.clients.get(client_id)
            if client is None or client.secret != secret:
                return None
            return client_id
        client_id = form.get("client_id", "")
        with self.lock:
            client = self.clients.get(client_id)
        if client is None:
            return client_id if self.switches.cimd and client_id.startswith("https://") else None
        if client.secret is not None and form.get("client_secret") != client.secret:
            return None
        return client_id

    def token(self, ex: Exchange) -> None:
        sw = self.switches
        form = dict(parse_qsl(ex.request.body.decode(), keep_blank_values=True))
        with self.lock:
            self.token_requests.append(form)
        client_id = self._client_auth(ex, form)
        if client_id is None:
            ex.json({"error": "invalid_client"}, 401)
            return
        refusal = self._resource_refusal("token", form)
        if refusal is not None:
            ex.json(refusal, 400)
            return
        scope = ""
        if form.get("grant_type") == "authorization_code":
            if sw.token_error:
                ex.json({"error": sw.token_error}, 400)
                return
            with self.lock:
                grant = self.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            challenge = (
                base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            )
            if (
                grant is None
                or grant["client_id"] != client_id
                or grant["redirect_uri"] != form.get("redirect_uri")
                or grant["challenge"] != challenge
                or form.get("resource") not in (None, grant["resource"])
            ):
                ex.json({"error": "invalid_grant"}, 400)
                return
            scope = grant["scope"]
            if sw.grant_only is not None:
                scope = " ".join(s for s in scope.split() if s in sw.grant_only)
        elif form.get("grant_type") == "refresh_token":
            if sw.refresh_error:
                ex.json({"error": sw.refresh_error}, 400 if sw.refresh_error != "invalid_client" else 401)
                return
            with self.lock:
                grant = self.refresh.pop(form.get("refresh_token", ""), None)
            if grant is None or grant["client_id"] != client_id:
                ex.json({"error": "invalid_grant"}, 400)
                return
            scope = grant["scope"]
        elif form.get("grant_type") == "urn:ietf:params:oauth:grant-type:device_code":
            answer = self._device_token(form, client_id)
            with self.lock:
                self.device_polls.append((time.monotonic(), answer))
            if answer != "tokens":
                ex.json({"error": answer}, 400)
                return
            with self.lock:
                grant = next(
                    g for g in self.device_grants.values() if g["device_code"] == form["device_code"]
                )
            scope = grant["scope"]
        elif form.get("grant_type") == "client_credentials":
            with self.lock:
                client = self.clients.get(client_id)
            if client is None or client.secret is None:
                ex.json({"error": "unauthorized_client"}, 400)
                return
            if form.get("resource") not in (None, self.url):
                ex.json({"error": "invalid_target"}, 400)
                return
            scope = form.get("scope", "")
            if sw.grant_only is not None:
                scope = " ".join(s for s in scope.split() if s in sw.grant_only)
            self._issue(ex, client_id, scope, with_refresh=False)
            return
        else:
            ex.json({"error": "unsupported_grant_type"}, 400)
            return
        self._issue(ex, client_id, scope)

    def _issue(self, ex: Exchange, client_id: str, scope: str, *, with_refresh: bool = True) -> None:
        sw = self.switches
        access = "at-" + secrets.token_urlsafe(24)
        refresh = "rt-" + secrets.token_urlsafe(24)
        answer: dict[str, Any] = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": sw.token_lifetime,
            "scope": scope,
        }
        with self.lock:
            self.issued += [access, refresh]
            self.access[access] = {"scope": set(scope.split()), "expires": time.time() + sw.token_lifetime}
            if with_refresh:
                self.refresh[refresh] = {"client_id": client_id, "scope": scope}
                answer["refresh_token"] = refresh
        self.answer(ex, "token", answer, raw=sw.token_raw)

    # ---------------------------------------------------------------- the device grant

    def device_authorization(self, ex: Exchange) -> None:
        sw = self.switches
        form = dict(parse_qsl(ex.request.body.decode(), keep_blank_values=True))
        with self.lock:
            self.device_requests.append(form)
        client_id = self._client_auth(ex, form)
        if client_id is None:
            ex.json({"error": "invalid_client"}, 401)
            return
        refusal = self._resource_refusal("device", form)
        if refusal is not None:
            ex.json(refusal, 400)
            return
        device_code = "dc-" + secrets.token_urlsafe(24)
        user_code = "-".join(
            "".join(secrets.choice("BCDFGHJKLMNPQRSTVWXZ") for _ in range(4)) for _ in range(2)
        )
        with self.lock:
            self.issued.append(device_code)
            self.device_grants[user_code] = {
                "device_code": device_code,
                "client_id": client_id,
                "resource": form.get("resource"),
                "scope": form.get("scope", ""),
                "approved": False,
            }
        answer: dict[str, Any] = {
            "device_code": device_code,
            "user_code": user_code,
            "verification_uri": self.origin + "/device/verify",
            "expires_in": sw.device_expires_in,
        }
        if not sw.device_no_complete:
            answer["verification_uri_complete"] = f"{self.origin}/device/verify?user_code={user_code}"
        if sw.device_interval is not None:
            answer["interval"] = sw.device_interval
        self.answer(ex, "device", answer, raw=sw.device_raw)

    def device_approve(self, ex: Exchange) -> None:
        form = dict(parse_qsl(ex.request.body.decode(), keep_blank_values=True))
        with self.lock:
            grant = self.device_grants.get(form.get("user_code", ""))
            if grant is not None:
                grant["approved"] = True
        if grant is None:
            ex.json({"error": "unknown user code"}, 404)
            return
        self.device_approved.set()
        ex.json({"approved": True})

    def _device_token(self, form: dict[str, str], client_id: str) -> str:
        """The answer to one poll: ``tokens`` or an RFC 8628 error code."""
        sw = self.switches
        with self.lock:
            grant = next(
                (g for g in self.device_grants.values() if g["device_code"] == form.get("device_code")), None
            )
            polls = len(self.device_polls)
        if (
            grant is None
            or grant["client_id"] != client_id
            or form.get("resource") not in (None, grant["resource"])
        ):
            return "invalid_grant"
        if sw.device_expired:
            return "expired_token"
        if polls < sw.device_slow_down:
            return "slow_down"
        if polls < sw.device_pending or not grant["approved"]:
            return "authorization_pending"
        if sw.device_deny:
            return "access_denied"
        if grant.get("used"):
            return "invalid_grant"
        with self.lock:
            grant["used"] = True
        return "tokens"

    def _resource_refusal(self, endpoint: str, params: dict[str, str]) -> dict[str, str] | None:
        """The error answer of ``endpoint`` to a request that it refuses for its ``resource``."""
        sw = self.switches
        sent = "resource" in params
        if sw.refuse_resource is None or endpoint not in sw.refuse_resource_at:
            return None
        if not sent and not sw.refuse_resource_always:
            return None
        with self.lock:
            self.resource_refusals.append((endpoint, sent))
        if sw.refuse_resource == "invalid_target":
            return {"error": "invalid_target"}
        return {
            "error": "invalid_request",
            "error_description": "AADSTS901002: The 'resource' request parameter is not supported.",
        }

    def _challenge(self, ex: Exchange, status: int, scope: str, error: str | None = None) -> None:
        params = [f'resource_metadata="{self.prm_url}"', f'scope="{scope}"']
        if error:
            params.insert(0, f'error="{error}"')
        ex.body(status, b"", "text/plain", [("WWW-Authenticate", "Bearer " + ", ".join(params))])

    def mcp(self, ex: Exchange) -> None:
        request = ex.request
        header = request.header("Authorization") or ""
        token = header[7:] if header.startswith("Bearer ") else ""
        with self.lock:
            grant = self.access.get(token)
            self.mcp_calls.append(request.rpc_method or "")
        sw = self.switches
        if grant is None or grant["expires"] < time.time() or sw.refuse_all:
            self._challenge(ex, 401, sw.challenge_scope)
            return
        method = request.rpc_method
        if "id" not in (request.json or {}):
            ex.body(202, b"", "text/plain")
            return
        if sw.legacy:
            self._legacy_mcp(ex, grant)
            return
        if method == "server/discover":
            ex.result(DISCOVER_RESULT)
            return
        if method == "tools/list":
            ex.result({"resultType": "complete", "tools": TOOLS, "ttlMs": 0, "cacheScope": "public"})
            return
        if method == "tools/call":
            name = request.params.get("name")
            if name == "guarded" and "mcp:write" not in grant["scope"]:
                self._challenge(ex, 403, "mcp:write", "insufficient_scope")
                return
            text = "guarded: allowed" if name == "guarded" else "scopes: " + " ".join(sorted(grant["scope"]))
            ex.text_result(text)
            return
        ex.error(-32601, "Method not found", 404)

    def _legacy_mcp(self, ex: Exchange, grant: dict[str, Any]) -> None:
        request = ex.request
        method = request.rpc_method
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "oauth-legacy-peer", "version": "1.0"},
            }
            ex.json(
                {"jsonrpc": "2.0", "id": request.rpc_id, "result": result}, extra=[("Mcp-Session-Id", "s-1")]
            )
            return
        if method == "tools/list":
            ex.result({"tools": TOOLS})
            return
        if method == "tools/call":
            text = "scopes: " + " ".join(sorted(grant["scope"]))
            ex.result({"content": [{"type": "text", "text": text}]})
            return
        ex.error(-32601, "Method not found")


# ---------------------------------------------------------------------------------------------
# The browser
# ---------------------------------------------------------------------------------------------

_BROWSER = """\
import json, os, ssl, sys, urllib.request
log = os.environ["TEST_BROWSER_LOG"]
secret_names = ("MCP_BRIDGE_TOKEN_KEY", "MCP_BRIDGE_CLIENT_SECRET", "TEST_SECRET_HEADER")
present = [n for n in secret_names if n in os.environ]
with open(log, "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "secrets": present}) + "\\n")
mode = os.environ.get("TEST_BROWSER_MODE", "")
if mode == "fail":
    sys.exit(3)
if mode == "ignore":
    sys.exit(0)
if mode == "reuse":
    import http.client, urllib.parse
    target = urllib.parse.urlsplit(sys.argv[1])
    for _ in range(2):
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
        connection.request("GET", target.path)
        answer = connection.getresponse()
        answer.read()
        with open(log + ".statuses", "a") as f:
            f.write(f"{answer.status} {answer.getheader('Location') or ''}\\n")
        connection.close()
    sys.exit(0)
context = ssl.create_default_context(cafile=os.environ["TEST_BROWSER_CA"])
opener = urllib.request.build_opener(
    urllib.request.ProxyHandler({}),
    urllib.request.HTTPSHandler(context=context),
    urllib.request.HTTPCookieProcessor(),
)
if mode == "person":
    # A person at the pages of the sign-in: each page with a form gets it sent, every text and
    # password field filled in (the login form, then the consent form), until a page has none.
    import html, re, urllib.parse
    answer = opener.open(sys.argv[1], timeout=10)
    for _ in range(10):
        page = answer.read().decode("utf-8", "replace")
        form = re.search(r'<form[^>]*action="([^"]*)"[^>]*method="post"', page)
        if form is None:
            break
        fields = {}
        for tag in re.findall(r"<input[^>]*>", page):
            name = re.search(r'name="([^"]*)"', tag)
            value = re.search(r'value="([^"]*)"', tag)
            if name is not None:
                fields[name.group(1)] = html.unescape(value.group(1)) if value else "alice"
        action = urllib.parse.urljoin(answer.geturl(), html.unescape(form.group(1)))
        answer = opener.open(action, data=urllib.parse.urlencode(fields).encode(), timeout=10)
    with open(log + ".pages", "a") as f:
        f.write(f"{answer.status} {answer.geturl().split('?')[0]}\\n")
    sys.exit(0)
visits = 2 if mode == "twice" else 1
for _ in range(visits):
    try:
        opener.open(sys.argv[1], timeout=10).read()
    except Exception as exc:
        with open(log + ".errors", "a") as f:
            f.write(type(exc).__name__ + "\\n")
"""


def browser_script(directory: Path) -> Path:
    """Write the browser program; its environment needs ``TEST_BROWSER_LOG`` and ``TEST_BROWSER_CA``."""
    path = directory / "test-browser"
    path.write_text(f"#!{sys.executable}\n" + _BROWSER)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def browser_calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def visit(url: str, ca: TestCA) -> int:
    """Be the browser for one URL (``--no-browser`` or a URL elicitation): follow every redirect."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ca.client_context())
    )
    try:
        with opener.open(url, timeout=10) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def approve(origin: str, user_code: str, ca: TestCA) -> int:
    """Be the person: enter ``user_code`` at the authorization server (the test-only endpoint)."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ca.client_context())
    )
    data = urlencode({"user_code": user_code}).encode()
    try:
        with opener.open(origin + "/device/approve", data=data, timeout=10) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def json_with_raw(obj: dict[str, Any], raw: dict[str, str]) -> bytes:
    """``obj`` as JSON, with the members of ``raw`` written as their raw text (in place of a value)."""
    kept = {k: v for k, v in obj.items() if k not in raw}
    text = json.dumps(kept)
    extra = "".join(f", {json.dumps(k)}: {v}" for k, v in raw.items())
    if not kept:
        extra = extra[2:]
    return (text[:-1] + extra + "}").encode()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def query_of(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
