"""The TypeScript SDK client (the 2025-11-25 client VS Code resembles) in front of the real bridge.

``tests/interop/legacy_client.mjs`` spawns ``python -m mcpbridge -- <upstream>``,
answers the bridge's requests as VS Code does, carries out a plan and prints what
it saw; the tests here check that summary. Two upstream servers: our fixture
server, and a server written with the official Python SDK (``mcp==2.3.0``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from conftest import REPO_ROOT, NodePeers
from harness import run_node_client

pytestmark = [pytest.mark.interop, pytest.mark.slow]

SCRIPT = REPO_ROOT / "tests" / "interop" / "legacy_client.mjs"
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "fixture_server.py"
PEER = REPO_ROOT / "tests" / "peers" / "py_modern_stdio_server.py"
#: The script stops itself after 100 s; this bounds the wait for it.
MANY_TOOLS = 150
#: How long the bridge may take to exit after the end of its stdin: the 2 s after which the SDK's
#: close would stop it with SIGTERM (the wait of the script starts first, so it ends first).
EXIT_MS = 2000
FIXTURE_NOTES = "file:///fixture/notes.txt"
PEER_NOTES = "file:///peer/notes.txt"

FIXTURE_STEPS: list[dict[str, Any]] = [
    {"id": "add", "kind": "call", "name": "add", "arguments": {"a": 2, "b": 3}},
    {"id": "echo", "kind": "call", "name": "echo", "arguments": {"text": "héllo ✓"}},
    {"id": "bare_array", "kind": "call", "name": "bare_array", "arguments": {"values": [1, 2, 3]}},
    {
        "id": "progress",
        "kind": "call",
        "name": "progress",
        "arguments": {"count": 3, "ms": 10},
        "progress": True,
    },
    {"id": "ask_form", "kind": "call", "name": "ask_form"},
    {"id": "ask_url", "kind": "call", "name": "ask_url"},
    {"id": "ask_bad_url", "kind": "call", "name": "ask_bad_url"},
    {"id": "ask_url_twice", "kind": "call", "name": "ask_url_twice"},
    {"id": "sample", "kind": "call", "name": "sample"},
    {"id": "list_roots", "kind": "call", "name": "list_roots"},
    {"id": "multi", "kind": "call", "name": "multi"},
    {"id": "greet", "kind": "prompt", "name": "greet", "arguments": {"name": "Ada"}},
    {"id": "ask_name", "kind": "prompt", "name": "ask_name"},
    {"id": "notes", "kind": "read", "uri": FIXTURE_NOTES},
    {"id": "toggle_off", "kind": "call", "name": "toggle", "arguments": {"enabled": False}},
    {"id": "toggle_on", "kind": "call", "name": "toggle", "arguments": {"enabled": True}},
    {"id": "subscribe", "kind": "subscribe", "uri": FIXTURE_NOTES},
    {"id": "touch", "kind": "call", "name": "touch", "arguments": {"uri": FIXTURE_NOTES}},
    {"id": "unsubscribe", "kind": "unsubscribe", "uri": FIXTURE_NOTES},
    {"id": "set_level", "kind": "setLevel", "level": "warning"},
    {"id": "log", "kind": "call", "name": "log"},
    {"id": "set_level_debug", "kind": "setLevel", "level": "debug"},
    {"id": "log_debug", "kind": "call", "name": "log"},
]

PEER_STEPS: list[dict[str, Any]] = [
    {"id": "add", "kind": "call", "name": "add", "arguments": {"a": 2, "b": 3}},
    {"id": "echo", "kind": "call", "name": "echo", "arguments": {"text": "héllo ✓"}},
    {"id": "progress", "kind": "call", "name": "progress", "arguments": {"count": 3}, "progress": True},
    {"id": "ask_name", "kind": "call", "name": "ask_name"},
    {"id": "greet", "kind": "prompt", "name": "greet", "arguments": {"name": "Ada"}},
    {"id": "notes", "kind": "read", "uri": PEER_NOTES},
    {"id": "toggle_on", "kind": "call", "name": "toggle", "arguments": {"enabled": True}},
    {"id": "wait_tools", "kind": "wait", "method": "notifications/tools/list_changed"},
    {"id": "subscribe", "kind": "subscribe", "uri": PEER_NOTES},
    {"id": "touch", "kind": "call", "name": "touch", "arguments": {"uri": PEER_NOTES}},
    {"id": "wait_updated", "kind": "wait", "method": "notifications/resources/updated", "uri": PEER_NOTES},
    {"id": "unsubscribe", "kind": "unsubscribe", "uri": PEER_NOTES},
]


def run_legacy_client(
    node: NodePeers,
    upstream: list[str],
    steps: list[dict[str, Any]],
    timeout_ms: int = 20000,
    *,
    url: str | None = None,
    options: tuple[str, ...] = (),
    list_changed: bool = False,
) -> dict[str, Any]:
    """Run the script against the bridge before ``upstream`` (a command), or before ``url``.

    ``options`` go to the bridge; with ``list_changed`` the client fetches a list again at its change.
    """
    target = [url] if url is not None else ["--", *upstream]
    plan = {
        "command": sys.executable,
        "args": ["-m", "mcpbridge", *options, *target],
        "cwd": str(REPO_ROOT),
        "timeoutMs": timeout_ms,
        "exitMs": EXIT_MS,
        "listChanged": list_changed,
        "steps": steps,
    }
    return run_node_client(node, SCRIPT, plan)


@pytest.fixture(scope="module")
def fixture_run(node: NodePeers) -> dict[str, Any]:
    """One run of the TypeScript client through the bridge to the fixture server."""
    upstream = [sys.executable, str(FIXTURE), "--many-tools", str(MANY_TOOLS)]
    return run_legacy_client(node, upstream, FIXTURE_STEPS)


#: The steps of a run that shows when the bridge writes list changes: the listen stream opens,
#: a call goes through, the server ends its listen streams, and a new stream opens after the loss.
LISTEN_STEPS: list[dict[str, Any]] = [
    {"id": "open", "kind": "stderr", "text": "the listen stream is open"},
    {"id": "add", "kind": "call", "name": "add", "arguments": {"a": 2, "b": 3}},
    {"id": "end_listen", "kind": "call", "name": "end_listen"},
    {"id": "reopen", "kind": "stderr", "text": "the listen stream is open again"},
    *(
        {"id": f"wait_{kind}", "kind": "wait", "method": f"notifications/{kind}/list_changed"}
        for kind in ("tools", "prompts", "resources")
    ),
    {"id": "add_again", "kind": "call", "name": "add", "arguments": {"a": 1, "b": 1}},
]


@pytest.fixture(scope="module")
def listen_run(node: NodePeers) -> dict[str, Any]:
    """One run of the TypeScript client, fetching each list again at its change as VS Code does."""
    upstream = [sys.executable, str(FIXTURE)]
    return run_legacy_client(
        node, upstream, LISTEN_STEPS, options=("--log-level", "debug"), list_changed=True
    )


@pytest.fixture(scope="module")
def peer_run(node: NodePeers) -> dict[str, Any]:
    """One run of the TypeScript client through the bridge to the Python SDK server, which speaks
    both eras: ``--protocol 2026-07-28`` makes the bridge translate (the default passes it through)."""
    return run_legacy_client(
        node, [sys.executable, str(PEER)], PEER_STEPS, options=("--protocol", "2026-07-28")
    )


def step(summary: dict[str, Any], step_id: str) -> dict[str, Any]:
    record: dict[str, Any] = summary["steps"][step_id]
    assert "error" not in record, f"{step_id}: {record['error']}"
    return record


def notification_index(summary: dict[str, Any], method: str, after: int = 0) -> int:
    events: list[str] = summary["events"]
    return events.index(f"notification {method}", after)


def response_index(summary: dict[str, Any], step_id: str) -> int:
    request_id = summary["steps"][step_id]["requestIds"][-1]
    events: list[str] = summary["events"]
    return events.index(f"response {request_id}")


# ------------------------------------------------------------------- fixture server


def test_the_sdk_client_negotiates_2025_11_25_with_the_bridge_and_sees_the_upstream_identity(
    fixture_run: dict[str, Any],
) -> None:
    assert fixture_run["protocolVersion"] == "2025-11-25"
    assert fixture_run["serverInfo"] == {"name": "bridge-fixture-server", "version": "0.0.0"}
    assert fixture_run["instructions"] == "The upstream server of the mcpbridge tests."
    capabilities = fixture_run["capabilities"]
    assert capabilities["tools"] == {"listChanged": True}
    assert capabilities["prompts"] == {"listChanged": True}
    assert capabilities["resources"] == {"subscribe": True, "listChanged": True}
    assert "logging" in capabilities and "completions" in capabilities
    assert "tasks" not in capabilities


def test_the_sdk_client_pages_through_every_tool_with_string_cursors_only(
    fixture_run: dict[str, Any],
) -> None:
    tools = fixture_run["tools"]
    names: list[str] = tools["names"]
    assert tools["pages"] == 2
    assert tools["cursorTypes"] == ["string", "absent"]
    assert len(names) == len(set(names))
    assert {f"tool_{i}" for i in range(MANY_TOOLS)} <= set(names)
    assert {"add", "echo", "ask_form", "toggle", "toggled"} <= set(names)


def test_every_tool_schema_passes_ajv_and_every_array_has_items(fixture_run: dict[str, Any]) -> None:
    assert fixture_run["tools"]["invalidSchemas"] == []
    assert fixture_run["tools"]["arraysWithoutItems"] == 0


def test_plain_tool_calls_come_back_unchanged(fixture_run: dict[str, Any]) -> None:
    assert step(fixture_run, "add")["text"] == "5"
    assert step(fixture_run, "echo")["text"] == "héllo ✓"
    assert step(fixture_run, "bare_array")["text"] == "3 values"
    assert step(fixture_run, "add")["isError"] is False


def test_progress_of_a_call_reaches_the_sdk_client_before_its_result(fixture_run: dict[str, Any]) -> None:
    record = step(fixture_run, "progress")
    assert record["text"] == "sent 3 progress notifications"
    token = record["requestIds"][-1]
    assert record["progress"] == [
        {"progressToken": token, "progress": i, "total": 3, "message": f"Step {i} of 3"} for i in (1, 2, 3)
    ]
    last_progress = max(
        i for i, e in enumerate(fixture_run["events"]) if e == "notification notifications/progress"
    )
    assert last_progress < response_index(fixture_run, "progress")


def test_a_form_elicitation_of_the_upstream_is_answered_by_the_sdk_client(
    fixture_run: dict[str, Any],
) -> None:
    text = step(fixture_run, "ask_form")["text"]
    prefix = "form: accept "
    assert text.startswith(prefix)
    assert json.loads(text[len(prefix) :]) == {"name": "Ada", "age": 36, "subscribe": True, "color": "red"}
    forms = [r for r in fixture_run["requests"] if (r["params"] or {}).get("message") == "Tell us about you."]
    assert len(forms) == 1
    assert forms[0]["params"]["requestedSchema"]["required"] == ["name"]


def test_url_elicitations_carry_an_id_and_are_completed_and_file_urls_never_reach_the_client(
    fixture_run: dict[str, Any],
) -> None:
    assert step(fixture_run, "ask_url")["text"] == "url: accept"
    assert step(fixture_run, "ask_bad_url")["text"] == "url: decline"
    # The same URL in a second round is not shown again: the client gets a Continue form.
    assert step(fixture_run, "ask_url_twice")["text"] == "url twice: accept"
    urls = [r["params"] for r in fixture_run["requests"] if (r["params"] or {}).get("mode") == "url"]
    assert [u["url"] for u in urls] == ["https://example.com/auth", "https://example.com/auth"]
    ids = [u["elicitationId"] for u in urls]
    assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == 2
    completions = [
        n["params"]
        for n in fixture_run["notifications"]
        if n["method"] == "notifications/elicitation/complete"
    ]
    assert sorted(c["elicitationId"] for c in completions) == sorted(ids)
    continue_forms = [
        r["params"]
        for r in fixture_run["requests"]
        if r["method"] == "elicitation/create"
        and (r["params"] or {}).get("mode") != "url"
        and "continue" in r["params"]["requestedSchema"].get("properties", {})
    ]
    assert len(continue_forms) == 1
    assert continue_forms[0]["requestedSchema"]["properties"]["continue"]["enum"] == ["Continue"]
    assert not any(
        "file:" in json.dumps(r["params"]) for r in fixture_run["requests"] if r["method"] != "roots/list"
    )


def test_the_roots_of_the_sdk_client_reach_the_upstream_alone_and_with_a_form(
    fixture_run: dict[str, Any],
) -> None:
    assert step(fixture_run, "list_roots")["text"] == "roots: " + REPO_ROOT.as_uri()
    assert step(fixture_run, "multi")["text"] == "name: Ada (accept); roots: 1"
    roots = [r for r in fixture_run["requests"] if r["method"] == "roots/list"]
    assert len(roots) == 2
    assert not [n for n in fixture_run["notifications"] if n["method"] == "notifications/cancelled"]


def test_sampling_of_the_upstream_is_answered_by_the_sdk_client(fixture_run: dict[str, Any]) -> None:
    assert step(fixture_run, "sample")["text"] == "model: hello"
    sampling = [r["params"] for r in fixture_run["requests"] if r["method"] == "sampling/createMessage"]
    assert sampling and sampling[0]["maxTokens"] == 50
    assert "tools" not in sampling[0] and "task" not in sampling[0]


def test_prompts_and_resources_are_served_through_the_bridge(fixture_run: dict[str, Any]) -> None:
    assert {"greet", "ask_name", "toggled"} <= set(fixture_run["prompts"])
    assert FIXTURE_NOTES in fixture_run["resources"]
    assert step(fixture_run, "greet")["text"] == "Hello, Ada."
    assert step(fixture_run, "ask_name")["text"] == "Hello, Ada."
    notes = step(fixture_run, "notes")["contents"]
    assert notes == [{"uri": FIXTURE_NOTES, "mimeType": "text/plain", "text": "The notes of the fixture."}]


def test_a_toggle_sends_the_tools_list_change_before_the_result_of_the_call(
    fixture_run: dict[str, Any],
) -> None:
    assert step(fixture_run, "toggle_off")["text"] == "tool toggled: disabled"
    assert step(fixture_run, "toggle_on")["text"] == "tool toggled: enabled"
    for step_id in ("toggle_off", "toggle_on"):
        request_index = fixture_run["events"].index(
            f"response {fixture_run['steps'][step_id]['requestIds'][-1]}"
        )
        previous = [e for e in fixture_run["events"][:request_index] if "tools/list_changed" in e]
        assert previous, f"no tools/list_changed before the result of {step_id}"
    changes = [n for n in fixture_run["notifications"] if n["method"] == "notifications/tools/list_changed"]
    assert all(n["params"] in (None, {}) for n in changes)
    # One list change per toggle of the tool, none when the bridge starts listening.
    counts = {
        kind: sum(
            1 for n in fixture_run["notifications"] if n["method"] == f"notifications/{kind}/list_changed"
        )
        for kind in ("tools", "prompts", "resources")
    }
    assert counts == {"tools": 2, "prompts": 0, "resources": 0}


def test_a_subscribed_resource_update_reaches_the_client_before_the_result_of_the_touch(
    fixture_run: dict[str, Any],
) -> None:
    assert step(fixture_run, "subscribe")["result"] == {}
    assert step(fixture_run, "touch")["text"] == f"touched {FIXTURE_NOTES}"
    assert step(fixture_run, "unsubscribe")["result"] == {}
    updates = [n for n in fixture_run["notifications"] if n["method"] == "notifications/resources/updated"]
    assert [u["params"] for u in updates] == [{"uri": FIXTURE_NOTES}]
    assert notification_index(fixture_run, "notifications/resources/updated") < response_index(
        fixture_run, "touch"
    )


def test_log_messages_follow_the_level_the_client_set(fixture_run: dict[str, Any]) -> None:
    assert step(fixture_run, "set_level")["result"] == {}
    assert step(fixture_run, "log")["text"] == "logged 4 messages"
    logs = [n["params"] for n in fixture_run["notifications"] if n["method"] == "notifications/message"]
    levels = [entry["level"] for entry in logs if entry.get("logger") == "fixture"]
    assert levels == ["warning", "error", "debug", "info", "warning", "error"]
    assert step(fixture_run, "log_debug")["text"] == "logged 4 messages"
    assert {entry["data"] for entry in logs if entry.get("logger") == "fixture"} == {
        f"a message at the level {level}" for level in ("debug", "info", "warning", "error")
    }


def test_the_bridge_sends_no_cancellation_and_exits_0_soon_after_the_end_of_stdin(
    fixture_run: dict[str, Any],
) -> None:
    assert not [n for n in fixture_run["notifications"] if n["method"] == "notifications/cancelled"]
    assert fixture_run["exit"] == {"code": 0, "signal": None}


def test_the_start_of_the_listen_stream_makes_the_client_fetch_no_list_twice(
    listen_run: dict[str, Any],
) -> None:
    events: list[str] = listen_run["events"]
    loss = response_index(listen_run, "end_listen")
    before, after = events[:loss], events[loss:]
    # Each list once, as directly against the server: no list change came before the loss,
    # though the listen stream was open and a call went through after it opened.
    assert not [e for e in before if e.endswith("/list_changed")]
    assert [e for e in before if e.startswith("sent ") and e.endswith("/list")] == [
        "sent tools/list",
        "sent prompts/list",
        "sent resources/list",
    ]
    assert step(listen_run, "open")["seen"] is True
    assert step(listen_run, "add")["text"] == "5"
    # A new stream after a real loss is a gap: one change for each list, and each list again.
    assert step(listen_run, "reopen")["seen"] is True
    assert all(step(listen_run, f"wait_{kind}")["seen"] for kind in ("tools", "prompts", "resources"))
    changes = sorted(e for e in after if e.endswith("/list_changed"))
    assert changes == [
        f"notification notifications/{kind}/list_changed" for kind in ("prompts", "resources", "tools")
    ]
    assert sorted(e for e in after if e.startswith("sent ") and e.endswith("/list")) == [
        "sent prompts/list",
        "sent resources/list",
        "sent tools/list",
    ]
    assert step(listen_run, "add_again")["text"] == "2"


# --------------------------------------------------------------- Python SDK server


def test_the_bridge_presents_the_python_sdk_server_as_a_2025_11_25_server(peer_run: dict[str, Any]) -> None:
    assert peer_run["protocolVersion"] == "2025-11-25"
    assert peer_run["serverInfo"] == {"name": "py-modern-peer", "version": "2.3.0-peer"}
    assert peer_run["instructions"] == "A peer server written with the MCP Python SDK."
    assert peer_run["capabilities"]["tools"] == {"listChanged": True}
    assert peer_run["capabilities"]["resources"]["subscribe"] is True
    assert peer_run["tools"]["pages"] == 1
    assert peer_run["tools"]["cursorTypes"] == ["absent"]
    assert {"add", "echo", "progress", "ask_name", "toggle", "touch"} <= set(peer_run["tools"]["names"])
    assert peer_run["tools"]["invalidSchemas"] == []


def test_calls_progress_prompts_and_resources_of_the_python_sdk_server_work(peer_run: dict[str, Any]) -> None:
    assert step(peer_run, "add")["text"] == "5"
    assert step(peer_run, "echo")["text"] == "héllo ✓"
    record = step(peer_run, "progress")
    assert record["text"] == "sent 3 progress notifications"
    assert [p["progress"] for p in record["progress"]] == [1, 2, 3]
    assert step(peer_run, "greet")["text"] == "Hello, Ada."
    assert step(peer_run, "notes")["text"] == "The notes of the peer."


def test_an_input_required_form_of_the_python_sdk_server_becomes_an_elicitation(
    peer_run: dict[str, Any],
) -> None:
    assert step(peer_run, "ask_name")["text"] == "Hello, Ada."
    forms = [r["params"] for r in peer_run["requests"] if r["method"] == "elicitation/create"]
    assert [f["message"] for f in forms] == ["Your name?"]


def test_list_changes_and_resource_updates_of_the_python_sdk_server_reach_the_client(
    peer_run: dict[str, Any],
) -> None:
    assert step(peer_run, "toggle_on")["text"] == "toggled: enabled"
    assert step(peer_run, "wait_tools")["seen"] is True
    assert step(peer_run, "subscribe")["result"] == {}
    assert step(peer_run, "wait_updated")["seen"] is True
    updates = [
        n["params"] for n in peer_run["notifications"] if n["method"] == "notifications/resources/updated"
    ]
    assert updates == [{"uri": PEER_NOTES}]
    assert peer_run["exit"] == {"code": 0, "signal": None}
