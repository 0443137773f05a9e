"""The input requests of the upstream server: checks, plans, answers and the rules across rounds."""

from __future__ import annotations

import ast
import copy
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpbridge.bridge.rules import input as inp
from mcpbridge.bridge.rules.input import (
    BAD_LINE,
    MAX_INPUT_REQUESTS,
    MAX_ROUNDS,
    ClientError,
    ClientFailed,
    ClientKinds,
    InputError,
    Outgoing,
    Session,
    parse_input_required,
    retry_params,
    url_allowed,
)
from mcpbridge.bridge.rules.legacyshapes import conforms
from mcpbridge.bridge.rules.roundfailures import RoundFailed
from schema import FrameInvalid, validate_legacy, validate_legacy_frame

VSCODE_CAPS: dict[str, Any] = {
    "roots": {"listChanged": True},
    "sampling": {},
    "elicitation": {"form": {}, "url": {}},
}
VSCODE = ClientKinds.from_capabilities(VSCODE_CAPS)
FORM_ONLY = ClientKinds.from_capabilities({"elicitation": {}})
WITH_TOOLS = ClientKinds.from_capabilities({**VSCODE_CAPS, "sampling": {"tools": {}}})

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "admin": {"type": "boolean"},
        "color": {"type": "string", "enum": ["red", "green"]},
    },
    "required": ["name"],
}
FORM: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Tell us about you.",
        "requestedSchema": SCHEMA,
        "task": {"ttl": 1000},
    },
}
SIGN_IN_URL = "https://example.com/auth"
URL: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {"mode": "url", "message": "Sign in.", "url": SIGN_IN_URL},
}
SAMPLE: dict[str, Any] = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}],
        "maxTokens": 10,
        "includeContext": "thisServer",
        "task": {"ttl": 5},
    },
}
ROOTS: dict[str, Any] = {"method": "roots/list"}
CONFIRM: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {"message": "Delete the file?", "requestedSchema": {"type": "object", "properties": {}}},
}
MODEL_ANSWER: dict[str, Any] = {
    "role": "assistant",
    "content": {"type": "text", "text": "Hello"},
    "model": "gpt",
    "stopReason": "endTurn",
}
LEGACY_REQUESTS = {
    "elicitation/create": "ElicitRequest",
    "sampling/createMessage": "CreateMessageRequest",
    "roots/list": "ListRootsRequest",
}


def ids(prefix: str = "elicitation-") -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"{prefix}{next(counter)}"


def session(kinds: ClientKinds = VSCODE) -> Session:
    return Session(kinds, ids())


def input_required(requests: dict[str, Any] | None, state: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"resultType": "input_required", "inputRequests": requests}
    if state is not None:
        result["requestState"] = state
    return result


def as_frame(outgoing: Outgoing, request_id: str = "b-1") -> dict[str, Any]:
    frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": outgoing.method}
    if outgoing.params is not None:
        frame["params"] = outgoing.params
    return frame


def assert_valid_for_client(outgoing: tuple[Outgoing, ...]) -> None:
    """Each request is a valid 2025-11-25 request of its kind, with ids b-1, b-2, ..."""
    for number, request in enumerate(outgoing, start=1):
        frame = as_frame(request, f"b-{number}")
        validate_legacy(frame, LEGACY_REQUESTS[request.method])
        validate_legacy_frame(frame)


def fails(call: Callable[[], object]) -> InputError:
    with pytest.raises(InputError) as info:
        call()
    return info.value


def one_answer(key: str, request: dict[str, Any], answer: Any, kinds: ClientKinds = VSCODE) -> dict[str, Any]:
    """Plan a round with one input request, answer it, and give its inputResponses value."""
    s = session(kinds)
    s.plan_round(input_required({key: request}))
    responses = s.input_responses({key: answer})
    assert responses is not None
    return responses[key]  # type: ignore[no-any-return]


# -------------------------------------------------------------------------------- purity


def test_the_module_imports_nothing_that_does_io_threads_or_reads_the_clock() -> None:
    tree = ast.parse(Path(inp.__file__).read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    banned = {"threading", "socket", "subprocess", "requests", "urllib3", "time", "webbrowser", "asyncio"}
    assert not {name.split(".")[0] for name in imported} & banned
    assert not any(name.lstrip(".").endswith("log") for name in imported)


# ---------------------------------------------------------------------- the client's kinds


def test_vs_code_declares_every_kind_but_sampling_with_tools() -> None:
    assert VSCODE == ClientKinds(form=True, url=True, sampling=True, sampling_tools=False, roots=True)
    assert WITH_TOOLS.sampling_tools


@pytest.mark.parametrize(
    ("capabilities", "expected"),
    [
        ({"elicitation": {}}, ClientKinds(form=True)),
        ({"elicitation": {"form": {}}}, ClientKinds(form=True)),
        ({"elicitation": {"url": {}}}, ClientKinds(url=True)),
        ({"sampling": {"tools": {}, "context": {}}}, ClientKinds(sampling=True, sampling_tools=True)),
        ({"roots": {}}, ClientKinds(roots=True)),
        ({}, ClientKinds()),
        ({"elicitation": True, "sampling": None, "roots": []}, ClientKinds()),
        (None, ClientKinds()),
    ],
)
def test_the_kinds_come_from_the_capabilities_and_an_empty_elicitation_means_forms(
    capabilities: Any, expected: ClientKinds
) -> None:
    assert ClientKinds.from_capabilities(capabilities) == expected


# --------------------------------------------------------------------------- the URL rule

ALLOWED_URLS = [
    "https://example.com/auth",
    "HTTPS://example.com/",
    "https://user:secret@example.com/x?y#z",
    "http://localhost:8080/callback",
    "http://127.0.0.1/x",
    "http://127.9.8.7:1/",
    "http://127.255.255.255/",
    "http://[::1]:3000/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:127.1.2.3]:80/path",
]
REFUSED_URLS = [
    "javascript:alert(1)",
    "vscode://ms-vscode.extension/x",
    "command:workbench.action.reloadWindow",
    "data:text/html,x",
    "file:///etc/passwd",
    "file://localhost/etc/passwd",
    "http://example.com/auth",
    "http://127.0.0.1.example.com/",
    "http://localhost.example.com/",
    "http://LOCALHOST./x",
    "http://localhost.",
    "http://app.localhost/",
    "http://localhost@example.com/",
    "http://user:secret@localhost/",
    "http://user@127.0.0.1/",
    "http://evil.com\\@localhost/",
    "http://evil.com\\@127.0.0.1/",
    "http://localhost\\.evil.com/",
    "https://example.com\\@example.org/",
    "http://128.0.0.1/",
    "http://0127.0.0.1/",
    "http://127.1/",
    "http://127.0.0.256/",
    "http://[::2]/",
    "http://[::ffff:128.0.0.1]/",
    "http://[::1%25eth0]/",
    "http://[::1/",
    "http://localhost:99999/",
    "http://localhost:x/",
    "https://",
    "https:///path",
    "https:example.com",
    "https://exa mple.com/",
    "https://example.com/\n",
    "https://ex\u00e4mple.com/",
    "https://exa<mple.com/",
    "https://[zz::1]/",
    "https://example.com/{x}",
    "https://example.com/a|b",
    "https://example.com/a[b]",
    "https://example.com/%zz",
    "https://example.com/#a#b",
    "ftp://example.com/",
    "not a URL",
    "",
]


@pytest.mark.parametrize("url", ALLOWED_URLS)
def test_https_and_loopback_http_urls_are_allowed(url: str) -> None:
    assert url_allowed(url)


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_other_urls_are_refused(url: str) -> None:
    assert not url_allowed(url)


# ------------------------------------------------------------------- the result of a round


@pytest.mark.parametrize(
    ("result", "detail"),
    [
        ([], "the result is not an object"),
        ("input_required", "the result is not an object"),
        ({"resultType": "input_required", "inputRequests": []}, "the inputRequests member is not an object"),
        ({"resultType": "input_required", "inputRequests": "x"}, "the inputRequests member is not an object"),
        ({"resultType": "input_required", "requestState": 7}, "the requestState member is not a string"),
        ({"resultType": "input_required", "requestState": {}}, "the requestState member is not a string"),
    ],
)
def test_a_result_that_is_not_an_input_required_result_is_an_invalid_input_request(
    result: Any, detail: str
) -> None:
    error = fails(lambda: session().plan_round(result))
    assert (error.cause, error.detail) == ("invalid_input_request", detail)


def test_null_input_requests_are_an_empty_round_that_keeps_the_state() -> None:
    assert parse_input_required({"inputRequests": None, "requestState": None}) == ({}, None)
    s = session()
    planned = s.plan_round(input_required(None, "s-1"))
    assert planned.outgoing == () and planned.request_state == "s-1"
    assert s.input_responses({}) is None


# ----------------------------------------------------------------------- plans of a round


def test_a_form_goes_to_the_client_unchanged_but_without_task() -> None:
    planned = session().plan_round(input_required({"about": FORM}, "s-1"))
    (request,) = planned.outgoing
    assert request.key == "about" and request.method == "elicitation/create"
    assert request.params == {"mode": "form", "message": "Tell us about you.", "requestedSchema": SCHEMA}
    assert planned.request_state == "s-1" and planned.immediate == {} and planned.warnings == ()
    assert_valid_for_client(planned.outgoing)


def test_a_sampling_request_goes_to_the_client_with_include_context_and_without_task() -> None:
    planned = session().plan_round(input_required({"s": SAMPLE}))
    (request,) = planned.outgoing
    assert request.method == "sampling/createMessage"
    assert request.params == {key: value for key, value in SAMPLE["params"].items() if key != "task"}
    assert_valid_for_client(planned.outgoing)


def test_roots_list_goes_to_the_client_without_params_or_with_its_meta_only() -> None:
    planned = session().plan_round(
        input_required({"r": ROOTS, "m": {"method": "roots/list", "params": {"_meta": {}, "task": {}}}})
    )
    assert [(o.method, o.params) for o in planned.outgoing] == [
        ("roots/list", None),
        ("roots/list", {"_meta": {}}),
    ]
    assert_valid_for_client(planned.outgoing)


def test_a_url_elicitation_gets_an_elicitation_id_and_each_call_a_new_one() -> None:
    first = session().plan_round(input_required({"auth": URL}))
    second = Session(VSCODE, ids("other-")).plan_round(input_required({"auth": URL}))
    assert first.outgoing[0].params == {**URL["params"], "elicitationId": "elicitation-1"}
    assert second.outgoing[0].params is not None
    assert second.outgoing[0].params["elicitationId"] == "other-1"
    assert_valid_for_client(first.outgoing)


def test_requests_go_out_in_key_order_and_answers_in_any_order_come_back_in_key_order() -> None:
    s = session()
    planned = s.plan_round(input_required({"about": FORM, "where": ROOTS}, "s-1"))
    assert [o.key for o in planned.outgoing] == ["about", "where"]
    responses = s.input_responses(
        {
            "where": {"roots": [{"uri": "file:///w"}, {"uri": "untitled:x"}]},
            "about": {"action": "accept", "content": {"name": "Ada"}},
        }
    )
    assert responses is not None and list(responses) == ["about", "where"]
    assert json.dumps(responses) == json.dumps(
        {
            "about": {"action": "accept", "content": {"name": "Ada"}},
            "where": {"roots": [{"uri": "file:///w"}]},
        }
    )


def test_seventeen_input_requests_fail_the_round_and_sixteen_do_not() -> None:
    many = {f"r{i}": ROOTS for i in range(MAX_INPUT_REQUESTS + 1)}
    error = fails(lambda: session().plan_round(input_required(many)))
    assert (error.cause, error.detail) == (
        "too_many_input_requests",
        "17 input requests in one round, limit: 16",
    )
    many.pop("r0")
    assert len(session().plan_round(input_required(many)).outgoing) == 16


def test_the_tenth_input_required_result_is_too_many_rounds() -> None:
    s = session()
    for _ in range(MAX_ROUNDS - 1):
        s.plan_round(input_required({"r": ROOTS}))
    error = fails(lambda: s.plan_round(input_required({"r": ROOTS})))
    assert (error.cause, error.detail) == ("too_many_rounds", None)
    assert s.rounds == MAX_ROUNDS


@pytest.mark.parametrize(
    ("kinds", "input_request", "what"),
    [
        (ClientKinds(), FORM, "elicitation.form"),
        (ClientKinds(url=True), FORM, "elicitation.form"),
        (FORM_ONLY, URL, "elicitation.url"),
        (FORM_ONLY, SAMPLE, "sampling"),
        (FORM_ONLY, ROOTS, "roots"),
        (
            ClientKinds.from_capabilities({"sampling": {}, "elicitation": {"form": {}, "url": {}}}),
            ROOTS,
            "roots",
        ),
    ],
)
def test_an_undeclared_kind_fails_with_a_detail_that_names_the_key(
    kinds: ClientKinds, input_request: dict[str, Any], what: str
) -> None:
    error = fails(lambda: session(kinds).plan_round(input_required({"plan": input_request})))
    assert error.cause == "undeclared_input_request"
    assert error.detail == f"input request 'plan': the client did not declare {what}"


def test_a_refused_url_is_undeclared_before_it_is_refused() -> None:
    bad = {"method": "elicitation/create", "params": {**URL["params"], "url": "vscode://x/y"}}
    error = fails(lambda: session(FORM_ONLY).plan_round(input_required({"open": bad})))
    assert error.detail == "input request 'open': the client did not declare elicitation.url"


TOOLS_SAMPLES = {
    "tools": {**SAMPLE["params"], "tools": [{"name": "t", "inputSchema": {"type": "object"}}]},
    "tool choice": {**SAMPLE["params"], "toolChoice": {"mode": "auto"}},
    "tool content": {
        "messages": [
            {"role": "assistant", "content": {"type": "tool_use", "id": "u1", "name": "t", "input": {}}},
            {"role": "user", "content": [{"type": "tool_result", "toolUseId": "u1", "content": []}]},
        ],
        "maxTokens": 10,
    },
}


@pytest.mark.parametrize("name", sorted(TOOLS_SAMPLES))
def test_sampling_with_tools_needs_sampling_tools(name: str) -> None:
    request = {"method": "sampling/createMessage", "params": TOOLS_SAMPLES[name]}
    error = fails(lambda: session().plan_round(input_required({"plan": request})))
    assert error.cause == "undeclared_input_request"
    assert error.detail == (
        "input request 'plan': sampling with tools needs sampling.tools, and the client did not declare it"
    )
    planned = session(WITH_TOOLS).plan_round(input_required({"plan": request}))
    assert_valid_for_client(planned.outgoing)


def test_one_failed_check_fails_the_round_and_nothing_goes_to_the_client() -> None:
    s = session()
    tools = {"method": "sampling/createMessage", "params": TOOLS_SAMPLES["tools"]}
    error = fails(lambda: s.plan_round(input_required({"about": FORM, "plan": tools, "auth": URL})))
    assert error.cause == "undeclared_input_request" and "'plan'" in str(error.detail)
    assert s.input_responses({}) is None
    assert s.completions_on_failure() == []


def tool_use(use_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": "t", "input": {}}


def tool_result(use_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "toolUseId": use_id, "content": [{"type": "text", "text": "ok"}]}


TEXT = {"type": "text", "text": "x"}


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "assistant", "content": tool_use("u1")}],
        [{"role": "assistant", "content": tool_use("u1")}, {"role": "user", "content": tool_result("u2")}],
        [
            {"role": "assistant", "content": tool_use("u1")},
            {"role": "assistant", "content": tool_result("u1")},
        ],
        [
            {"role": "assistant", "content": tool_use("u1")},
            {"role": "user", "content": [tool_result("u1"), TEXT]},
        ],
        [{"role": "user", "content": [tool_result("u1"), TEXT]}],
        [
            {"role": "assistant", "content": [tool_use("u1"), tool_use("u2")]},
            {"role": "user", "content": [tool_result("u1")]},
        ],
    ],
)
def test_sampling_messages_must_obey_the_tool_result_rules(messages: list[Any]) -> None:
    request = {"method": "sampling/createMessage", "params": {"messages": messages, "maxTokens": 5}}
    error = fails(lambda: session(WITH_TOOLS).plan_round(input_required({"m": request})))
    assert error.cause == "invalid_input_request"
    assert error.detail == "input request 'm': the sampling messages do not obey the tool result rules"


def test_each_tool_use_answered_in_the_next_user_message_obeys_the_rules() -> None:
    messages = [
        {"role": "user", "content": TEXT},
        {"role": "assistant", "content": [TEXT, tool_use("u1"), tool_use("u2")]},
        {"role": "user", "content": [tool_result("u2"), tool_result("u1")]},
        {"role": "assistant", "content": TEXT},
    ]
    request = {"method": "sampling/createMessage", "params": {"messages": messages, "maxTokens": 5}}
    assert_valid_for_client(session(WITH_TOOLS).plan_round(input_required({"m": request})).outgoing)


def sampling(**params: Any) -> dict[str, Any]:
    return {"method": "sampling/createMessage", "params": params}


def elicit(**params: Any) -> dict[str, Any]:
    return {"method": "elicitation/create", "params": params}


MESSAGES = [{"role": "user", "content": TEXT}]
NOT_A_SHAPE = {
    "a number": 1,
    "no method": {"params": {}},
    "tools/call": {"method": "tools/call", "params": {"name": "x"}},
    "ping": {"method": "ping"},
    "elicitation without params": {"method": "elicitation/create"},
    "null params": {"method": "elicitation/create", "params": None},
    "roots with null params": {"method": "roots/list", "params": None},
    "roots with a bad meta": {"method": "roots/list", "params": {"_meta": []}},
    "form without message": elicit(requestedSchema=SCHEMA),
    "form with a number message": elicit(message=1, requestedSchema=SCHEMA),
    "form without schema": elicit(message="m"),
    "form schema not an object type": elicit(
        message="m", requestedSchema={"type": "string", "properties": {}}
    ),
    "form schema without properties": elicit(message="m", requestedSchema={"type": "object"}),
    "form required not names": elicit(message="m", requestedSchema={**SCHEMA, "required": [1]}),
    "unknown mode": elicit(mode="dialog", message="m", requestedSchema=SCHEMA),
    "null mode": elicit(mode=None, message="m", requestedSchema=SCHEMA),
    "url without url": elicit(mode="url", message="m"),
    "url not a string": elicit(mode="url", message="m", url=5),
    "url without message": elicit(mode="url", url=SIGN_IN_URL),
    "progress token null": elicit(mode="url", message="m", url=SIGN_IN_URL, _meta={"progressToken": None}),
    "sampling without maxTokens": sampling(messages=MESSAGES),
    "sampling with empty messages and no maxTokens": sampling(messages=[]),
    "maxTokens text": sampling(messages=MESSAGES, maxTokens="10"),
    "maxTokens fraction": sampling(messages=MESSAGES, maxTokens=1.5),
    "role system": sampling(messages=[{"role": "system", "content": TEXT}], maxTokens=1),
    "content without text": sampling(messages=[{"role": "user", "content": {"type": "text"}}], maxTokens=1),
    "unknown content type": sampling(messages=[{"role": "user", "content": {"type": "video"}}], maxTokens=1),
    "null tools": sampling(messages=MESSAGES, maxTokens=1, tools=None),
    "bad include context": sampling(messages=MESSAGES, maxTokens=1, includeContext="everything"),
    "priority above one": sampling(messages=MESSAGES, maxTokens=1, modelPreferences={"costPriority": 2}),
    "tool result with a list as structured content": sampling(
        messages=[
            {"role": "assistant", "content": tool_use("u1")},
            {"role": "user", "content": {**tool_result("u1"), "structuredContent": [1]}},
        ],
        maxTokens=1,
    ),
}


@pytest.mark.parametrize("name", sorted(NOT_A_SHAPE))
def test_an_input_request_without_the_shape_of_the_schema_is_invalid(name: str) -> None:
    error = fails(lambda: session(WITH_TOOLS).plan_round(input_required({"x": NOT_A_SHAPE[name]})))
    assert error.cause == "invalid_input_request"
    assert error.detail == "input request 'x': the input request does not have the shape of the schema"


NOT_COMPILING = {
    "object property": {"p": {"type": "object"}},
    "array without items": {"p": {"type": "array"}},
    "untyped property": {"p": {"title": "x"}},
    "property not an object": {"p": "string"},
    "negative minLength": {"p": {"type": "string", "minLength": -1}},
    "text minLength beside an enum": {"p": {"type": "string", "enum": ["a"], "minLength": "x"}},
    "fraction maxLength": {"p": {"type": "string", "maxLength": 1.5}},
    "unknown format": {"p": {"type": "string", "format": "color"}},
    "number default text": {"p": {"type": "number", "default": "x"}},
    "text minimum": {"p": {"type": "integer", "minimum": "0"}},
    "empty oneOf": {"p": {"type": "string", "oneOf": []}},
    "oneOf without const": {"p": {"type": "string", "oneOf": [{"title": "a"}]}},
    "oneOf and enum of numbers": {
        "p": {"type": "string", "oneOf": [{"const": "a", "title": "A"}], "enum": [1]}
    },
    "multi-select items without choices": {"p": {"type": "array", "items": {"type": "string"}}},
    "multi-select of numbers": {"p": {"type": "array", "items": {"type": "number", "enum": [1]}}},
    "negative minItems": {"p": {"type": "array", "items": {"type": "string", "enum": ["a"]}, "minItems": -2}},
}


@pytest.mark.parametrize("name", sorted(NOT_COMPILING))
def test_a_requested_schema_that_does_not_compile_is_an_invalid_input_request(name: str) -> None:
    request = elicit(message="m", requestedSchema={"type": "object", "properties": NOT_COMPILING[name]})
    error = fails(lambda: session().plan_round(input_required({"bad": request})))
    assert error.cause == "invalid_input_request"
    assert error.detail == "input request 'bad': the requestedSchema does not compile"


def test_a_requested_schema_with_its_dialect_and_unknown_keywords_compiles() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "x-vendor": True,
        "properties": {
            "when": {"type": "string", "format": "date-time", "pattern": "^2", "description": "d"},
            "size": {"type": "number", "minimum": 0.5, "default": 1, "multipleOf": 0.5},
            "tags": {
                "type": "array",
                "title": "Tags",
                "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
                "minItems": 1,
                "maxItems": 2,
                "default": ["a"],
            },
            "legacy": {"type": "string", "enum": ["x", "y"], "enumNames": ["X", "Y"]},
            "untitled choice": {"type": "string", "oneOf": [{"const": "a"}]},
        },
        "required": ["when"],
    }
    planned = session().plan_round(input_required({"ok": elicit(message="m", requestedSchema=schema)}))
    assert planned.outgoing[0].params is not None
    assert planned.outgoing[0].params["requestedSchema"] == schema
    assert_valid_for_client(planned.outgoing)


def test_a_form_without_properties_goes_to_the_client_as_a_choice_form() -> None:
    planned = session().plan_round(input_required({"ok": CONFIRM}))
    assert planned.outgoing[0].params == {
        "mode": "form",
        "message": "Delete the file?",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "continue": {
                    "type": "string",
                    "title": "Continue",
                    "enum": ["Continue"],
                    "default": "Continue",
                }
            },
            "required": ["continue"],
        },
    }
    assert_valid_for_client(planned.outgoing)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"action": "accept", "content": {"continue": "Continue"}}, {"action": "accept", "content": {}}),
        ({"action": "accept"}, {"action": "accept", "content": {}}),
        ({"action": "decline"}, {"action": "decline"}),
        ({"action": "cancel", "content": {"continue": "Continue"}}, {"action": "cancel"}),
        (ClientError({"code": -32603, "message": "m"}), {"action": "cancel"}),
        (BAD_LINE, {"action": "cancel"}),
    ],
)
def test_the_answer_to_a_choice_form_goes_upstream_as_the_answer_to_the_empty_form(
    answer: Any, expected: dict[str, Any]
) -> None:
    assert one_answer("ok", CONFIRM, answer) == expected


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_a_refused_url_is_declined_without_asking_the_client(url: str) -> None:
    s = session()
    request = elicit(mode="url", message="Open", url=url)
    planned = s.plan_round(input_required({"open": request}, "s-1"))
    assert planned.outgoing == ()
    assert planned.immediate == {"open": {"action": "decline"}}
    assert planned.warnings == (
        "input request 'open': the bridge refused the URL of a URL elicitation, "
        "and the upstream server gets decline",
    )
    assert s.input_responses({}) == {"open": {"action": "decline"}}
    assert retry_params({"name": "ask_bad_url"}, s.input_responses({}), planned.request_state) == {
        "name": "ask_bad_url",
        "inputResponses": {"open": {"action": "decline"}},
        "requestState": "s-1",
    }


def test_loopback_urls_and_a_form_go_to_the_client_together() -> None:
    urls = ["http://127.0.0.1:9/cb", "http://[::1]:9/cb", "http://localhost:9/cb"]
    requests = {f"u{i}": elicit(mode="url", message="Open", url=url) for i, url in enumerate(urls)}
    requests["bad"] = elicit(mode="url", message="Open", url="javascript:alert(1)")
    requests["about"] = FORM
    s = session()
    planned = s.plan_round(input_required(requests, "s-1"))
    assert [o.key for o in planned.outgoing] == ["u0", "u1", "u2", "about"]
    assert [o.params["elicitationId"] for o in planned.outgoing[:3] if o.params] == [
        "elicitation-1",
        "elicitation-2",
        "elicitation-3",
    ]
    assert_valid_for_client(planned.outgoing)
    answers = {key: {"action": "accept"} for key in ("u0", "u1", "u2")}
    answers["about"] = {"action": "decline"}
    responses = s.input_responses(answers)
    assert responses is not None and list(responses) == ["u0", "u1", "u2", "bad", "about"]
    assert responses["bad"] == {"action": "decline"}


# ------------------------------------------------------------------ answers: elicitations


def test_an_accepted_form_passes_its_content() -> None:
    answer = {"action": "accept", "content": {"name": "Ada", "age": 36, "admin": True, "color": "green"}}
    assert one_answer("about", FORM, answer) == answer


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_and_cancel_lose_their_content(action: str) -> None:
    assert one_answer("about", FORM, {"action": action, "content": {"name": "x"}, "_meta": {}}) == {
        "action": action
    }


@pytest.mark.parametrize(
    "answer",
    [
        ClientError({"code": -32603, "message": "m"}),
        ClientError({"code": -32000, "message": "refused", "data": {"x": 1}}),
        BAD_LINE,
    ],
)
def test_a_client_error_or_a_bad_line_cancels_an_elicitation_and_the_call_goes_on(answer: Any) -> None:
    assert one_answer("about", FORM, answer) == {"action": "cancel"}
    assert one_answer("auth", URL, answer) == {"action": "cancel"}


@pytest.mark.parametrize(
    "content",
    [
        {"age": 36},  # missing required name
        {"name": ""},  # minLength
        {"name": "Ada", "age": "36"},  # wrong type: VS Code sends text
        {"name": "Ada", "age": 200},  # maximum
        {"name": "Ada", "age": -1},  # minimum
        {"name": "Ada", "age": 3.5},  # not an integer
        {"name": "Ada", "admin": "yes"},  # not a boolean
        {"name": "Ada", "color": "blue"},  # enum
        {"name": 7},
        None,  # no content: {} lacks the required name
    ],
)
def test_invalid_accepted_content_fails_with_the_exact_detail(content: Any) -> None:
    answer: dict[str, Any] = {"action": "accept"}
    if content is not None:
        answer["content"] = content
    error = fails(lambda: one_answer("about", FORM, answer))
    assert error.cause == "invalid_client_answer"
    assert (
        error.detail == "input request 'about': the accepted content is not valid against the requestedSchema"
    )


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "maybe"},
        {},
        {"action": None},
        {"action": "accept", "content": [1]},
        {"action": "accept", "content": {"name": {"first": "Ada"}}},
        {"action": "decline", "content": {"x": None}},
        {"action": "accept", "_meta": []},
        [],
        "accept",
        None,
    ],
)
def test_a_result_that_is_not_an_elicit_result_fails_with_the_exact_detail(answer: Any) -> None:
    error = fails(lambda: one_answer("about", FORM, answer))
    assert error.cause == "invalid_client_answer"
    assert (
        error.detail == "input request 'about': the elicitation result does not have the shape of the schema"
    )


def test_an_accepted_url_never_carries_content_upstream() -> None:
    assert one_answer("auth", URL, {"action": "accept", "content": {"a": 1}}) == {"action": "accept"}
    assert one_answer("auth", URL, {"action": "decline"}) == {"action": "decline"}
    error = fails(lambda: one_answer("auth", URL, {"action": "maybe"}))
    assert (
        error.detail == "input request 'auth': the elicitation result does not have the shape of the schema"
    )


# ----------------------------------------------------------------- answers: sampling, roots


def test_a_sampling_result_goes_upstream_verbatim() -> None:
    answer = {**MODEL_ANSWER, "_meta": {"k": "v"}, "extra": [1]}
    assert one_answer("s", SAMPLE, answer) is answer


def test_a_client_error_to_a_sampling_request_fails_the_call_with_that_error() -> None:
    refusal = {"code": -32000, "message": "The user refused the request.", "data": {"reason": "denied"}}
    with pytest.raises(ClientFailed) as info:
        one_answer("s", SAMPLE, ClientError(refusal))
    assert info.value.error == refusal


@pytest.mark.parametrize(
    "answer",
    [
        {"role": "x"},
        {**MODEL_ANSWER, "role": "system"},
        {**MODEL_ANSWER, "model": 1},
        {"role": "assistant", "content": {"type": "text", "text": "Hello"}},
        {**MODEL_ANSWER, "content": {"type": "text"}},
        [],
    ],
)
def test_a_sampling_result_without_the_shape_of_the_schema_fails_with_the_exact_detail(answer: Any) -> None:
    error = fails(lambda: one_answer("s", SAMPLE, answer))
    assert error.cause == "invalid_client_answer"
    assert error.detail == "input request 's': the sampling result does not have the shape of the schema"


@pytest.mark.parametrize(("key", "input_request"), [("s", SAMPLE), ("r", ROOTS)])
def test_a_bad_line_to_a_sampling_or_roots_request_fails_with_the_exact_detail(
    key: str, input_request: dict[str, Any]
) -> None:
    error = fails(lambda: one_answer(key, input_request, BAD_LINE))
    assert error.cause == "invalid_client_answer"
    assert error.detail == f"input request '{key}': the answer of the client is not a valid message"


def test_roots_that_are_not_file_uris_are_dropped() -> None:
    s = session()
    s.plan_round(input_required({"r": ROOTS}))
    notes: list[str] = []
    answer = {
        "roots": [
            {"uri": "file:///home/ada/project", "name": "project", "_meta": {"a": 1}, "extra": 1},
            {"uri": "vscode-remote://wsl/x"},
            {"uri": "https://example.com/"},
        ],
        "_meta": {},
    }
    assert s.input_responses({"r": answer}, notes) == {
        "r": {"roots": [{"uri": "file:///home/ada/project", "name": "project", "_meta": {"a": 1}}]}
    }
    assert notes == ["input request 'r': dropped a root that is not a file URI"] * 2


def test_a_client_error_to_roots_fails_the_call_with_that_error_and_its_data() -> None:
    error = {"code": -32601, "message": "Method not found", "data": {"method": "roots/list"}}
    with pytest.raises(ClientFailed) as info:
        one_answer("r", ROOTS, ClientError(error))
    assert info.value.error == error


@pytest.mark.parametrize(
    "answer", [{}, {"roots": [{"name": "x"}]}, {"roots": "file:///"}, {"roots": [{"uri": 1}]}]
)
def test_a_roots_result_without_the_shape_of_the_schema_fails_with_the_exact_detail(answer: Any) -> None:
    error = fails(lambda: one_answer("r", ROOTS, answer))
    assert error.cause == "invalid_client_answer"
    assert error.detail == "input request 'r': the roots result does not have the shape of the schema"


def test_every_outgoing_request_needs_an_answer_and_an_unknown_key_is_an_error() -> None:
    s = session()
    s.plan_round(input_required({"about": FORM, "where": ROOTS}))
    with pytest.raises(KeyError):
        s.input_responses({"about": {"action": "cancel"}})
    with pytest.raises(KeyError):
        s.shape_answer("nope", {"action": "cancel"})


# ------------------------------------------------------------------ rules across the rounds


def test_the_same_url_in_a_later_round_becomes_the_continue_form_and_completes_after_it() -> None:
    s = session()
    ask_url = input_required({"auth": URL}, "s-1")
    assert s.completions_after_round(ask_url) == []
    first = s.plan_round(ask_url)
    assert first.outgoing[0].params is not None and first.outgoing[0].params["url"] == SIGN_IN_URL
    assert s.input_responses({"auth": {"action": "accept"}}) == {"auth": {"action": "accept"}}

    again = input_required({"auth": URL}, "s-2")
    assert s.completions_after_round(again) == []
    second = s.plan_round(again)
    (request,) = second.outgoing
    assert request.method == "elicitation/create"
    assert request.params == {
        "mode": "form",
        "message": "Complete the step in the web browser. Then select Continue.",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "continue": {
                    "type": "string",
                    "title": "Continue",
                    "enum": ["Continue"],
                    "default": "Continue",
                }
            },
            "required": ["continue"],
        },
    }
    assert_valid_for_client(second.outgoing)
    answer = {"action": "accept", "content": {"continue": "Continue"}}
    assert s.input_responses({"auth": answer}) == {"auth": {"action": "accept"}}

    done = {"resultType": "complete", "content": []}
    assert s.completions_after_round(done) == ["elicitation-1"]
    assert s.completions_after_round(done) == []
    assert s.completions_on_failure() == []


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"action": "decline"}, "decline"),
        ({"action": "cancel"}, "cancel"),
        ({"action": "maybe"}, "cancel"),
        ({}, "cancel"),
        (ClientError({"code": 1, "message": "m"}), "cancel"),
        (BAD_LINE, "cancel"),
    ],
)
def test_the_answer_to_the_continue_form_is_its_action_only(answer: Any, expected: str) -> None:
    s = session()
    s.plan_round(input_required({"auth": URL}))
    s.input_responses({"auth": {"action": "accept"}})
    s.plan_round(input_required({"auth": URL}))
    assert s.input_responses({"auth": answer}) == {"auth": {"action": expected}}


def test_a_client_without_form_mode_gets_the_same_url_with_the_same_id() -> None:
    s = session(ClientKinds(url=True))
    for _ in range(3):
        planned = s.plan_round(input_required({"auth": URL}))
        assert planned.outgoing[0].params == {**URL["params"], "elicitationId": "elicitation-1"}
        s.input_responses({"auth": {"action": "accept"}})


def test_a_completion_goes_out_before_a_following_form_round() -> None:
    s = session()
    s.plan_round(input_required({"auth": URL}, "s-1"))
    s.input_responses({"auth": {"action": "accept", "content": {"x": 1}}})
    form_round = input_required({"about": FORM}, "s-2")
    assert s.completions_after_round(form_round) == ["elicitation-1"]
    planned = s.plan_round(form_round)
    assert [o.key for o in planned.outgoing] == ["about"]
    s.input_responses({"about": {"action": "accept", "content": {"name": "Ada"}}})
    assert s.completions_after_round({"resultType": "complete"}) == []
    assert s.completions_on_failure() == []


def test_a_declined_url_gets_no_completion() -> None:
    s = session()
    s.plan_round(input_required({"auth": URL}))
    s.input_responses({"auth": {"action": "decline"}})
    assert s.completions_after_round({"resultType": "complete"}) == []
    assert s.completions_on_failure() == []


def test_completions_on_failure_name_each_accepted_url_once() -> None:
    s = session()
    pay = elicit(mode="url", message="Pay", url="https://example.com/pay")
    s.plan_round(input_required({"auth": URL, "pay": pay}))
    s.input_responses({"auth": {"action": "accept"}, "pay": {"action": "decline"}})
    assert s.completions_on_failure() == ["elicitation-1"]
    assert s.completions_on_failure() == []


def test_a_completed_url_asked_for_again_gets_a_new_id_and_is_shown_again() -> None:
    s = session()
    s.plan_round(input_required({"auth": URL}))
    s.input_responses({"auth": {"action": "accept"}})
    assert s.completions_after_round(input_required({"about": FORM})) == ["elicitation-1"]
    planned = s.plan_round(input_required({"auth": URL}))
    assert planned.outgoing[0].params == {**URL["params"], "elicitationId": "elicitation-2"}


def test_an_unanswered_url_keeps_its_id_in_the_next_round() -> None:
    s = session()
    s.plan_round(input_required({"auth": URL}))
    s.input_responses({"auth": BAD_LINE})
    planned = s.plan_round(input_required({"auth": URL}))
    assert planned.outgoing[0].params is not None
    assert planned.outgoing[0].params["elicitationId"] == "elicitation-1"


# ---------------------------------------------------------------------------- retry params


def test_retry_params_keep_the_tool_and_echo_the_request_state_exactly() -> None:
    original = {
        "name": "ask",
        "arguments": {"a": 1},
        "_meta": {"k": "v"},
        "inputResponses": {"old": {}},
        "requestState": "old",
    }
    responses = {"k": {"action": "cancel"}}
    assert retry_params(original, responses, "s-1") == {
        "name": "ask",
        "arguments": {"a": 1},
        "_meta": {"k": "v"},
        "inputResponses": responses,
        "requestState": "s-1",
    }
    assert retry_params(original, None, None) == {"name": "ask", "arguments": {"a": 1}, "_meta": {"k": "v"}}
    assert retry_params(None, None, " \u00e9 ") == {"requestState": " \u00e9 "}
    assert original["requestState"] == "old"


# ------------------------------------------------------------------------------ properties

KEYS = st.sampled_from(
    [
        "method",
        "params",
        "type",
        "mode",
        "url",
        "message",
        "content",
        "action",
        "role",
        "messages",
        "maxTokens",
    ]
) | st.text(max_size=6)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", "form", "url", "accept", "text", "user", "elicitation/create", "https://a/"])
    | st.text(max_size=8)
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=5),
    max_leaves=25,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, member in value.items():
            found += paths(member, (*prefix, key))
    elif isinstance(value, list):
        for index, member in enumerate(value):
            found += paths(member, (*prefix, index))
    return found


def mutated(example: Any) -> st.SearchStrategy[Any]:
    """The example with one member replaced by arbitrary JSON, or removed."""

    def apply(choice: tuple[tuple[Any, ...], Any, bool]) -> Any:
        path, replacement, remove = choice
        if not path:
            return replacement
        value = copy.deepcopy(example)
        parent = value
        for step in path[:-1]:
            parent = parent[step]
        if remove and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = replacement
        return value

    return st.tuples(st.sampled_from(paths(example)), JSON, st.booleans()).map(apply)


ROUND_EXAMPLE = {
    "resultType": "input_required",
    "inputRequests": {
        "about": FORM,
        "auth": URL,
        "local": elicit(mode="url", message="m", url="http://127.0.0.1:1/x"),
        "refused": elicit(mode="url", message="m", url="http://example.com/x"),
        "s": {"method": "sampling/createMessage", "params": TOOLS_SAMPLES["tool content"]},
        "r": ROOTS,
        "ok": CONFIRM,
    },
    "requestState": "s-1",
}
REQUEST_EXAMPLES: dict[str, Any] = ROUND_EXAMPLE["inputRequests"]  # type: ignore[assignment]


def some_requests() -> st.SearchStrategy[dict[str, Any]]:
    """A few example input requests, each as it is or mutated."""
    return st.lists(st.sampled_from(sorted(REQUEST_EXAMPLES)), min_size=1, max_size=4, unique=True).flatmap(
        lambda keys: st.fixed_dictionaries(
            {key: st.one_of(st.just(REQUEST_EXAMPLES[key]), mutated(REQUEST_EXAMPLES[key])) for key in keys}
        )
    )


RESULTS = st.one_of(JSON, mutated(ROUND_EXAMPLE), some_requests().map(lambda r: input_required(r, "s-1")))
PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@PROPERTY_SETTINGS
@given(RESULTS, st.sampled_from([VSCODE, WITH_TOOLS, FORM_ONLY, ClientKinds()]))
def test_any_result_either_plans_requests_valid_for_the_client_or_fails_with_an_input_error(
    result: Any, kinds: ClientKinds
) -> None:
    try:
        planned = session(kinds).plan_round(result)
    except InputError as error:
        assert error.cause in {"invalid_input_request", "too_many_input_requests", "undeclared_input_request"}
        assert error.detail
        return
    assert_valid_for_client(planned.outgoing)


ANSWER_EXAMPLES = {
    "about": {"action": "accept", "content": {"name": "Ada", "age": 3}},
    "auth": {"action": "accept"},
    "local": {"action": "decline"},
    "refused": {"action": "accept"},
    "s": MODEL_ANSWER,
    "r": {"roots": [{"uri": "file:///w", "name": "w"}]},
    "ok": {"action": "accept", "content": {"continue": "Continue"}},
}
ANSWERS = st.one_of(JSON, st.builds(ClientError, st.dictionaries(KEYS, JSON)), st.just(BAD_LINE))


@PROPERTY_SETTINGS
@given(
    st.sampled_from(sorted(ANSWER_EXAMPLES)),
    st.one_of(
        ANSWERS, st.sampled_from(sorted(ANSWER_EXAMPLES)).flatmap(lambda k: mutated(ANSWER_EXAMPLES[k]))
    ),
)
def test_any_answer_either_gives_a_response_or_fails_with_a_round_error(key: str, answer: Any) -> None:
    s = session(WITH_TOOLS)
    s.plan_round(ROUND_EXAMPLE)
    answers: dict[str, Any] = dict(ANSWER_EXAMPLES)
    answers[key] = answer
    try:
        responses = s.input_responses(answers)
    except InputError as error:
        assert error.cause == "invalid_client_answer" and f"'{key}'" in str(error.detail)
        return
    except ClientFailed as error:
        assert key in ("s", "r") and isinstance(answer, ClientError) and error.error is answer.error
        return
    assert responses is not None and list(responses) == list(REQUEST_EXAMPLES)
    for name in ("about", "auth", "local", "refused", "ok"):
        assert responses[name]["action"] in ("accept", "decline", "cancel")
        assert set(responses[name]) <= {"action", "content"}
    assert "content" not in responses["auth"] and "content" not in responses["local"]
    assert responses["refused"] == {"action": "decline"}


@PROPERTY_SETTINGS
@given(st.data())
def test_shape_answer_for_arbitrary_json_raises_only_round_errors(data: st.DataObject) -> None:
    s = session(WITH_TOOLS)
    s.plan_round(ROUND_EXAMPLE)
    key = data.draw(st.sampled_from(["about", "auth", "s", "r", "ok"]))
    try:
        s.shape_answer(key, data.draw(ANSWERS))
    except RoundFailed:
        pass


DIFFERENTIAL_EXAMPLES = {
    "CreateMessageRequestParams": {**TOOLS_SAMPLES["tool content"], "tools": TOOLS_SAMPLES["tools"]["tools"]},
    "CreateMessageResult": MODEL_ANSWER,
    "ListRootsResult": {"roots": [{"uri": "file:///w", "name": "w"}]},
    "ElicitRequestURLParams": {**URL["params"], "elicitationId": "e"},
    "PrimitiveSchemaDefinition": {"type": "string", "oneOf": [{"const": "a", "title": "A"}]},
    "ContentBlock": {
        "type": "resource",
        "resource": {"uri": "file:///x", "text": "t"},
        "annotations": {"audience": ["user"], "priority": 0.5},
    },
    "Tool": {
        "name": "t",
        "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        "icons": [{"src": "https://a/i.png", "theme": "dark"}],
        "annotations": {"readOnlyHint": True},
    },
}


@PROPERTY_SETTINGS
@given(
    st.sampled_from(sorted(DIFFERENTIAL_EXAMPLES)).flatmap(
        lambda name: st.tuples(st.just(name), mutated(DIFFERENTIAL_EXAMPLES[name]))
    )
)
def test_the_shape_check_agrees_with_a_json_schema_validator(case: tuple[str, Any]) -> None:
    name, value = case
    try:
        validate_legacy(value, name)
        valid = True
    except FrameInvalid:
        valid = False
    assert conforms(value, name) is valid
