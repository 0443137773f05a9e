"""The pure rules of the sign-in: identity, PKCE, URL and metadata checks, records, tokens.

This module does no I/O, starts no thread and reads no clock: the callers pass
the random bytes and the time (``now``, in Unix seconds) in.

The checks follow MCP 2026-07-28 authorization (OAuth 2.1 with PKCE), RFC 9728
(protected resource metadata), RFC 8414 and OpenID discovery (authorization
server metadata), RFC 8707 (``resource``), RFC 9207 (``iss``) and RFC 7591
(dynamic client registration).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from ..mcp.errorbase import PeerFault
from ..mcp.numbers import OutOfRange, peer_seconds
from .errors import InvalidRecord, OAuthError

# ---------------------------------------------------------------------------------------------
# Identity (part of the stored records: never change these)
# ---------------------------------------------------------------------------------------------

PROGRAM: Final = "mcp-bridge-vscode"
#: ``client_name`` of the dynamic registration and of the client ID metadata document.
CLIENT_NAME: Final = "mcp-bridge-vscode (mcpbridge)"
#: The service of the keychain entries.
KEYCHAIN_SERVICE: Final = "mcpbridge/mcp-bridge-vscode"
#: The folders of the file store below the state directory.
TOKEN_DIRECTORY_PARTS: Final = ("mcpbridge", "vscode", "tokens")
#: The key of the index of the stored sign-ins.
INDEX_ISSUER: Final = "urn:mcpbridge:index"
INDEX_CLIENT: Final = PROGRAM
#: The default port of the redirect URI.
DEFAULT_REDIRECT_PORT: Final = 41894

RECORD_VERSION: Final = 1
INDEX_VERSION: Final = 1
MAX_INDEX_ENTRIES: Final = 256
#: A token that expires in less than this many seconds is refreshed first.
REFRESH_MARGIN: Final = 60
#: The longest ``expires_in`` that the bridge accepts from an authorization server: ten years.
MAX_EXPIRES_IN: Final = 10 * 365 * 24 * 3600
#: The longest authorization URL the bridge writes, elicits or opens.
MAX_AUTHORIZATION_URL_BYTES: Final = 8192
#: The size of the client ID metadata document.
MAX_CLIENT_METADATA_BYTES: Final = 5 * 1024

_KEY_DIGEST_DOMAIN: Final = b"mcpbridge token record key 1"


def redirect_uri(port: int) -> str:
    """The redirect URI of the receiver: always the literal loopback address."""
    return f"http://127.0.0.1:{port}/callback"


def base_identity(account: str, redirect: str) -> str:
    """The storage identity of an account: ``mcp-bridge-vscode|<account>|<redirect URI>``."""
    return f"{PROGRAM}|{account}|{redirect}"


def storage_identity(
    account: str, redirect: str, *, client_id: str | None = None, metadata_url: str | None = None
) -> str:
    """The ``client`` of the record key.

    Dynamic registration and the document of the bridge use :func:`base_identity`; a
    pre-registered client adds ``|client=<id>``, another client ID metadata document
    adds ``|cimd=<url>``. Thus the sign-ins of different clients never mix.
    """
    identity = base_identity(account, redirect)
    if client_id is not None:
        return f"{identity}|client={client_id}"
    if metadata_url is not None:
        return f"{identity}|cimd={metadata_url}"
    return identity


def client_metadata_document(url: str, redirect: str = redirect_uri(DEFAULT_REDIRECT_PORT)) -> dict[str, Any]:
    """The client ID metadata document of the bridge, published at ``url`` (its ``client_id``).

    It names only the default redirect URI, has no ``scope`` (the authorization
    server does not limit the scopes) and only the grants of a public native client.
    """
    return {
        "client_id": url,
        "client_name": CLIENT_NAME,
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    }


# ---------------------------------------------------------------------------------------------
# PKCE and random values
# ---------------------------------------------------------------------------------------------


def b64url(data: bytes) -> str:
    """Base64url without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def code_challenge(verifier: str) -> str:
    """The S256 code challenge of a PKCE verifier."""
    return b64url(hashlib.sha256(verifier.encode("ascii")).digest())


# ---------------------------------------------------------------------------------------------
# Records and the index
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordKey:
    """The key of a stored sign-in: the authorization server, the resource, the client."""

    issuer: str
    resource: str
    client: str

    def digest(self) -> bytes:
        """SHA-256 over a domain text and the three parts, each after its length (u64 LE)."""
        h = hashlib.sha256(_KEY_DIGEST_DOMAIN)
        for part in (self.issuer, self.resource, self.client):
            data = part.encode("utf-8")
            h.update(struct.pack("<Q", len(data)))
            h.update(data)
        return h.digest()


def index_key(issuer: str = INDEX_ISSUER) -> RecordKey:
    """The key under which a store keeps its index of the stored sign-ins."""
    return RecordKey(issuer, issuer, INDEX_CLIENT)


@dataclass(frozen=True, slots=True)
class ClientRegistration:
    """The client of a sign-in. A pre-registered secret is never part of a stored record."""

    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    #: ``none``, ``client_secret_basic`` or ``client_secret_post``.
    auth_method: str = "none"


@dataclass(frozen=True, slots=True)
class Record:
    """One stored sign-in. A record without an access token keeps only its registration."""

    key: RecordKey
    registration: ClientRegistration
    access_token: str | None = field(default=None, repr=False)
    #: Unix seconds, or ``None`` when the server gave no lifetime.
    expires_at: int | None = None
    refresh_token: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = ()
    #: The authorization server refused the ``resource`` of RFC 8707 (see
    #: :func:`refuses_resource`): the sign-ins and refreshes of this key go without it.
    without_resource: bool = False

    def usable(self, now: float, margin: float = REFRESH_MARGIN) -> bool:
        """An access token that does not expire within ``margin`` seconds."""
        if not self.access_token:
            return False
        return self.expires_at is None or self.expires_at - now > margin

    def without_tokens(self) -> Record:
        return Record(self.key, self.registration, scopes=self.scopes, without_resource=self.without_resource)


def record_to_json(record: Record) -> bytes:
    """The stored form of a record (version 1); absent values are left out.

    A member that a later version adds is optional, so that the records of the
    earlier versions stay valid (``tests/data/signin-layout-*``), and an earlier
    version reads the new records, leaving out only what it does not know.
    """
    registration: dict[str, Any] = {
        "client_id": record.registration.client_id,
        "auth_method": record.registration.auth_method,
    }
    if record.registration.client_secret is not None:
        registration["client_secret"] = record.registration.client_secret
    obj: dict[str, Any] = {
        "version": RECORD_VERSION,
        "issuer": record.key.issuer,
        "resource": record.key.resource,
        "client": record.key.client,
        "registration": registration,
        "scopes": list(record.scopes),
    }
    if record.access_token is not None:
        obj["access_token"] = record.access_token
    if record.expires_at is not None:
        obj["expires_at"] = record.expires_at
    if record.refresh_token is not None:
        obj["refresh_token"] = record.refresh_token
    if record.without_resource:
        obj["without_resource"] = True
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _optional_str(obj: Mapping[str, Any], name: str) -> str | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidRecord(f"the member {name} is not a text")
    return value


def _required_str(obj: Mapping[str, Any], name: str) -> str:
    value = _optional_str(obj, name)
    if value is None:
        raise InvalidRecord(f"the member {name} is missing")
    return value


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidRecord("not JSON") from exc
    if not isinstance(obj, dict):
        raise InvalidRecord("not a JSON object")
    return obj


def record_from_json(data: bytes, key: RecordKey) -> Record:
    """Read a stored record.

    Raises:
        InvalidRecord: not version 1, not of ``key``, or a member is not valid.
    """
    obj = _json_object(data)
    if obj.get("version") != RECORD_VERSION:
        raise InvalidRecord("another version")
    stored = RecordKey(
        _required_str(obj, "issuer"), _required_str(obj, "resource"), _required_str(obj, "client")
    )
    if stored != key:
        raise InvalidRecord("the record of another key")
    registration = obj.get("registration")
    if not isinstance(registration, dict):
        raise InvalidRecord("the member registration is missing")
    auth_method = _required_str(registration, "auth_method")
    if auth_method not in ("none", "client_secret_basic", "client_secret_post"):
        raise InvalidRecord("an unknown auth_method")
    expires_at = obj.get("expires_at")
    if expires_at is not None and (not isinstance(expires_at, int) or isinstance(expires_at, bool)):
        raise InvalidRecord("the member expires_at is not an integer")
    scopes = obj.get("scopes", [])
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise InvalidRecord("the member scopes is not a list of texts")
    without_resource = obj.get("without_resource", False)
    if not isinstance(without_resource, bool):
        raise InvalidRecord("the member without_resource is not a boolean")
    return Record(
        key=stored,
        registration=ClientRegistration(
            _required_str(registration, "client_id"),
            _optional_str(registration, "client_secret"),
            auth_method,
        ),
        access_token=_optional_str(obj, "access_token"),
        expires_at=expires_at,
        refresh_token=_optional_str(obj, "refresh_token"),
        scopes=tuple(scopes),
        without_resource=without_resource,
    )


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One stored sign-in in the index: the upstream URL and the key of its record."""

    url: str = field(repr=False)
    issuer: str
    resource: str
    client: str

    @property
    def key(self) -> RecordKey:
        return RecordKey(self.issuer, self.resource, self.client)


def index_to_json(entries: Sequence[IndexEntry]) -> bytes:
    obj = {
        "version": INDEX_VERSION,
        "entries": [
            {"url": e.url, "issuer": e.issuer, "resource": e.resource, "client": e.client} for e in entries
        ],
    }
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def index_from_json(data: bytes) -> list[IndexEntry]:
    """Read the index.

    Raises:
        InvalidRecord: the index is not valid.
    """
    obj = _json_object(data)
    if obj.get("version") != INDEX_VERSION or not isinstance(obj.get("entries"), list):
        raise InvalidRecord("not an index of version 1")
    entries: list[IndexEntry] = []
    for item in obj["entries"]:
        if not isinstance(item, dict):
            raise InvalidRecord("an entry is not an object")
        entries.append(
            IndexEntry(
                _required_str(item, "url"),
                _required_str(item, "issuer"),
                _required_str(item, "resource"),
                _required_str(item, "client"),
            )
        )
    return entries[-MAX_INDEX_ENTRIES:]


def index_with(entries: Sequence[IndexEntry], entry: IndexEntry) -> list[IndexEntry]:
    """The index with ``entry`` last; the oldest entries go beyond :data:`MAX_INDEX_ENTRIES`."""
    kept = [e for e in entries if e.key != entry.key or e.url != entry.url]
    kept.append(entry)
    return kept[-MAX_INDEX_ENTRIES:]


def index_without(entries: Sequence[IndexEntry], key: RecordKey) -> list[IndexEntry]:
    return [e for e in entries if e.key != key]


# ---------------------------------------------------------------------------------------------
# URLs
# ---------------------------------------------------------------------------------------------

_NOT_IN_URL: Final = frozenset('"<>\\^`{|}')
_BAD_PERCENT: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
_IPV6_TEXT: Final = re.compile(r"[0-9A-Fa-f:.]+\Z")
_PORT: Final = re.compile(r"[0-9]{1,5}\Z")
_HOST: Final = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=%]+\Z")


def _authority_problem(authority: str) -> str | None:
    if "@" in authority:
        return "it has user information"
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0 or not _IPV6_TEXT.match(authority[1:end]):
            return "its IPv6 address is not valid"
        host, rest = authority[: end + 1], authority[end + 1 :]
        if rest and not rest.startswith(":"):
            return "its host is not valid"
        port = rest[1:] if rest else None
    else:
        host, colon, port_text = authority.partition(":")
        port = port_text if colon else None
        if host and not _HOST.match(host):
            return "its host is not valid"
    if not host:
        return "it has no host"
    if port is not None and (not _PORT.match(port) or not 1 <= int(port) <= 65535):
        return "its port is not valid"
    return None


def url_syntax_problem(url: str, *, max_bytes: int = MAX_AUTHORIZATION_URL_BYTES) -> str | None:
    """Why ``url`` is not a safe https URL (behaviour §7.6), or ``None``.

    Visible ASCII only, none of ``"<>\\^`{|}``, valid ``%XX`` escapes, https, a
    host, no user information, no fragment, a valid port.
    """
    if not url:
        return "it is empty"
    if len(url.encode("utf-8", "surrogatepass")) > max_bytes:
        return f"it is longer than {max_bytes} bytes"
    if not all("!" <= c <= "~" for c in url):
        return "it has a character that is not visible ASCII"
    if any(c in _NOT_IN_URL for c in url):
        return "it has a character that a URL does not allow"
    if _BAD_PERCENT.search(url):
        return "it has a % without two hexadecimal digits"
    if "#" in url:
        return "it has a fragment"
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() != "https":
        return "it does not use https"
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    return _authority_problem(rest[:end])


def authorization_url_problem(url: str, *, expected_redirect_uri: str) -> str | None:
    """Why the bridge must not write, elicit or open ``url``, or ``None``.

    :func:`url_syntax_problem`, then a non-empty ``state`` and the redirect URI of
    the receiver.
    """
    problem = url_syntax_problem(url)
    if problem is not None:
        return problem
    query = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    if not query.get("state"):
        return "it has no state"
    if query.get("redirect_uri") != expected_redirect_uri:
        return "its redirect URI is not the redirect URI of the receiver"
    return None


def https_endpoint(url: Any) -> bool:
    """An endpoint of the authorization server that the bridge may call: https, a safe URL."""
    return isinstance(url, str) and url_syntax_problem(url, max_bytes=4096) is None


def _origin(url: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not scheme or not host:
        return None
    if port is None:
        port = 443 if scheme == "https" else 80 if scheme == "http" else 0
    return scheme, host, port


def covers(resource: str, url: str) -> bool:
    """Whether the ``resource`` of protected resource metadata covers the server URL.

    Same scheme, host and port (case does not matter; the default port may be
    left out), and the path of ``resource`` equals the path of ``url`` or is a
    prefix of it that ends at ``/`` or ``?``.
    """
    a, b = _origin(resource), _origin(url)
    if a is None or b is None or a != b:
        return False
    r, u = urlsplit(resource), urlsplit(url)
    if r.fragment:
        return False
    r_path = r.path + (f"?{r.query}" if r.query else "")
    u_path = u.path + (f"?{u.query}" if u.query else "")
    if r_path in ("", "/") or r_path == u_path:
        return True
    if r_path.endswith("/"):
        return u_path.startswith(r_path)
    return u_path.startswith(r_path) and u_path[len(r_path)] in "/?"


def resource_metadata_candidates(url: str, from_challenge: str | None) -> list[str]:
    """RFC 9728: the ``resource_metadata`` of the challenge, then the well-known URLs."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    found: list[str] = []
    if from_challenge:
        found.append(from_challenge)
    path = parts.path.rstrip("/")
    if path:
        found.append(f"{origin}/.well-known/oauth-protected-resource{path}")
    found.append(f"{origin}/.well-known/oauth-protected-resource")
    return list(dict.fromkeys(found))


def server_metadata_candidates(issuer: str) -> list[str]:
    """RFC 8414 and OpenID discovery URLs of ``issuer``, in the order of MCP 2026-07-28."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if path:
        return [
            f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration",
        ]
    return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]


# ---------------------------------------------------------------------------------------------
# WWW-Authenticate
# ---------------------------------------------------------------------------------------------

_TOKEN_CHARS: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN68_PARAM: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*(?=\s*(,|$))")


@dataclass(frozen=True, slots=True)
class Challenge:
    """The ``Bearer`` challenge of a 401 or 403."""

    params: Mapping[str, str]

    @property
    def resource_metadata(self) -> str | None:
        return self.params.get("resource_metadata") or None

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(self.params.get("scope", "").split())

    @property
    def error(self) -> str | None:
        return self.params.get("error") or None


def _challenges(header: str) -> list[tuple[str, dict[str, str]]]:
    """Split a ``WWW-Authenticate`` value into (scheme, params) pairs (RFC 9110 §11.6.1)."""
    found: list[tuple[str, dict[str, str]]] = []
    i, n = 0, len(header)
    current: dict[str, str] | None = None
    while i < n:
        while i < n and header[i] in " \t,":
            i += 1
        match = _TOKEN_CHARS.match(header, i)
        if match is None:
            break
        word, j = match.group(), match.end()
        k = j
        while k < n and header[k] in " \t":
            k += 1
        if k < n and header[k] == "=" and current is not None:
            k += 1
            while k < n and header[k] in " \t":
                k += 1
            if k < n and header[k] == '"':
                k += 1
                value: list[str] = []
                while k < n and header[k] != '"':
                    if header[k] == "\\" and k + 1 < n:
                        k += 1
                    value.append(header[k])
                    k += 1
                current[word.lower()] = "".join(value)
                i = k + 1
            else:
                value_match = _TOKEN_CHARS.match(header, k)
                current[word.lower()] = value_match.group() if value_match else ""
                i = value_match.end() if value_match else k
        elif k < n and header[k] == "=":
            break
        else:
            current = {}
            found.append((word.lower(), current))
            i = j
            # A token68 after the scheme (``Basic abc==``) is not a parameter: skip it.
            while i < n and header[i] in " \t":
                i += 1
            t68 = _TOKEN68_PARAM.match(header, i)
            if t68 is not None:
                i = t68.end()
    return found


def parse_challenge(header: str | None) -> Challenge | None:
    """The ``Bearer`` challenge of ``header``, or ``None`` when it has none."""
    if not header:
        return None
    for scheme, params in _challenges(header):
        if scheme == "bearer":
            return Challenge(params)
    return None


# ---------------------------------------------------------------------------------------------
# Metadata
# ---------------------------------------------------------------------------------------------


class MetadataProblem(OAuthError, PeerFault):
    """Metadata that the bridge cannot use; the message is a short name (``ResourceMismatch``)."""


@dataclass(frozen=True, slots=True)
class ResourceMetadata:
    """The parts of RFC 9728 protected resource metadata that the bridge uses."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None

    @property
    def issuer(self) -> str:
        return self.authorization_servers[0]


@dataclass(frozen=True, slots=True)
class ServerMetadata:
    """The parts of RFC 8414 authorization server metadata that the bridge uses."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None
    scopes_supported: tuple[str, ...] | None
    token_endpoint_auth_methods: tuple[str, ...]
    client_id_metadata_document_supported: bool
    iss_parameter_supported: bool
    #: RFC 8628 ``device_authorization_endpoint`` as the server wrote it (checked where it is used:
    #: a device endpoint that is not https takes only the device sign-in away).
    device_authorization_endpoint: str | None = None
    #: ``grant_types_supported``, or ``None`` when the server names none.
    grant_types_supported: tuple[str, ...] | None = None
    #: An OpenID provider: its metadata has ``id_token_signing_alg_values_supported`` (which
    #: OpenID Connect Discovery requires) or ``openid`` in ``scopes_supported``.
    openid_provider: bool = False
    #: ``prompt_values_supported``, or ``None`` when the server names none.
    prompt_values_supported: tuple[str, ...] | None = None


def _str_list(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def check_resource_metadata(doc: Any, url: str) -> ResourceMetadata:
    """Check RFC 9728 metadata for the server at ``url``.

    Raises:
        MetadataProblem: ``InvalidResourceMetadata``, ``ResourceMismatch``,
            ``NoAuthorizationServer`` or ``InsecureEndpoint``.
    """
    if not isinstance(doc, dict):
        raise MetadataProblem("InvalidResourceMetadata")
    resource = doc.get("resource")
    if not isinstance(resource, str) or not resource:
        raise MetadataProblem("InvalidResourceMetadata")
    if not covers(resource, url):
        raise MetadataProblem("ResourceMismatch")
    servers = _str_list(doc.get("authorization_servers"))
    if not servers:
        raise MetadataProblem("NoAuthorizationServer")
    if not https_endpoint(servers[0]) or urlsplit(servers[0]).query:
        raise MetadataProblem("InsecureEndpoint")
    return ResourceMetadata(resource, servers, _str_list(doc.get("scopes_supported")))


def check_server_metadata(doc: Any, issuer: str) -> ServerMetadata:
    """Check RFC 8414 (or OpenID) metadata of ``issuer``.

    Raises:
        MetadataProblem: ``InvalidServerMetadata``, ``IssuerMismatch`` (not exactly
            ``issuer``), ``InsecureEndpoint`` or ``NoS256`` (PKCE S256 not offered).
    """
    if not isinstance(doc, dict):
        raise MetadataProblem("InvalidServerMetadata")
    if doc.get("issuer") != issuer:
        raise MetadataProblem("IssuerMismatch")
    authorization = doc.get("authorization_endpoint")
    token = doc.get("token_endpoint")
    if not isinstance(authorization, str) or not isinstance(token, str):
        raise MetadataProblem("InvalidServerMetadata")
    if not https_endpoint(authorization) or not https_endpoint(token):
        raise MetadataProblem("InsecureEndpoint")
    methods = _str_list(doc.get("code_challenge_methods_supported")) or ()
    if "S256" not in methods:
        raise MetadataProblem("NoS256")
    registration = doc.get("registration_endpoint")
    if registration is not None and not isinstance(registration, str):
        raise MetadataProblem("InvalidServerMetadata")
    auth_methods = _str_list(doc.get("token_endpoint_auth_methods_supported"))
    device = doc.get("device_authorization_endpoint")
    scopes = _str_list(doc.get("scopes_supported"))
    return ServerMetadata(
        issuer=issuer,
        authorization_endpoint=authorization,
        token_endpoint=token,
        registration_endpoint=registration,
        scopes_supported=scopes,
        # RFC 8414: client_secret_basic when the server names none.
        token_endpoint_auth_methods=auth_methods if auth_methods is not None else ("client_secret_basic",),
        client_id_metadata_document_supported=doc.get("client_id_metadata_document_supported") is True,
        iss_parameter_supported=doc.get("authorization_response_iss_parameter_supported") is True,
        device_authorization_endpoint=device if isinstance(device, str) and device else None,
        grant_types_supported=_str_list(doc.get("grant_types_supported")),
        openid_provider="id_token_signing_alg_values_supported" in doc or "openid" in (scopes or ()),
        prompt_values_supported=_str_list(doc.get("prompt_values_supported")),
    )


def choose_scopes(
    *,
    challenged: Sequence[str],
    resource: ResourceMetadata,
    server: ServerMetadata,
    previous: Sequence[str] = (),
    step_up: bool = False,
) -> tuple[str, ...]:
    """The scopes of a sign-in.

    The scopes of the challenge, else (not on a step-up) the ``scopes_supported``
    of the resource. A step-up keeps the earlier scopes (the union).
    ``offline_access`` joins when the authorization server lists it. An empty
    result means: send no ``scope``.
    """
    chosen: list[str] = list(previous) if step_up else []
    if challenged:
        chosen += challenged
    elif not step_up and resource.scopes_supported:
        chosen += resource.scopes_supported
    if chosen and server.scopes_supported and "offline_access" in server.scopes_supported:
        chosen.append("offline_access")
    return tuple(dict.fromkeys(s for s in chosen if s))


def consent_prompt(server: ServerMetadata, scopes: Sequence[str]) -> bool:
    """Whether an authorization request for ``scopes`` asks for ``prompt=consent``.

    OpenID Connect Core §11: an OpenID provider grants ``offline_access`` (and with it
    a refresh token) only after a consent prompt, and a certified one drops the scope
    without it: the sign-in would last one access token. Other authorization servers
    get no prompt: they issue refresh tokens by grant type, and a forced consent is a
    page more, or a sign-in that cannot complete where only an administrator consents.
    A provider whose ``prompt_values_supported`` lacks ``consent`` gets none either.
    """
    if "offline_access" not in scopes or not server.openid_provider:
        return False
    values = server.prompt_values_supported
    return values is None or "consent" in values


def build_authorization_url(
    server: ServerMetadata,
    *,
    client_id: str,
    redirect: str,
    state: str,
    challenge: str,
    resource: str | None,
    scopes: Sequence[str],
) -> str:
    """The authorization request (``response_type=code`` with PKCE S256 and ``resource``).

    ``resource`` ``None``: the request has none (the server refused it, or the options).
    ``prompt=consent`` joins when :func:`consent_prompt` says so.
    """
    params = [
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect),
        ("state", state),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
    ]
    if resource is not None:
        params.append(("resource", resource))
    if scopes:
        params.append(("scope", " ".join(scopes)))
    if consent_prompt(server, scopes):
        params.append(("prompt", "consent"))
    query = urlencode(params, quote_via=quote, safe="")
    endpoint = server.authorization_endpoint
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"


# ---------------------------------------------------------------------------------------------
# The redirect
# ---------------------------------------------------------------------------------------------

_ERROR_CODE: Final = re.compile(r"[a-z_]{1,48}\Z")


def error_code(value: Any) -> str | None:
    """An error code of the authorization server, kept only when it is ``[a-z_]{1,48}``."""
    return value if isinstance(value, str) and _ERROR_CODE.match(value) else None


def answer_error(doc: Any) -> str | None:
    """The :func:`error_code` of the ``error`` member of a JSON answer, if the answer is an object."""
    return error_code(doc.get("error")) if isinstance(doc, dict) else None


#: An error description that names the ``resource`` parameter: Microsoft Entra ID's
#: ``AADSTS901002: The 'resource' request parameter is not supported`` and ``AADSTS9010010:
#: The resource parameter provided in the request doesn't match with the requested scopes``.
_NAMES_RESOURCE: Final = re.compile(
    r"""['"`]resource['"`]|\bresource[ _-](?:request[ _-])?(?:parameter|indicator)""", re.IGNORECASE
)


def refuses_resource(error: str | None, description: Any) -> bool:
    """Whether an error answer refuses the ``resource`` of RFC 8707.

    ``invalid_target`` (RFC 8707 §2), or any error whose ``error_description``
    names the parameter. The description is only matched, never logged.
    """
    if error == "invalid_target":
        return True
    return (
        error is not None and isinstance(description, str) and _NAMES_RESOURCE.search(description) is not None
    )


@dataclass(frozen=True, slots=True)
class Redirect:
    """The query of the redirect to the receiver (state already matched)."""

    code: str | None = field(repr=False)
    error: str | None
    iss: str | None
    #: ``error_description``: matched by :func:`refuses_resource`, never shown.
    description: str | None = field(default=None, repr=False)

    @property
    def refuses_resource(self) -> bool:
        return refuses_resource(self.error, self.description)


class RedirectProblem(OAuthError, PeerFault):
    """The redirect is not valid for this sign-in; the message is a short name."""


class AuthorizationDenied(OAuthError, PeerFault):
    """The authorization server answered ``access_denied``."""


class AuthorizationError(OAuthError, PeerFault):
    """Another error of the authorization server; ``code`` is kept when it is a plain code."""

    def __init__(self, code: str | None) -> None:
        super().__init__(code or "unknown")
        self.code = code


def check_redirect(redirect: Redirect, *, issuer: str, iss_required: bool) -> str:
    """The code of a redirect, after the RFC 9207 check of ``iss``.

    ``iss``, when present, must equal ``issuer`` exactly, also in an error
    answer; it must be present when the server advertises it.

    Raises:
        RedirectProblem: ``IssuerMismatch``, ``MissingIssuer`` or ``MissingCode``.
        AuthorizationDenied: ``error=access_denied``.
        AuthorizationError: any other error.
    """
    if redirect.iss is not None:
        if redirect.iss != issuer:
            raise RedirectProblem("IssuerMismatch")
    elif iss_required:
        raise RedirectProblem("MissingIssuer")
    if redirect.error is not None:
        if redirect.error == "access_denied":
            raise AuthorizationDenied()
        raise AuthorizationError(error_code(redirect.error))
    if not redirect.code:
        raise RedirectProblem("MissingCode")
    return redirect.code


# ---------------------------------------------------------------------------------------------
# Registration and tokens
# ---------------------------------------------------------------------------------------------


#: RFC 8628: the grant type of the device authorization grant.
DEVICE_CODE_GRANT: Final = "urn:ietf:params:oauth:grant-type:device_code"


def registration_body(redirect: str, server: ServerMetadata, *, device: bool = False) -> dict[str, Any]:
    """The RFC 7591 request of a public native client with the one redirect URI.

    ``device``: the client also asks for the device authorization grant (RFC 8628).
    """
    grants = ["authorization_code", "refresh_token"] + ([DEVICE_CODE_GRANT] if device else [])
    body: dict[str, Any] = {
        "client_name": CLIENT_NAME,
        "redirect_uris": [redirect],
        "grant_types": grants,
        "response_types": ["code"],
        "application_type": "native",
    }
    if "none" in server.token_endpoint_auth_methods:
        body["token_endpoint_auth_method"] = "none"
    return body


def parse_registration(status: int, doc: Any) -> ClientRegistration:
    """The client of a registration answer.

    Raises:
        RegistrationProblem: not 200/201, or no ``client_id``; the message is the detail.
    """
    if status not in (200, 201) or not isinstance(doc, dict):
        code = answer_error(doc)
        raise RegistrationProblem(f"registration: HTTP status {status}" + (f", error {code}" if code else ""))
    client_id = doc.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise RegistrationProblem(f"registration: HTTP status {status}, no client_id")
    secret = doc.get("client_secret")
    method = doc.get("token_endpoint_auth_method")
    if not isinstance(secret, str) or not secret:
        return ClientRegistration(client_id, None, "none")
    if method not in ("client_secret_basic", "client_secret_post"):
        method = "client_secret_basic"
    return ClientRegistration(client_id, secret, method)


class RegistrationProblem(OAuthError, PeerFault):
    """A refused registration; the message is the detail (``registration: HTTP status 400``)."""


def choose_auth_method(server: ServerMetadata, has_secret: bool) -> str:
    """The token endpoint authentication of a pre-registered client."""
    if not has_secret:
        return "none"
    methods = server.token_endpoint_auth_methods
    if "client_secret_basic" in methods or "client_secret_post" not in methods:
        return "client_secret_basic"
    return "client_secret_post"


def client_authentication(
    registration: ClientRegistration, form: dict[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The form and the headers of a token request with the client's authentication."""
    form = dict(form)
    headers: dict[str, str] = {}
    secret = registration.client_secret
    if secret is not None and registration.auth_method == "client_secret_basic":
        # RFC 6749 §2.3.1: each part form-encoded before the Base64.
        pair = f"{quote(registration.client_id, safe='')}:{quote(secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    else:
        form["client_id"] = registration.client_id
        if secret is not None and registration.auth_method == "client_secret_post":
            form["client_secret"] = secret
    return form, headers


def with_resource(form: dict[str, str], resource: str | None, scopes: Sequence[str] = ()) -> dict[str, str]:
    """``form`` with ``resource`` (RFC 8707) unless it is ``None``, and ``scope`` when there are scopes."""
    if resource is not None:
        form["resource"] = resource
    if scopes:
        form["scope"] = " ".join(scopes)
    return form


_TOKEN68: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*\Z")


@dataclass(frozen=True, slots=True)
class TokenResponse:
    access_token: str = field(repr=False)
    expires_at: int | None
    refresh_token: str | None = field(repr=False)
    scopes: tuple[str, ...] | None


class TokenProblem(OAuthError, PeerFault):
    """A token request that failed.

    ``error`` is the OAuth error code when the server sent a plain one;
    ``str()`` is the detail without a secret (``HTTP status 400, error invalid_grant``).
    """

    def __init__(
        self, status: int, error: str | None, what: str = "", *, refuses_resource: bool = False
    ) -> None:
        text = f"HTTP status {status}" + (f", error {error}" if error else "") + (f", {what}" if what else "")
        super().__init__(text)
        self.status = status
        self.error = error
        #: The server refused the ``resource`` parameter (:func:`refuses_resource`).
        self.refuses_resource = refuses_resource

    @classmethod
    def of_answer(cls, status: int, doc: Any) -> TokenProblem:
        """The problem of an error answer: its plain error code, and whether it refuses ``resource``."""
        code = answer_error(doc)
        description = doc.get("error_description") if isinstance(doc, dict) else None
        return cls(status, code, refuses_resource=refuses_resource(code, description))

    @property
    def drops_tokens(self) -> bool:
        """A refresh error after which only a new grant helps."""
        return self.error in (
            "invalid_grant",
            "unauthorized_client",
            "unsupported_grant_type",
            "invalid_scope",
        )

    @property
    def drops_client(self) -> bool:
        """The server does not know the client any more: register again."""
        return self.error == "invalid_client"


def token_answer(status: int, doc: Any) -> dict[str, Any]:
    """The JSON object of a 200 answer of the token or the device authorization endpoint.

    Raises:
        TokenProblem: another status, or no JSON object (with the error code of the answer).
    """
    if status != 200 or not isinstance(doc, dict):
        raise TokenProblem.of_answer(status, doc)
    return doc


def token_member(status: int, doc: Mapping[str, Any], name: str, pattern: re.Pattern[str]) -> str:
    """The member ``name`` of the answer ``doc``: a string that ``pattern`` matches.

    Raises:
        TokenProblem: ``no valid <name>`` (the message never holds the value).
    """
    value = doc.get(name)
    if not isinstance(value, str) or not pattern.match(value):
        raise TokenProblem(status, None, f"no valid {name}")
    return value


def token_seconds(status: int, doc: Mapping[str, Any], name: str, *, low: float, high: float) -> float | None:
    """The member ``name`` of the answer ``doc`` as seconds in ``[low, high]``; ``None`` when it is absent.

    The number is read with :func:`mcpbridge.mcp.numbers.peer_seconds`: ``1e400``, an integer of
    400 digits, ``NaN``, ``true`` or a negative number is no number of seconds.

    Raises:
        TokenProblem: ``<name> is not a number from <low> to <high>`` (never the value).
    """
    value = doc.get(name)
    if value is None:
        return None
    try:
        return peer_seconds(value, name=name, low=low, high=high)
    except OutOfRange as exc:
        raise TokenProblem(status, None, str(exc)) from exc


def parse_token_response(status: int, doc: Any, now: float) -> TokenResponse:
    """The tokens of a token endpoint answer (RFC 6749 §5).

    ``expires_in``, when the answer has it, is a number of seconds from 0 to :data:`MAX_EXPIRES_IN`.

    Raises:
        TokenProblem: an error answer, or an answer without a usable Bearer token, or with
            an ``expires_in`` out of its range.
    """
    doc = token_answer(status, doc)
    token = token_member(status, doc, "access_token", _TOKEN68)
    token_type = doc.get("token_type")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise TokenProblem(status, None, "not a Bearer token")
    expires_in = token_seconds(status, doc, "expires_in", low=0, high=MAX_EXPIRES_IN)
    refresh = doc.get("refresh_token")
    scope = doc.get("scope")
    return TokenResponse(
        access_token=token,
        expires_at=None if expires_in is None else int(now + expires_in),
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        scopes=tuple(scope.split()) if isinstance(scope, str) else None,
    )


def same_secret(a: str, b: str) -> bool:
    """Compare two secrets in constant time."""
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def union(*groups: Iterable[str]) -> tuple[str, ...]:
    """The scopes of all groups, in first-seen order."""
    return tuple(dict.fromkeys(s for g in groups for s in g if s))
