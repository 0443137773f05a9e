"""The pure rules of the sign-in (mcpbridge.oauth.flow): identity, URLs, metadata, records, tokens."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from mcpbridge.oauth import flow, identity, stored, urls
from mcpbridge.oauth import tokens as token_rules
from mcpbridge.oauth.challenge import parse_challenge
from mcpbridge.oauth.errors import InvalidRecord
from mcpbridge.vscode import settings as args
from tests.oauth_peers import HOSTILE_NUMBERS

ROOT = Path(__file__).resolve().parents[2]
REDIRECT = "http://127.0.0.1:41894/callback"
GOOD = (
    "https://as.example.com/authorize?response_type=code&client_id=abc&state=s1"
    f"&redirect_uri={REDIRECT.replace(':', '%3A').replace('/', '%2F')}&code_challenge=x"
)


def server(**changes: object) -> flow.ServerMetadata:
    doc: dict[str, object] = {
        "issuer": "https://as.example.com",
        "authorization_endpoint": "https://as.example.com/authorize",
        "token_endpoint": "https://as.example.com/token",
        "code_challenge_methods_supported": ["S256"],
    }
    doc.update(changes)
    return flow.check_server_metadata(doc, "https://as.example.com")


def resource(scopes: list[str] | None = None) -> flow.ResourceMetadata:
    doc: dict[str, object] = {
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": ["https://as.example.com"],
    }
    if scopes is not None:
        doc["scopes_supported"] = scopes
    return flow.check_resource_metadata(doc, "https://mcp.example.com/mcp")


# --------------------------------------------------------------------------------- identity


def test_the_identity_names_mcpbridge_and_never_the_original_project():
    assert identity.CLIENT_NAME == "mcp-bridge-vscode (mcpbridge)"
    assert identity.KEYCHAIN_SERVICE == "mcpbridge/mcp-bridge-vscode"
    assert identity.TOKEN_DIRECTORY_PARTS == ("mcpbridge", "vscode", "tokens")
    assert identity.DEFAULT_REDIRECT_PORT == args.DEFAULT_REDIRECT_PORT


def test_storage_identities_separate_accounts_ports_and_clients():
    base = identity.storage_identity("default", REDIRECT)
    assert base == f"mcp-bridge-vscode|default|{REDIRECT}"
    assert identity.storage_identity("work", REDIRECT) != base
    assert identity.storage_identity("default", "http://127.0.0.1:5000/callback") != base
    assert identity.storage_identity("default", REDIRECT, client_id="c1") == base + "|client=c1"
    assert (
        identity.storage_identity("default", REDIRECT, metadata_url="https://m/c.json")
        == base + "|cimd=https://m/c.json"
    )


def test_the_published_client_metadata_document_is_the_one_the_bridge_describes():
    text = (ROOT / "site" / "vscode" / "client.json").read_text()
    assert len(text.encode()) <= flow.MAX_CLIENT_METADATA_BYTES
    doc = json.loads(text)
    assert doc == flow.client_metadata_document(doc["client_id"])
    assert doc["client_id"].startswith("https://") and doc["client_id"].endswith("/vscode/client.json")
    assert doc["redirect_uris"] == ["http://127.0.0.1:41894/callback"]
    assert set(doc["grant_types"]) == {"authorization_code", "refresh_token"}
    assert "scope" not in doc and doc["token_endpoint_auth_method"] == "none"
    assert doc["application_type"] == "native" and doc["client_name"] == identity.CLIENT_NAME
    if args.DEFAULT_CLIENT_METADATA_URL is not None:
        assert doc["client_id"] == args.DEFAULT_CLIENT_METADATA_URL


def test_the_code_challenge_is_s256_of_the_verifier_in_base64url():
    verifier = flow.b64url(bytes(range(32)))
    assert len(verifier) == 43 and "=" not in verifier
    digest = hashlib.sha256(verifier.encode()).digest()
    assert flow.code_challenge(verifier) == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


# ------------------------------------------------------------------------ URL checks (§7.6)


def test_a_good_authorization_url_passes():
    assert urls.authorization_url_problem(GOOD, expected_redirect_uri=REDIRECT) is None


NOT_HTTPS = "it does not use https"
NOT_VISIBLE = "it has a character that is not visible ASCII"
NOT_ALLOWED = "it has a character that a URL does not allow"
BAD_PERCENT = "it has a % without two hexadecimal digits"
USER_INFO = "it has user information"
BAD_PORT = "its port is not valid"
BAD_IPV6 = "its IPv6 address is not valid"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("", "it is empty"),
        ("http://as.example.com/authorize?state=1", NOT_HTTPS),
        ("HTTPS://as.example.com/a b", NOT_VISIBLE),
        ("https://as.example.com/a\x7f", NOT_VISIBLE),
        ("https://as.example.com/é", NOT_VISIBLE),
        ('https://as.example.com/"x', NOT_ALLOWED),
        ("https://as.example.com/<x>", NOT_ALLOWED),
        ("https://as.example.com/a\\b", NOT_ALLOWED),
        ("https://as.example.com/a^b", NOT_ALLOWED),
        ("https://as.example.com/a`b", NOT_ALLOWED),
        ("https://as.example.com/{a}", NOT_ALLOWED),
        ("https://as.example.com/a|b", NOT_ALLOWED),
        ("https://as.example.com/%zz", BAD_PERCENT),
        ("https://as.example.com/%4", BAD_PERCENT),
        ("https://as.example.com/a#frag", "it has a fragment"),
        ("https://user@as.example.com/a", USER_INFO),
        ("https://user:pw@as.example.com/a", USER_INFO),
        ("https:///a", "it has no host"),
        ("https://as.example.com:0/a", BAD_PORT),
        ("https://as.example.com:65536/a", BAD_PORT),
        ("https://as.example.com:123456/a", BAD_PORT),
        ("https://as.example.com:8x/a", BAD_PORT),
        ("https://[::g]/a", BAD_IPV6),
        ("https://[::1/a", BAD_IPV6),
        ("https://[::1]x/a", "its host is not valid"),
        ("javascript:alert(1)", NOT_HTTPS),
        ("file:///etc/passwd", NOT_HTTPS),
        ("https://as.example.com/" + "a" * 8200, "it is longer than 8192 bytes"),
    ],
)
def test_an_authorization_url_that_breaks_a_rule_is_refused_with_its_reason(url, reason):
    assert urls.url_syntax_problem(url) == reason


def test_an_authorization_url_without_state_or_with_another_redirect_uri_is_refused():
    assert urls.authorization_url_problem(GOOD.replace("state=s1", "state="), expected_redirect_uri=REDIRECT)
    assert urls.authorization_url_problem(GOOD, expected_redirect_uri="http://127.0.0.1:1/callback")


def test_ipv6_hosts_and_ports_within_range_are_accepted():
    assert urls.url_syntax_problem("https://[2001:db8::1]:8443/a?b=c") is None
    assert urls.url_syntax_problem("HTTPS://AS.example.com:65535/") is None


@pytest.mark.parametrize(
    ("resource_url", "url", "covered"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp", True),
        ("https://MCP.example.com:443/mcp", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp/tenant", True),
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp?tenant=a", True),
        ("https://mcp.example.com/", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcpx", False),
        ("https://mcp.example.com/mcp/a", "https://mcp.example.com/mcp", False),
        ("https://evil.example.com/mcp", "https://mcp.example.com/mcp", False),
        ("http://mcp.example.com/mcp", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com:8443/mcp", "https://mcp.example.com/mcp", False),
    ],
)
def test_the_resource_must_cover_the_server_url(resource_url, url, covered):
    assert urls.covers(resource_url, url) is covered


def test_protected_resource_metadata_is_looked_for_in_the_order_of_rfc_9728():
    found = urls.resource_metadata_candidates("https://h.example:8443/v1/mcp", "https://h.example/prm")
    assert found == [
        "https://h.example/prm",
        "https://h.example:8443/.well-known/oauth-protected-resource/v1/mcp",
        "https://h.example:8443/.well-known/oauth-protected-resource",
    ]
    assert urls.resource_metadata_candidates("https://h.example/", None) == [
        "https://h.example/.well-known/oauth-protected-resource"
    ]


def test_server_metadata_is_looked_for_with_rfc_8414_and_openid_paths():
    assert urls.server_metadata_candidates("https://a.example/tenant1") == [
        "https://a.example/.well-known/oauth-authorization-server/tenant1",
        "https://a.example/.well-known/openid-configuration/tenant1",
        "https://a.example/tenant1/.well-known/openid-configuration",
    ]
    assert urls.server_metadata_candidates("https://a.example") == [
        "https://a.example/.well-known/oauth-authorization-server",
        "https://a.example/.well-known/openid-configuration",
    ]


# ----------------------------------------------------------------------------- challenges


@pytest.mark.parametrize(
    ("header", "params"),
    [
        (
            'Bearer resource_metadata="https://x/prm", scope="a b"',
            {"resource_metadata": "https://x/prm", "scope": "a b"},
        ),
        (
            'Bearer error="insufficient_scope", scope="mcp:write"',
            {"error": "insufficient_scope", "scope": "mcp:write"},
        ),
        ('DPoP algs="ES256", Bearer realm="x"', {"realm": "x"}),
        ('Basic realm="a", Bearer', {}),
        ("Bearer scope=read, ERROR=invalid_token", {"scope": "read", "error": "invalid_token"}),
        ('Negotiate abc123==, Bearer scope="q \\"x\\""', {"scope": 'q "x"'}),
    ],
)
def test_the_bearer_challenge_is_read_from_www_authenticate(header, params):
    challenge = parse_challenge(header)
    assert challenge is not None and dict(challenge.params) == params


def test_a_header_without_a_bearer_challenge_gives_none():
    assert parse_challenge(None) is None
    assert parse_challenge('Basic realm="x"') is None
    assert parse_challenge("") is None


# ------------------------------------------------------------------------------- metadata


def test_resource_metadata_whose_resource_does_not_cover_the_url_is_refused():
    doc = {"resource": "https://other.example/mcp", "authorization_servers": ["https://as.example.com"]}
    with pytest.raises(flow.MetadataProblem, match="ResourceMismatch"):
        flow.check_resource_metadata(doc, "https://mcp.example.com/mcp")
    with pytest.raises(flow.MetadataProblem, match="NoAuthorizationServer"):
        flow.check_resource_metadata(
            {"resource": "https://mcp.example.com/mcp"}, "https://mcp.example.com/mcp"
        )
    doc = {"resource": "https://mcp.example.com/mcp", "authorization_servers": ["http://as.example.com"]}
    with pytest.raises(flow.MetadataProblem, match="InsecureEndpoint"):
        flow.check_resource_metadata(doc, "https://mcp.example.com/mcp")


def test_server_metadata_must_have_the_exact_issuer_https_endpoints_and_s256():
    assert server().issuer == "https://as.example.com"
    with pytest.raises(flow.MetadataProblem, match="IssuerMismatch"):
        server(issuer="https://as.example.com/")
    with pytest.raises(flow.MetadataProblem, match="NoS256"):
        server(code_challenge_methods_supported=["plain"])
    with pytest.raises(flow.MetadataProblem, match="NoS256"):
        server(code_challenge_methods_supported=None)
    with pytest.raises(flow.MetadataProblem, match="InsecureEndpoint"):
        server(token_endpoint="http://as.example.com/token")


def test_scopes_come_from_the_challenge_else_the_metadata_and_a_step_up_keeps_the_old_ones():
    meta = server(scopes_supported=["mcp:read", "offline_access"])
    assert flow.choose_scopes(challenged=["a"], resource=resource(["x"]), server=meta) == (
        "a",
        "offline_access",
    )
    assert flow.choose_scopes(challenged=[], resource=resource(["x", "y"]), server=server()) == ("x", "y")
    assert flow.choose_scopes(challenged=[], resource=resource([]), server=meta) == ()
    assert flow.choose_scopes(challenged=[], resource=resource(None), server=server()) == ()
    stepped = flow.choose_scopes(
        challenged=["mcp:write"],
        resource=resource(["x"]),
        server=server(),
        previous=["mcp:read"],
        step_up=True,
    )
    assert stepped == ("mcp:read", "mcp:write")


def test_the_authorization_url_has_pkce_state_resource_and_the_exact_redirect_uri():
    url = flow.build_authorization_url(
        server(),
        client_id="c 1",
        redirect=REDIRECT,
        state="st",
        challenge="ch",
        resource="https://mcp.example.com/mcp",
        scopes=["mcp:read", "mcp:write"],
    )
    assert urls.authorization_url_problem(url, expected_redirect_uri=REDIRECT) is None
    from urllib.parse import parse_qs, urlsplit

    q = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert q == {
        "response_type": "code",
        "client_id": "c 1",
        "redirect_uri": REDIRECT,
        "state": "st",
        "code_challenge": "ch",
        "code_challenge_method": "S256",
        "resource": "https://mcp.example.com/mcp",
        "scope": "mcp:read mcp:write",
    }
    no_scope = flow.build_authorization_url(
        server(), client_id="c", redirect=REDIRECT, state="s", challenge="c", resource="r", scopes=[]
    )
    assert "scope=" not in no_scope


# ------------------------------------------------------------------------------- redirect


def test_the_redirect_checks_iss_exactly_and_maps_errors():
    issuer = "https://as.example.com"
    assert flow.check_redirect(flow.Redirect("c", None, issuer), issuer=issuer, iss_required=True) == "c"
    assert flow.check_redirect(flow.Redirect("c", None, None), issuer=issuer, iss_required=False) == "c"
    for wrong in (issuer + "/", "https://AS.example.com", "https://as.example.com:443"):
        with pytest.raises(flow.RedirectProblem, match="IssuerMismatch"):
            flow.check_redirect(flow.Redirect("c", None, wrong), issuer=issuer, iss_required=False)
    with pytest.raises(flow.RedirectProblem, match="MissingIssuer"):
        flow.check_redirect(flow.Redirect("c", None, None), issuer=issuer, iss_required=True)
    with pytest.raises(flow.RedirectProblem, match="IssuerMismatch"):
        # An error answer from another issuer is not acted on.
        flow.check_redirect(
            flow.Redirect(None, "access_denied", "https://evil"), issuer=issuer, iss_required=False
        )
    with pytest.raises(flow.AuthorizationDenied):
        flow.check_redirect(flow.Redirect(None, "access_denied", issuer), issuer=issuer, iss_required=True)
    with pytest.raises(flow.AuthorizationError) as caught:
        flow.check_redirect(flow.Redirect(None, "server_error", issuer), issuer=issuer, iss_required=True)
    assert caught.value.code == "server_error"
    with pytest.raises(flow.AuthorizationError) as caught:
        flow.check_redirect(flow.Redirect(None, "<script>", None), issuer=issuer, iss_required=False)
    assert caught.value.code is None


# --------------------------------------------------------------------------------- tokens


def test_a_token_answer_gives_the_expiry_from_now_and_the_granted_scopes():
    tokens = token_rules.parse_token_response(
        200,
        {
            "access_token": "abc.DEF-_~+/=",
            "token_type": "bearer",
            "expires_in": 3600,
            "refresh_token": "r",
            "scope": "a b",
        },
        now=1000.0,
    )
    assert tokens.expires_at == 4600 and tokens.refresh_token == "r" and tokens.scopes == ("a", "b")
    bare = token_rules.parse_token_response(200, {"access_token": "x", "token_type": "Bearer"}, now=0)
    assert bare.expires_at is None and bare.refresh_token is None and bare.scopes is None


@pytest.mark.parametrize(
    "doc",
    [
        {"access_token": "a b", "token_type": "Bearer"},
        {"access_token": "", "token_type": "Bearer"},
        {"access_token": "abc", "token_type": "DPoP"},
        {"access_token": "abc"},
        ["not", "an", "object"],
    ],
)
def test_a_token_answer_without_a_bearer_token68_is_refused(doc):
    with pytest.raises(token_rules.TokenProblem):
        token_rules.parse_token_response(200, doc, now=0)


@pytest.mark.parametrize("raw", [*HOSTILE_NUMBERS, "315360001", "3.2e8"])
def test_a_token_answer_whose_expires_in_is_no_number_of_seconds_up_to_ten_years_is_refused(raw):
    doc = json.loads(f'{{"access_token": "abc", "token_type": "Bearer", "expires_in": {raw}}}')
    with pytest.raises(token_rules.TokenProblem) as caught:
        token_rules.parse_token_response(200, doc, now=1000.0)
    assert str(caught.value) == "HTTP status 200, expires_in is not a number from 0 to 315360000"
    assert caught.value.error is None and not caught.value.drops_tokens and not caught.value.drops_client
    assert isinstance(caught.value.__cause__, ValueError)


@pytest.mark.parametrize(
    ("raw", "expires_at"),
    [("null", None), ("0", 1000), ("59.9", 1059), ('"3600"', 4600), ("315360000", 1000 + 315360000)],
)
def test_a_token_answer_with_an_expires_in_in_range_gives_its_expiry(raw, expires_at):
    doc = json.loads(f'{{"access_token": "abc", "token_type": "Bearer", "expires_in": {raw}}}')
    assert token_rules.parse_token_response(200, doc, now=1000.0).expires_at == expires_at


def test_token_errors_keep_only_plain_codes_and_say_what_to_drop():
    problem = pytest.raises(
        token_rules.TokenProblem, token_rules.parse_token_response, 400, {"error": "invalid_grant"}, 0
    ).value
    assert (
        str(problem) == "HTTP status 400, error invalid_grant"
        and problem.drops_tokens
        and not problem.drops_client
    )
    problem = pytest.raises(
        token_rules.TokenProblem, token_rules.parse_token_response, 401, {"error": "invalid_client"}, 0
    ).value
    assert problem.drops_client
    problem = pytest.raises(
        token_rules.TokenProblem, token_rules.parse_token_response, 400, {"error": "x\nsecret"}, 0
    ).value
    assert str(problem) == "HTTP status 400"
    problem = pytest.raises(token_rules.TokenProblem, token_rules.parse_token_response, 502, None, 0).value
    assert str(problem) == "HTTP status 502" and not problem.drops_tokens


def test_a_secret_goes_in_basic_authentication_form_encoded_and_never_in_the_form():
    form, headers = token_rules.client_authentication(
        stored.ClientRegistration("id:1", "s&p:w", "client_secret_basic"), {"grant_type": "x"}
    )
    assert "client_secret" not in form and "client_id" not in form
    assert base64.b64decode(headers["Authorization"][6:]) == b"id%3A1:s%26p%3Aw"
    form, headers = token_rules.client_authentication(stored.ClientRegistration("id", None, "none"), {})
    assert form == {"client_id": "id"} and headers == {}
    post = stored.ClientRegistration("id", "s", "client_secret_post")
    form, headers = token_rules.client_authentication(post, {})
    assert form == {"client_id": "id", "client_secret": "s"} and headers == {}


def test_dynamic_registration_asks_for_a_public_native_client_with_one_redirect_uri():
    body = token_rules.registration_body(REDIRECT, server(token_endpoint_auth_methods_supported=["none"]))
    assert body == {
        "client_name": identity.CLIENT_NAME,
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    }
    registered = token_rules.parse_registration(201, {"client_id": "c"})
    assert registered == stored.ClientRegistration("c", None, "none")
    with pytest.raises(
        token_rules.RegistrationProblem, match="registration: HTTP status 400, error invalid_redirect_uri"
    ):
        token_rules.parse_registration(400, {"error": "invalid_redirect_uri"})


# -------------------------------------------------------------------------------- records


def test_a_record_survives_its_json_and_refuses_another_key_or_version():
    key = stored.RecordKey("https://as", "https://mcp/mcp", "mcp-bridge-vscode|default|x")
    registration = stored.ClientRegistration("c", "secret-9q", "client_secret_basic")
    record = stored.Record(key, registration, "access-7x", 99, "refresh-3z", ("a",))
    data = stored.record_to_json(record)
    assert stored.record_from_json(data, key) == record
    with pytest.raises(InvalidRecord):
        stored.record_from_json(data, stored.RecordKey("https://as", "https://mcp/mcp", "other"))
    with pytest.raises(InvalidRecord):
        stored.record_from_json(data.replace(b'"version":1', b'"version":2'), key)
    with pytest.raises(InvalidRecord):
        stored.record_from_json(b"{", key)
    for secret in ("access-7x", "refresh-3z", "secret-9q"):
        assert secret not in repr(record)


def test_a_token_is_usable_until_sixty_seconds_before_it_expires():
    key = stored.RecordKey("i", "r", "c")
    record = stored.Record(key, stored.ClientRegistration("c"), "at", expires_at=1000)
    assert record.usable(939) and not record.usable(940)
    assert stored.Record(key, stored.ClientRegistration("c"), "at").usable(10**12)
    assert not stored.Record(key, stored.ClientRegistration("c"), None, refresh_token="rt").usable(0)


def test_record_key_digests_are_length_prefixed():
    assert stored.RecordKey("ab", "c", "d").digest() != stored.RecordKey("a", "bc", "d").digest()
    assert len(stored.RecordKey("a", "b", "c").digest()) == 32


def test_the_index_keeps_the_newest_256_entries():
    entries: list[stored.IndexEntry] = []
    for n in range(300):
        entries = stored.index_with(entries, stored.IndexEntry(f"https://u/{n}", "i", f"r{n}", "c"))
    assert len(entries) == stored.MAX_INDEX_ENTRIES and entries[0].resource == "r44"
    assert stored.index_from_json(stored.index_to_json(entries)) == entries
    assert stored.index_without(entries, stored.RecordKey("i", "r299", "c"))[-1].resource == "r298"
    with pytest.raises(InvalidRecord):
        stored.index_from_json(b'{"version":1,"entries":[{"url":1}]}')


# ------------------------------------------------------------------ the resource indicator


@pytest.mark.parametrize(
    ("error", "description", "refused"),
    [
        ("invalid_target", None, True),
        ("invalid_request", "AADSTS901002: The 'resource' request parameter is not supported.", True),
        (
            "invalid_request",
            "AADSTS9010010: The resource parameter provided in the request doesn't match with the "
            "requested scopes.",
            True,
        ),
        ("invalid_scope", 'the "resource" does not match', True),
        ("invalid_request", "the resource owner denied the request", False),
        ("invalid_request", "missing code_challenge", False),
        ("invalid_grant", None, False),
        (None, "the 'resource' request parameter is not supported", False),
    ],
)
def test_an_error_refuses_resource_when_it_is_invalid_target_or_its_description_names_the_parameter(
    error, description, refused
):
    assert flow.refuses_resource(error, description) is refused
    doc = {"error": error, "error_description": description} if error else {}
    assert token_rules.TokenProblem.of_answer(400, doc).refuses_resource is refused
    assert flow.Redirect(None, error, None, description).refuses_resource is refused


def test_a_token_problem_names_no_description():
    problem = token_rules.TokenProblem.of_answer(
        400, {"error": "invalid_request", "error_description": "AADSTS901002"}
    )
    assert str(problem) == "HTTP status 400, error invalid_request"


def test_a_record_remembers_a_refused_resource_and_a_record_without_the_member_sends_it():
    key = stored.RecordKey("https://as", "https://mcp/mcp", "mcp-bridge-vscode|default|x")
    record = stored.Record(key, stored.ClientRegistration("c"), "at", 99, "rt", ("a",), without_resource=True)
    data = stored.record_to_json(record)
    assert b'"without_resource":true' in data and stored.record_from_json(data, key) == record
    assert record.without_tokens().without_resource
    plain = stored.record_to_json(stored.Record(key, stored.ClientRegistration("c"), "at"))
    assert b"without_resource" not in plain and not stored.record_from_json(plain, key).without_resource
    with pytest.raises(InvalidRecord):
        stored.record_from_json(data.replace(b"true", b'"yes"'), key)


def test_an_authorization_url_without_resource_has_no_resource_parameter():
    url = flow.build_authorization_url(
        server(), client_id="c", redirect=REDIRECT, state="s", challenge="x", resource=None, scopes=()
    )
    assert "resource" not in url and "state=s" in url


# ------------------------------------------------------------------------- refresh tokens

OPENID = {"id_token_signing_alg_values_supported": ["RS256"], "scopes_supported": ["offline_access"]}


@pytest.mark.parametrize(
    ("changes", "scopes", "prompt"),
    [
        (OPENID, ("mcp", "offline_access"), True),
        ({"scopes_supported": ["openid", "offline_access"]}, ("offline_access",), True),
        ({**OPENID, "prompt_values_supported": ["none", "login", "consent"]}, ("offline_access",), True),
        ({**OPENID, "prompt_values_supported": ["none", "login"]}, ("offline_access",), False),
        (OPENID, ("mcp",), False),
        ({"scopes_supported": ["mcp", "offline_access"]}, ("mcp", "offline_access"), False),
    ],
)
def test_an_openid_provider_is_asked_for_offline_access_with_a_consent_prompt_and_no_other_server(
    changes, scopes, prompt
):
    metadata = server(**changes)
    assert flow.consent_prompt(metadata, scopes) is prompt
    url = flow.build_authorization_url(
        metadata, client_id="c", redirect=REDIRECT, state="s", challenge="x", resource="r", scopes=scopes
    )
    assert ("prompt=consent" in url) is prompt


# ------------------------------------------------------------------------- http on loopback


@pytest.mark.parametrize(
    ("endpoint", "upstream", "allowed"),
    [
        ("http://127.0.0.1:9000/token", "http://127.0.0.1:8000/mcp", True),
        ("http://localhost:9000/token", "https://[::1]:8000/mcp", True),
        ("http://[::1]:9000/token", "http://localhost/mcp", True),
        ("https://as.example.com/token", "http://127.0.0.1:8000/mcp", True),
        # The endpoint is not on loopback, or the upstream server is not.
        ("http://as.example.com/token", "http://127.0.0.1:8000/mcp", False),
        ("http://127.0.0.1.example.com/token", "http://127.0.0.1:8000/mcp", False),
        ("http://127.0.0.1:9000/token", "https://mcp.example.com/mcp", False),
        # The rest of a safe URL holds on loopback too.
        ("http://user@127.0.0.1:9000/token", "http://127.0.0.1:8000/mcp", False),
        ("http://127.0.0.1:9000/token#x", "http://127.0.0.1:8000/mcp", False),
        ("ftp://127.0.0.1:9000/token", "http://127.0.0.1:8000/mcp", False),
    ],
)
def test_an_endpoint_may_be_http_only_when_it_and_the_upstream_server_are_on_loopback(
    endpoint, upstream, allowed
):
    local = urls.local_upstream(upstream)
    assert urls.https_endpoint(endpoint, local=local) is allowed
    issuer = "http://127.0.0.1:9000"
    doc = {
        "issuer": issuer,
        "authorization_endpoint": endpoint.replace("/token", "/authorize"),
        "token_endpoint": endpoint,
        "code_challenge_methods_supported": ["S256"],
    }
    if allowed:
        assert flow.check_server_metadata(doc, issuer, local=local).local is local
    else:
        with pytest.raises(flow.MetadataProblem, match="InsecureEndpoint"):
            flow.check_server_metadata(doc, issuer, local=local)
    prm = {"resource": upstream, "authorization_servers": [endpoint.removesuffix("/token")]}
    if allowed:
        assert flow.check_resource_metadata(prm, upstream).issuer == endpoint.removesuffix("/token")
    else:
        with pytest.raises(flow.MetadataProblem, match="InsecureEndpoint"):
            flow.check_resource_metadata(prm, upstream)
