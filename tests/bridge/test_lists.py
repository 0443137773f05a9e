"""The pure rules of the tool filters and the list cache (mcpbridge.bridge.rules.lists)."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from mcpbridge.bridge.front.listrules import ListRules
from mcpbridge.bridge.rules.lists import (
    CACHED_METHODS,
    ListCache,
    ListingWatch,
    Outcome,
    ToolFilter,
    ttl_ms,
    unknown_tool_error,
)

NAMES = ["git_status", "git_push", "delete_repo", "read_file", "Git_log", "tool_7"]


def _tools(*names: Any) -> dict[str, Any]:
    return {"tools": [{"name": name, "inputSchema": {"type": "object"}} for name in names]}


# --------------------------------------------------------------------------- ToolFilter.hides


@pytest.mark.parametrize(
    ("allow", "deny", "visible"),
    [
        ((), (), NAMES),
        (("git_*",), (), ["git_status", "git_push"]),
        ((), ("*delete*",), ["git_status", "git_push", "read_file", "Git_log", "tool_7"]),
        (("git_*",), ("git_push",), ["git_status"]),
        # deny wins over allow, whatever the order of the options
        (("*",), ("*",), []),
        (("git_*", "read_*"), ("*push*",), ["git_status", "read_file"]),
        # the match is case-sensitive on every system
        (("git_*",), (), ["git_status", "git_push"]),
        (("[Gg]it_*",), (), ["git_status", "git_push", "Git_log"]),
        (("tool_[0-9]",), (), ["tool_7"]),
        (("tool_?",), (), ["tool_7"]),
        # a pattern matches the whole name, not a part of it
        (("git",), (), []),
        ((), ("status",), NAMES),
        (("nothing_*",), (), []),
    ],
)
def test_hides(allow: tuple[str, ...], deny: tuple[str, ...], visible: list[str]) -> None:
    tool_filter = ToolFilter(allow, deny)
    assert [name for name in NAMES if not tool_filter.hides(name)] == visible


@pytest.mark.parametrize(
    ("allow", "deny", "hidden"),
    [((), (), False), ((), ("*",), False), (("*",), (), True)],
)
def test_a_name_that_is_not_a_string_is_hidden_only_with_allow_patterns(
    allow: tuple[str, ...], deny: tuple[str, ...], hidden: bool
) -> None:
    tool_filter = ToolFilter(allow, deny)
    for name in (None, 7, ["git_status"]):
        assert tool_filter.hides(name) is hidden


@pytest.mark.parametrize("bad", ["", None, 3])
def test_a_pattern_must_be_a_text(bad: Any) -> None:
    with pytest.raises(ValueError, match="not empty"):
        ToolFilter(allow=(bad,))
    with pytest.raises(ValueError, match="not empty"):
        ToolFilter(deny=("ok", bad))


def test_active_and_patterns() -> None:
    assert not ToolFilter().active
    assert ToolFilter(allow=("a",)).active
    assert ToolFilter(deny=("a",)).active
    assert ToolFilter(("a", "b", "a"), ("b", "c")).patterns == ("a", "b", "c")


# --------------------------------------------------------------------------- pages


@pytest.mark.parametrize(
    ("allow", "deny", "kept", "hidden"),
    [
        ((), (), NAMES, 0),
        (("git_*",), (), ["git_status", "git_push"], 4),
        ((), ("*",), [], 6),
    ],
)
def test_filter_page_keeps_the_cursor_and_the_order(
    allow: tuple[str, ...], deny: tuple[str, ...], kept: list[str], hidden: int
) -> None:
    page = {**_tools(*NAMES), "nextCursor": "c2", "_meta": {"x": 1}}
    before = copy.deepcopy(page)
    out, count = ToolFilter(allow, deny).filter_page(page)
    assert [tool["name"] for tool in out["tools"]] == kept
    assert count == hidden
    assert out["nextCursor"] == "c2"
    assert out["_meta"] == {"x": 1}
    assert page == before  # the input does not change
    if hidden == 0:
        assert out is page


@pytest.mark.parametrize(
    "result",
    [None, [], {"tools": "no"}, {"prompts": []}, {"tools": [1, "x", {"title": "no name"}]}],
)
def test_filter_page_of_odd_results(result: Any) -> None:
    out, count = ToolFilter(deny=("x*",)).filter_page(result)
    assert out is result
    assert count == 0


def test_filter_page_drops_items_without_a_name_under_allow_patterns() -> None:
    page = {"tools": [1, {"title": "no name"}, {"name": "git_status"}]}
    out, count = ToolFilter(allow=("git_*",)).filter_page(page)
    assert out["tools"] == [{"name": "git_status"}]
    assert count == 2


# --------------------------------------------------------------------------- tools/call


@pytest.mark.parametrize(
    ("params", "hidden"),
    [
        ({"name": "delete_repo", "arguments": {}}, "delete_repo"),
        ({"name": "read_file"}, None),
        ({"name": 3}, None),
        ({}, None),
        (None, None),
        ("delete_repo", None),
    ],
)
def test_hidden_call(params: Any, hidden: str | None) -> None:
    assert ToolFilter(deny=("*delete*",)).hidden_call(params) == hidden


def test_no_filter_hides_no_call() -> None:
    assert ToolFilter().hidden_call({"name": "anything"}) is None


def test_the_error_of_an_unknown_tool() -> None:
    assert unknown_tool_error("delete_repo") == {"code": -32602, "message": "Unknown tool: delete_repo"}


# --------------------------------------------------------------------------- patterns that match nothing


@pytest.mark.parametrize(
    ("allow", "deny", "names", "unmatched"),
    [
        (("git_*",), ("*delete*",), NAMES, ()),
        (("gti_*",), ("*delete*",), NAMES, ("gti_*",)),
        (("git_*",), ("*delte*", "nope"), NAMES, ("*delte*", "nope")),
        (("git_*",), (), [], ("git_*",)),
        (("git_*",), (), [None, 5, "git_x"], ()),
        ((), (), NAMES, ()),
    ],
)
def test_unmatched(
    allow: tuple[str, ...], deny: tuple[str, ...], names: list[Any], unmatched: tuple[str, ...]
) -> None:
    assert ToolFilter(allow, deny).unmatched(names) == unmatched


@pytest.mark.parametrize(
    ("pattern", "option", "effect"),
    [("gti_*", "--allow-tool", "shows no tool"), ("*delte*", "--deny-tool", "hides nothing"),
     ("both", "--deny-tool", "hides nothing")],
)  # fmt: skip
def test_the_warning_names_the_option_and_the_effect(pattern: str, option: str, effect: str) -> None:
    warning = ToolFilter(allow=("gti_*", "both"), deny=("*delte*", "both")).unmatched_warning(pattern)
    assert warning == (
        f"{option} '{pattern}' matches no tool of the upstream server, so it {effect} "
        "(a pattern is case-sensitive and matches the whole name)"
    )


def test_the_watch_names_a_pattern_after_the_last_page_only() -> None:
    watch = ListingWatch(ToolFilter(allow=("git_*", "read_*"), deny=("*delte*",)))
    assert watch.page(None, {**_tools("git_status"), "nextCursor": "p2"}) == ()
    assert watch.page("p2", {**_tools("delete_repo"), "nextCursor": "p3"}) == ()
    # read_* matches a tool of the last page: only the typo is named
    assert watch.page("p3", _tools("read_file")) == ("*delte*",)
    # a later listing names a pattern that no longer matches, and the typo not again
    assert watch.page(None, _tools("git_status")) == ("read_*",)
    assert watch.page(None, _tools("git_status")) == ()


def test_the_watch_names_each_pattern_once() -> None:
    watch = ListingWatch(ToolFilter(allow=("a*",), deny=("b*",)))
    assert watch.page(None, _tools("a1")) == ("b*",)
    assert not watch.done
    assert watch.page(None, _tools("b1")) == ("a*",)
    assert watch.done
    assert watch.page(None, _tools("x")) == ()


@pytest.mark.parametrize(
    "pages",
    [
        # a page of a listing the watch did not see start
        [("p2", _tools("x"))],
        # a cursor that is not the nextCursor of a page seen before
        [(None, {**_tools("x"), "nextCursor": "p2"}), ("p9", _tools("y"))],
        # a result that is not an object
        [(None, None)],
        # a listing that is not finished
        [(None, {**_tools("x"), "nextCursor": "p2"})],
    ],
)
def test_the_watch_names_nothing_without_a_full_listing(pages: list[tuple[Any, Any]]) -> None:
    watch = ListingWatch(ToolFilter(allow=("git_*",)))
    for cursor, result in pages:
        assert watch.page(cursor, result) == ()


def test_the_watch_follows_two_listings_at_once() -> None:
    watch = ListingWatch(ToolFilter(allow=("a*", "b*")))
    assert watch.page(None, {**_tools("a1"), "nextCursor": "x2"}) == ()
    assert watch.page(None, {**_tools("zz"), "nextCursor": "y2"}) == ()
    assert watch.page("x2", _tools("b1")) == ()  # a* and b* both matched
    assert watch.page("y2", _tools("zz")) == ("a*", "b*")


def test_a_watch_without_patterns_names_nothing() -> None:
    watch = ListingWatch(ToolFilter())
    assert watch.done
    assert watch.page(None, _tools("x")) == ()


# --------------------------------------------------------------------------- ttlMs


@pytest.mark.parametrize(
    ("result", "ttl"),
    [
        ({"ttlMs": 1500}, 1500),
        ({"ttlMs": 1500.7}, 1500),
        ({"ttlMs": 0}, 0),
        ({"ttlMs": -5}, 0),
        ({}, 0),
        ({"ttlMs": None}, 0),
        ({"ttlMs": "1000"}, 0),
        ({"ttlMs": True}, 0),
        ({"ttlMs": float("inf")}, 0),
        ({"ttlMs": float("nan")}, 0),
        (None, 0),
    ],
)
def test_ttl_ms(result: Any, ttl: int) -> None:
    assert ttl_ms(result) == ttl


# --------------------------------------------------------------------------- ListCache


@pytest.mark.parametrize(
    ("method", "params", "key"),
    [
        ("tools/list", None, ("tools/list", None)),
        ("tools/list", {}, ("tools/list", None)),
        ("tools/list", {"cursor": "c2"}, ("tools/list", "c2")),
        ("prompts/list", {"_meta": {"progressToken": 1}}, ("prompts/list", None)),
        ("resources/templates/list", {"cursor": "t"}, ("resources/templates/list", "t")),
        ("resources/list", {"cursor": None}, ("resources/list", None)),
        # not answered from the cache
        ("tools/call", {"name": "x"}, None),
        ("resources/read", {"uri": "file:///x"}, None),
        ("completion/complete", {}, None),
        ("tools/list", {"cursor": 5}, None),
        ("tools/list", {"inputResponses": {}}, None),
        ("tools/list", {"requestState": "s"}, None),
        ("tools/list", {"filter": "x"}, None),
        ("tools/list", [], None),
    ],
)
def test_key(method: str, params: Any, key: Any) -> None:
    assert ListCache.key(method, params) == key


def _page(ttl: Any = 1000, **extra: Any) -> dict[str, Any]:
    page = {**_tools("a"), **extra}
    if ttl is not None:
        page["ttlMs"] = ttl
    return page


def _fill(cache: ListCache, method: str, params: Any, result: Any, now: float) -> bool:
    lookup = cache.lookup(method, params, now)
    assert lookup.outcome is Outcome.MISS
    return cache.store(method, params, result, now)


@pytest.mark.parametrize(
    ("ttl", "later", "outcome"),
    [
        (1000, 0.0, Outcome.HIT),
        (1000, 0.999, Outcome.HIT),
        (1000, 1.0, Outcome.MISS),  # fresh while now < received + ttl
        (1000, 5.0, Outcome.MISS),
        (1, 0.0, Outcome.HIT),
        (0, 0.0, Outcome.MISS),
        (None, 0.0, Outcome.MISS),
        (-1, 0.0, Outcome.MISS),
    ],
)
def test_a_page_is_fresh_for_its_ttl(ttl: Any, later: float, outcome: Outcome) -> None:
    cache = ListCache()
    page = _page(ttl)
    _fill(cache, "tools/list", None, page, now=100.0)
    lookup = cache.lookup("tools/list", {}, 100.0 + later)
    assert lookup.outcome is outcome
    if outcome is Outcome.HIT:
        assert lookup.result is page
    else:
        assert lookup.result is None
        assert len(cache) == 0  # an expired page goes away


def test_store_says_whether_it_kept_the_page() -> None:
    cache = ListCache()
    assert _fill(cache, "tools/list", None, _page(1000), 0.0) is True
    assert _fill(cache, "prompts/list", None, _page(0), 0.0) is False
    assert _fill(cache, "resources/list", None, None, 0.0) is False
    assert len(cache) == 1


def test_each_page_has_its_own_entry() -> None:
    cache = ListCache()
    first, second = _page(1000, nextCursor="c2"), _page(50)
    _fill(cache, "tools/list", None, first, 0.0)
    _fill(cache, "tools/list", {"cursor": "c2"}, second, 0.0)
    assert cache.lookup("tools/list", None, 0.01).result is first
    assert cache.lookup("tools/list", {"cursor": "c2"}, 0.01).result is second
    assert cache.lookup("tools/list", {"cursor": "c3"}, 0.01).outcome is Outcome.MISS
    # the second page expires first
    assert cache.lookup("tools/list", {"cursor": "c2"}, 0.06).outcome is Outcome.MISS
    assert cache.lookup("tools/list", None, 0.06).result is first
    # the same cursor of another list is another entry
    assert cache.lookup("prompts/list", {"cursor": "c2"}, 0.01).outcome is Outcome.MISS


def test_an_uncacheable_request_is_never_kept() -> None:
    cache = ListCache()
    lookup = cache.lookup("tools/list", {"cursor": 1}, 0.0)
    assert lookup.outcome is Outcome.UNCACHEABLE
    assert lookup.result is None
    assert cache.store("tools/list", {"cursor": 1}, _page(), 0.0) is False
    assert cache.store("tools/call", {"name": "x"}, _page(), 0.0) is False


def test_only_the_result_of_a_missed_lookup_is_kept() -> None:
    cache = ListCache()
    assert cache.store("tools/list", None, _page(), 0.0) is False
    cache.lookup("tools/list", None, 0.0)
    assert cache.store("tools/list", None, _page(), 0.0) is True
    # a hit marks nothing: its page is not stored again (its expiry stays)
    assert cache.lookup("tools/list", None, 0.5).outcome is Outcome.HIT
    assert cache.store("tools/list", None, _page(), 0.5) is False
    assert cache.lookup("tools/list", None, 1.0).outcome is Outcome.MISS


@pytest.mark.parametrize(
    ("notification", "dropped"),
    [
        ("notifications/tools/list_changed", {"tools/list"}),
        ("notifications/prompts/list_changed", {"prompts/list"}),
        ("notifications/resources/list_changed", {"resources/list", "resources/templates/list"}),
        ("notifications/resources/updated", set()),
        ("notifications/message", set()),
    ],
)
def test_a_list_change_drops_its_lists(notification: str, dropped: set[str]) -> None:
    cache = ListCache()
    for method in sorted(CACHED_METHODS):
        _fill(cache, method, None, _page(), 0.0)
        _fill(cache, method, {"cursor": "c2"}, _page(), 0.0)
    assert cache.list_changed(notification) == 2 * len(dropped)
    for method in CACHED_METHODS:
        for params in (None, {"cursor": "c2"}):
            expected = Outcome.MISS if method in dropped else Outcome.HIT
            assert cache.lookup(method, params, 0.0).outcome is expected


def test_clear_drops_everything() -> None:
    cache = ListCache()
    for method in sorted(CACHED_METHODS):
        _fill(cache, method, None, _page(), 0.0)
    assert cache.clear() == len(CACHED_METHODS)
    assert len(cache) == 0
    assert cache.clear() == 0


@pytest.mark.parametrize(
    ("drop", "kept"),
    [
        (lambda cache: cache.list_changed("notifications/tools/list_changed"), False),
        (lambda cache: cache.clear(), False),
        (lambda cache: cache.list_changed("notifications/prompts/list_changed"), True),
        (lambda cache: cache.invalid_cursor("tools/list", {"cursor": "x"}, -32602), False),
    ],
)
def test_a_result_of_a_request_from_before_a_drop_is_not_kept(drop: Any, kept: bool) -> None:
    cache = ListCache()
    assert cache.lookup("tools/list", None, 0.0).outcome is Outcome.MISS
    drop(cache)  # the list changed while the request was on its way
    assert cache.store("tools/list", None, _page(), 0.0) is kept
    if not kept:  # the next request stores again
        assert _fill(cache, "tools/list", None, _page(), 0.0) is True


def test_a_second_request_after_a_drop_does_not_let_the_first_result_in() -> None:
    cache = ListCache()
    cache.lookup("tools/list", None, 0.0)  # request A, before the change
    cache.list_changed("notifications/tools/list_changed")
    cache.lookup("tools/list", None, 0.0)  # request B, after the change, A still on its way
    assert cache.store("tools/list", None, _page(), 0.0) is False  # A's result: from before
    assert cache.store("tools/list", None, _page(), 0.0) is False  # B's result: not marked any more
    assert _fill(cache, "tools/list", None, _page(), 0.0) is True


def test_the_marks_of_missed_lookups_are_bounded() -> None:
    cache = ListCache(max_entries=2)
    for cursor in ("a", "b", "c"):
        cache.lookup("tools/list", {"cursor": cursor}, 0.0)
    assert cache.store("tools/list", {"cursor": "a"}, _page(), 0.0) is False
    assert cache.store("tools/list", {"cursor": "c"}, _page(), 0.0) is True


@pytest.mark.parametrize(
    ("params", "code", "dropped"),
    [
        ({"cursor": "stale"}, -32602, 2),
        ({"cursor": "stale"}, -32603, 0),
        ({}, -32602, 0),
        (None, -32602, 0),
    ],
)
def test_an_invalid_cursor_drops_the_pages_of_its_list(params: Any, code: int, dropped: int) -> None:
    cache = ListCache()
    _fill(cache, "tools/list", None, _page(), 0.0)
    _fill(cache, "tools/list", {"cursor": "c2"}, _page(), 0.0)
    _fill(cache, "prompts/list", None, _page(), 0.0)
    assert cache.invalid_cursor("tools/list", params, code) == dropped
    assert cache.lookup("prompts/list", None, 0.0).outcome is Outcome.HIT


def test_the_oldest_page_goes_first_at_the_limit() -> None:
    cache = ListCache(max_entries=2)
    for cursor in ("a", "b", "c"):
        _fill(cache, "tools/list", {"cursor": cursor}, _page(), 0.0)
    assert len(cache) == 2
    assert cache.lookup("tools/list", {"cursor": "a"}, 0.0).outcome is Outcome.MISS
    assert cache.lookup("tools/list", {"cursor": "c"}, 0.0).outcome is Outcome.HIT


@pytest.mark.parametrize("limits", [{"max_entries": 0}, {"max_bytes": 0}])
def test_the_limits_must_be_positive(limits: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="positive"):
        ListCache(**limits)


def test_the_bytes_of_the_pages_are_bounded() -> None:
    cache = ListCache(max_bytes=400)
    for cursor in ("a", "b", "c", "d", "e"):
        cache.lookup("tools/list", {"cursor": cursor}, 0.0)
        assert cache.store("tools/list", {"cursor": cursor}, _page(), 0.0, size=100) is True
    assert len(cache) == 4 and cache.size == 400
    assert cache.lookup("tools/list", {"cursor": "a"}, 0.0).outcome is Outcome.MISS
    # a page larger than a quarter of the limit is not kept
    assert cache.store("tools/list", {"cursor": "a"}, _page(), 0.0, size=101) is False
    # an expiry, a replacement and a drop give their bytes back
    assert cache.lookup("tools/list", {"cursor": "b"}, 5.0).outcome is Outcome.MISS
    assert cache.size == 300
    assert cache.store("tools/list", {"cursor": "b"}, _page(), 5.0, size=50) is True
    assert cache.size == 350
    cache.list_changed("notifications/tools/list_changed")
    assert cache.size == 0 and len(cache) == 0


def test_threads_share_the_list_rules_of_a_connection() -> None:
    rules = ListRules()
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            barrier.wait(5.0)
            for round_number in range(200):
                params = {"cursor": f"{index}-{round_number % 7}"}
                if rules.lookup("tools/list", params) is None:
                    rules.page("tools/list", params, _page(), cache=True)
                if round_number % 50 == 0:
                    rules.list_changed("notifications/tools/list_changed")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,), name=f"mcpbridge-test-{i}") for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10.0)
    assert not errors
    assert not any(thread.is_alive() for thread in threads)
    # every page that is kept is found again
    rules.clear("the end of the test")
    assert rules.lookup("tools/list", {"cursor": "x"}) is None
    rules.page("tools/list", {"cursor": "x"}, _page(), cache=True)
    assert rules.lookup("tools/list", {"cursor": "x"}) == _page()
