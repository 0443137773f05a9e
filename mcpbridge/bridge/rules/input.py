"""The input requests of the upstream server: the checks, the plan of a round, the answers.

This module is pure: it does no I/O, starts no thread and reads no clock. The front end
owns the pipes, the ``b-`` ids, the waits and the log; this module decides everything else.

A server of revision 2026-07-28 can answer ``tools/call``, ``prompts/get`` and
``resources/read`` with an InputRequiredResult (``resultType: "input_required"``): a map
``inputRequests`` of key -> ``{method, params}`` and an opaque ``requestState``. VS Code
speaks revision 2025-11-25, where the same needs are requests from the server to the
client. One :class:`Session` per forwarded request turns each round into such requests
and the answers of the client into the ``inputResponses`` of the retry.

Theory of operation (the front end drives it)::

    session = Session(ClientKinds.from_capabilities(caps), next_elicitation_id)
    params = original_params
    while True:
        raw = upstream.request(method, params)               # allow input_required
        for elicitation_id in session.completions_after_round(raw):
            notify("notifications/elicitation/complete", {"elicitationId": elicitation_id})
        if raw.get("resultType") != "input_required":
            respond(raw); break
        planned = session.plan_round(raw)                    # InputError: fail the request
        answers = ask_client(planned.outgoing)               # key -> result | ClientError | BAD_LINE
        responses = session.input_responses(answers)         # InputError / ClientFailed
        params = retry_params(original_params, responses, planned.request_state)

On every path that ends the request without a result (an error, a cancellation, too many
rounds), the front end sends the completions of :meth:`Session.completions_on_failure`.

Rules (behaviour.md §5):

* A request has at most :data:`MAX_ROUNDS` InputRequiredResults; the last one fails with
  ``too_many_rounds`` before the client is asked. A round has at most
  :data:`MAX_INPUT_REQUESTS` input requests.
* Every input request of a round is checked before the client gets any of them. The first
  failed check, in key order, fails the original request; the client then gets nothing.
* The client gets the params of the upstream server without ``task``. A URL elicitation
  gets an ``elicitationId``, which revision 2025-11-25 requires. A URL that
  :func:`url_allowed` refuses is never shown: the upstream server gets ``decline``.
* A form without a property becomes a form with one choice, because VS Code cannot show an
  empty form. A URL that the user accepted and that a later round asks for again becomes
  the "Continue" form, so the user does not open the page twice (both in :mod:`.forms`).
* Each outgoing request has the shape of the 2025-11-25 schema
  (:data:`~.legacyshapes.LEGACY_SHAPES`), so the client never gets a request that it must
  refuse. A client of an older revision gets it in the terms of its revision
  (:func:`~.revisions.adapt_input_request`); one that the revision cannot carry is refused
  without asking: a form gets ``decline``, a sampling no answer (the protocol's refusal of
  a sampling).

Exact texts of the details are part of the behaviour: the tests compare them. The module
:mod:`.sessions.rounds` runs the rounds that a :class:`Session` plans: it asks the client and waits.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from ...mcp.netloc import is_loopback, split_url
from ...mcp.protocol import ELICITATION_CREATE, ROOTS_LIST, SAMPLING_CREATE_MESSAGE
from .answers import BAD_LINE, ClientError
from .forms import FormSchema, SchemaError, choice_form, compile_form_schema, continue_form
from .legacyshapes import conforms
from .revisions import LATEST, NotCarried, Revision, adapt_input_request
from .roundfailures import ClientFailed, InputError

#: zig-sdk's ``mrtr_max_rounds_client``: at most this many upstream requests per forwarded
#: request, so the client is asked at most ``MAX_ROUNDS - 1`` times.
MAX_ROUNDS: Final = 10
#: A round with more input requests fails before the client gets one of them. It bounds
#: the bridge's own requests that wait for the client.
MAX_INPUT_REQUESTS: Final = 16


# ---------------------------------------------------------------------------------------
# The answers of the client and the errors
# ---------------------------------------------------------------------------------------


#: The answer of the client to one outgoing request: its ``result`` value (any JSON), a
#: :class:`ClientError`, or :data:`BAD_LINE`.
Answer = Any


def _key_error(cause: str, key: str, what: str) -> InputError:
    return InputError(cause, f"input request '{key}': {what}")


# ---------------------------------------------------------------------------------------
# The capabilities of the client
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClientKinds:
    """The kinds of input requests that the client declared."""

    form: bool = False
    url: bool = False
    sampling: bool = False
    sampling_tools: bool = False
    roots: bool = False

    @classmethod
    def from_capabilities(cls, capabilities: Any) -> ClientKinds:
        """Read the 2025-11-25 client capabilities (those the bridge declared upstream).

        ``elicitation: {}`` declares the form mode only. A capability counts when its
        value is an object.
        """
        if not isinstance(capabilities, dict):
            return cls()
        elicitation = capabilities.get("elicitation")
        form = url = False
        if isinstance(elicitation, dict):
            url = isinstance(elicitation.get("url"), dict)
            form = isinstance(elicitation.get("form"), dict) or not (
                "form" in elicitation or "url" in elicitation
            )
        sampling = capabilities.get("sampling")
        return cls(
            form=form,
            url=url,
            sampling=isinstance(sampling, dict),
            sampling_tools=isinstance(sampling, dict) and isinstance(sampling.get("tools"), dict),
            roots=isinstance(capabilities.get("roots"), dict),
        )


# ---------------------------------------------------------------------------------------
# The URL rule
# ---------------------------------------------------------------------------------------


def url_allowed(url: str) -> bool:
    """True when the bridge shows the URL of a URL elicitation to the client.

    The URL must have the grammar of the command line (:func:`~mcpbridge.mcp.netloc.split_url`):
    visible ASCII only, none of ``"<>\\^`{|}``, valid ``%XX`` escapes, a scheme, ``//``,
    a host that is not empty, and a port of digits up to 65535. Its scheme must be
    ``https`` (any case), or ``http`` without user information and with a loopback host
    (:func:`~mcpbridge.mcp.netloc.is_loopback`). VS Code opens other schemes too
    (``file:``, ``vscode:``, ``command:``), so the bridge refuses them.

    A web browser reads a URL by the WHATWG rules, where a backslash ends the host; other
    parsers disagree. The two must find the same host, so a backslash anywhere is refused.
    """
    parts = split_url(url) if isinstance(url, str) else None
    if parts is None or not parts.host:
        return False
    port = (parts.port or "0").lstrip("0")
    if len(port) > 5 or int(port or "0") > 65535:
        return False
    if parts.scheme == "https":
        return True
    return parts.scheme == "http" and not parts.has_userinfo and is_loopback(parts.host)


# ---------------------------------------------------------------------------------------
# The sampling rules
# ---------------------------------------------------------------------------------------


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return content if isinstance(content, list) else [content]


def _uses_tools(params: dict[str, Any]) -> bool:
    """True for ``tools``, ``toolChoice``, or a ``tool_use`` or ``tool_result`` block."""
    if "tools" in params or "toolChoice" in params:
        return True
    return any(
        block["type"] in ("tool_use", "tool_result")
        for message in params["messages"]
        for block in _blocks(message)
    )


def _tool_results_paired(messages: list[dict[str, Any]]) -> bool:
    """The tool result rules of sampling messages.

    A message with a tool result has only tool results. The message after a message with
    tool uses is a user message with only tool results, and it has a result for each use.
    """
    for index, message in enumerate(messages):
        own = _blocks(message)
        results = sum(1 for block in own if block["type"] == "tool_result")
        if results and results != len(own):
            return False
        uses = [block["id"] for block in own if block["type"] == "tool_use"]
        if not uses:
            continue
        if index + 1 >= len(messages) or messages[index + 1]["role"] != "user":
            return False
        following = _blocks(messages[index + 1])
        if any(block["type"] != "tool_result" for block in following):
            return False
        answered = {block["toolUseId"] for block in following}
        if any(use not in answered for use in uses):
            return False
    return True


def _without_task(params: dict[str, Any]) -> dict[str, Any]:
    # The bridge declares no tasks to the client, so its requests are never tasks.
    return {name: value for name, value in params.items() if name != "task"}


# ---------------------------------------------------------------------------------------
# Rounds
# ---------------------------------------------------------------------------------------


def parse_input_required(result: Any) -> tuple[dict[str, Any], str | None]:
    """The ``inputRequests`` (``null`` or absent: empty) and ``requestState`` of a result.

    Raises:
        InputError: ``invalid_input_request``, the result is not an InputRequiredResult.
    """
    if not isinstance(result, dict):
        raise InputError("invalid_input_request", "the result is not an object")
    requests = result.get("inputRequests")
    if requests is None:
        requests = {}
    elif not isinstance(requests, dict):
        raise InputError("invalid_input_request", "the inputRequests member is not an object")
    state = result.get("requestState")
    if state is not None and not isinstance(state, str):
        raise InputError("invalid_input_request", "the requestState member is not a string")
    return requests, state


def asks_for_url(raw_result: Any, url: str) -> bool:
    """True when ``raw_result`` is an InputRequiredResult with a URL elicitation of ``url``."""
    if not isinstance(raw_result, dict) or raw_result.get("resultType") != "input_required":
        return False
    requests = raw_result.get("inputRequests")
    if not isinstance(requests, dict):
        return False
    for request in requests.values():
        if not isinstance(request, dict) or request.get("method") != ELICITATION_CREATE:
            continue
        params = request.get("params")
        if isinstance(params, dict) and params.get("mode") == "url" and params.get("url") == url:
            return True
    return False


def retry_params(
    original_params: dict[str, Any] | None,
    input_responses: dict[str, Any] | None,
    request_state: str | None,
) -> dict[str, Any]:
    """The params of the next upstream request.

    A copy of ``original_params`` without its own ``inputResponses`` and ``requestState``,
    plus ``inputResponses`` and ``requestState`` when given. The state is the exact string
    of the server; without one the retry has none.
    """
    params = {
        name: value
        for name, value in (original_params or {}).items()
        if name not in ("inputResponses", "requestState")
    }
    if input_responses is not None:
        params["inputResponses"] = input_responses
    if request_state is not None:
        params["requestState"] = request_state
    return params


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One request of the bridge to the client; the front end gives it a ``b-`` id."""

    key: str
    method: str
    #: ``None``: the request has no ``params`` member.
    params: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Planned:
    """The plan of one round."""

    #: The requests for the client, in the key order of ``inputRequests``. Empty when the
    #: round asks the client nothing (only a ``requestState``, or only refused requests).
    outgoing: tuple[Outgoing, ...]
    #: The answers decided without the client (a refused URL or form gets ``{"action": "decline"}``).
    immediate: Mapping[str, dict[str, Any]]
    #: The ``requestState`` to echo in the retry, or ``None``.
    request_state: str | None
    #: Lines for the log at the level warning.
    warnings: tuple[str, ...]


class _Kind(enum.Enum):
    FORM = "elicitation.form"
    URL = "elicitation.url"
    SAMPLING = "sampling"
    ROOTS = "roots"


_METHODS: Final = MappingProxyType(
    {
        _Kind.FORM: ELICITATION_CREATE,
        _Kind.URL: ELICITATION_CREATE,
        _Kind.SAMPLING: SAMPLING_CREATE_MESSAGE,
        _Kind.ROOTS: ROOTS_LIST,
    }
)


class _Route(enum.Enum):
    ASK = "ask"  # send the input request as it is
    CHOICE_FORM = "choice_form"  # a form without a property: one choice instead
    CONTINUE_FORM = "continue_form"  # a URL the user accepted: "Continue" instead
    DECLINE = "decline"  # a refused URL, a form the client cannot take: decline without asking
    OMIT = "omit"  # a sampling the client cannot take: no answer, without asking


@dataclass(slots=True)
class _UrlStep:
    url: str
    elicitation_id: str
    accepted: bool = False
    completed: bool = False


@dataclass(frozen=True, slots=True)
class _Checked:
    kind: _Kind
    params: dict[str, Any] | None
    form: FormSchema | None = None


@dataclass(slots=True)
class _Item:
    checked: _Checked
    route: _Route = _Route.ASK
    step: _UrlStep | None = None


@dataclass(slots=True)
class _State:
    rounds: int = 0
    steps: list[_UrlStep] = field(default_factory=list)
    items: dict[str, _Item] = field(default_factory=dict)


class Session:
    """The input rounds of one forwarded request.

    ``kinds`` are the kinds the client declared, read in the terms of its ``revision``.
    ``next_elicitation_id`` gives a new ``elicitationId``, unique on the connection (for
    example ``elicitation-1``). ``max_rounds`` bounds the rounds (:data:`MAX_ROUNDS` for a
    request; a task that asks for input again and again while it runs gets more).

    The session keeps the URLs of URL elicitations across the rounds: their ids, whether
    the user accepted them, and whether the client got ``notifications/elicitation/complete``.
    """

    def __init__(
        self,
        kinds: ClientKinds,
        next_elicitation_id: Callable[[], str],
        revision: Revision = LATEST,
        *,
        max_rounds: int = MAX_ROUNDS,
    ) -> None:
        self.kinds = kinds
        self.revision = revision
        self._next_elicitation_id = next_elicitation_id
        self._max_rounds = max_rounds
        self._state = _State()

    @property
    def rounds(self) -> int:
        """The number of InputRequiredResults given to :meth:`plan_round`."""
        return self._state.rounds

    def plan_round(self, result: Any) -> Planned:
        """Check all input requests of the InputRequiredResult ``result`` and plan the round.

        Call it once for each InputRequiredResult, after :meth:`completions_after_round`.
        The checks, in this order: the round limit, the shape of the result, the number of
        input requests, then each input request in key order (its shape, the kind the
        client declared, the ``requestedSchema`` of a form, the tool rules of a sampling).

        Raises:
            InputError: ``too_many_rounds``, ``invalid_input_request``,
                ``too_many_input_requests`` or ``undeclared_input_request``. The client
                gets no request of the round.
        """
        state = self._state
        state.items = {}
        state.rounds += 1
        if state.rounds >= self._max_rounds:
            raise InputError("too_many_rounds")
        requests, request_state = parse_input_required(result)
        if len(requests) > MAX_INPUT_REQUESTS:
            raise InputError(
                "too_many_input_requests",
                f"{len(requests)} input requests in one round, limit: {MAX_INPUT_REQUESTS}",
            )
        checked = {key: self._check(key, request) for key, request in requests.items()}

        outgoing: list[Outgoing] = []
        immediate: dict[str, dict[str, Any]] = {}
        warnings: list[str] = []
        items: dict[str, _Item] = {}
        for key, item_checked in checked.items():
            item = _Item(item_checked)
            items[key] = item
            params = item_checked.params
            if item_checked.kind is _Kind.FORM:
                assert item_checked.form is not None and params is not None
                if not item_checked.form.fields:
                    item.route = _Route.CHOICE_FORM
                    params = choice_form(params["message"])
            elif item_checked.kind is _Kind.URL:
                assert params is not None
                if not url_allowed(params["url"]):
                    item.route = _Route.DECLINE
                    immediate[key] = {"action": "decline"}
                    warnings.append(
                        f"input request '{key}': the bridge refused the URL of a URL elicitation, "
                        "and the upstream server gets decline"
                    )
                    continue
                item.step = self._url_step(params["url"])
                if item.step.accepted and self.kinds.form:
                    item.route = _Route.CONTINUE_FORM
                    params = continue_form()
                else:
                    params = {**params, "elicitationId": item.step.elicitation_id}
            method = _METHODS[item_checked.kind]
            if params is not None:
                try:
                    params = adapt_input_request(self.revision, method, params)
                except NotCarried as refused:
                    warnings.append(self._refuse(key, item, refused, immediate))
                    continue
            outgoing.append(Outgoing(key, method, params))
        state.items = items
        return Planned(
            outgoing=tuple(outgoing),
            immediate=MappingProxyType(immediate),
            request_state=request_state,
            warnings=tuple(warnings),
        )

    def _refuse(self, key: str, item: _Item, refused: NotCarried, immediate: dict[str, Any]) -> str:
        """Refuse an input request that the revision of the client cannot carry; the log line."""
        if item.checked.kind is _Kind.SAMPLING:
            item.route = _Route.OMIT
            answer = "no answer for it"
        else:
            item.route = _Route.DECLINE
            immediate[key] = {"action": "decline"}
            answer = "decline"
        return (
            f"input request '{key}': a client of MCP {self.revision} cannot take {refused.what}, "
            f"and the upstream server gets {answer}"
        )

    def _check(self, key: str, request: Any) -> _Checked:
        """Check one input request; the params for the client have no ``task``."""
        shape_error = _key_error(
            "invalid_input_request", key, "the input request does not have the shape of the schema"
        )
        if not isinstance(request, dict):
            raise shape_error
        method = request.get("method")
        params = request.get("params")
        if method == ROOTS_LIST:
            client_params = None
            if "params" in request:
                if not isinstance(params, dict):
                    raise shape_error
                client_params = _without_task(params)
                if not conforms(client_params, "RequestParams"):
                    raise shape_error
            self._require(key, _Kind.ROOTS)
            return _Checked(_Kind.ROOTS, client_params)
        if method not in (ELICITATION_CREATE, SAMPLING_CREATE_MESSAGE) or not isinstance(params, dict):
            raise shape_error
        client_params = _without_task(params)

        if method == SAMPLING_CREATE_MESSAGE:
            if not conforms(client_params, "CreateMessageRequestParams"):
                raise shape_error
            self._require(key, _Kind.SAMPLING)
            if _uses_tools(client_params) and not self.kinds.sampling_tools:
                raise _key_error(
                    "undeclared_input_request",
                    key,
                    "sampling with tools needs sampling.tools, and the client did not declare it",
                )
            if not _tool_results_paired(client_params["messages"]):
                raise _key_error(
                    "invalid_input_request", key, "the sampling messages do not obey the tool result rules"
                )
            return _Checked(_Kind.SAMPLING, client_params)

        mode = params.get("mode", "form")
        if mode == "url":
            # 2025-11-25 requires the elicitationId that the plan adds.
            if not conforms({**client_params, "elicitationId": ""}, "ElicitRequestURLParams"):
                raise shape_error
            self._require(key, _Kind.URL)
            return _Checked(_Kind.URL, client_params)
        if mode != "form" or not conforms(client_params, "ElicitRequestFormParams"):
            raise shape_error
        self._require(key, _Kind.FORM)
        try:
            form = compile_form_schema(client_params["requestedSchema"])
        except SchemaError as exc:
            raise _key_error("invalid_input_request", key, "the requestedSchema does not compile") from exc
        return _Checked(_Kind.FORM, client_params, form)

    def _require(self, key: str, kind: _Kind) -> None:
        declared = {
            _Kind.FORM: self.kinds.form,
            _Kind.URL: self.kinds.url,
            _Kind.SAMPLING: self.kinds.sampling,
            _Kind.ROOTS: self.kinds.roots,
        }[kind]
        if not declared:
            raise _key_error("undeclared_input_request", key, f"the client did not declare {kind.value}")

    def _url_step(self, url: str) -> _UrlStep:
        """The step of ``url``; a new URL, or one whose step completed, gets a new id."""
        for step in self._state.steps:
            if step.url == url and not step.completed:
                return step
        step = _UrlStep(url, self._next_elicitation_id())
        self._state.steps.append(step)
        return step

    def shape_answer(self, key: str, answer: Answer, notes: list[str] | None = None) -> dict[str, Any]:
        """The value for ``inputResponses[key]`` from the client's answer to ``key``.

        * Elicitation: a :class:`ClientError` or :data:`BAD_LINE` gives ``cancel``. The
          result must be an ElicitResult; the value has ``action``, and ``content`` only
          for an accepted form, whose content (absent: ``{}``) must be valid against the
          ``requestedSchema``. An accepted choice form gives the content ``{}``; the
          answer to a "Continue" form gives its action only.
        * Sampling: the CreateMessageResult goes upstream unchanged.
        * Roots: the ListRootsResult keeps only the roots whose URI starts with ``file://``.

        Debug lines (a dropped root) are appended to ``notes`` when given.

        Raises:
            InputError: ``invalid_client_answer``.
            ClientFailed: the client answered a sampling or roots request with an error.
            KeyError: ``key`` is not a key of the last planned round that asks the client.
        """
        item = self._state.items[key]
        kind = item.checked.kind
        if item.route in (_Route.DECLINE, _Route.OMIT):
            raise KeyError(key)
        if item.route is _Route.CONTINUE_FORM:
            value = {"action": _action_of(answer) or "cancel"}
        elif kind in (_Kind.FORM, _Kind.URL):
            if item.route is _Route.CHOICE_FORM and _action_of(answer) == "accept":
                answer = {"action": "accept", "content": {}}
            value = self._shape_elicitation(key, item.checked, answer)
        elif isinstance(answer, ClientError):
            raise ClientFailed(answer.error)
        elif answer is BAD_LINE:
            raise _key_error("invalid_client_answer", key, "the answer of the client is not a valid message")
        elif kind is _Kind.SAMPLING:
            if not conforms(answer, "CreateMessageResult"):
                raise _key_error(
                    "invalid_client_answer", key, "the sampling result does not have the shape of the schema"
                )
            value = answer
        else:
            value = _shape_roots(key, answer, notes)
        if item.step is not None and value["action"] == "accept":
            item.step.accepted = True
        return value

    @staticmethod
    def _shape_elicitation(key: str, checked: _Checked, answer: Answer) -> dict[str, Any]:
        if isinstance(answer, ClientError) or answer is BAD_LINE:
            return {"action": "cancel"}
        if not conforms(answer, "ElicitResult"):
            raise _key_error(
                "invalid_client_answer", key, "the elicitation result does not have the shape of the schema"
            )
        value: dict[str, Any] = {"action": answer["action"]}
        if value["action"] == "accept" and checked.kind is _Kind.FORM:
            assert checked.form is not None
            if not checked.form.accepts(answer.get("content", {})):
                raise _key_error(
                    "invalid_client_answer",
                    key,
                    "the accepted content is not valid against the requestedSchema",
                )
            if "content" in answer:
                value["content"] = answer["content"]
        return value

    def input_responses(
        self, answers: Mapping[str, Answer], notes: list[str] | None = None
    ) -> dict[str, Any] | None:
        """The ``inputResponses`` of the retry, in the key order of the round.

        ``answers`` maps the key of each outgoing request of the last planned round to
        the client's answer. The decisions without the client are added: ``decline`` for a
        refused URL or form, and nothing for a refused sampling.
        ``None`` when the round had no input request (a ``requestState`` only): the retry
        then has no ``inputResponses``.

        Raises:
            InputError: ``invalid_client_answer``, for the first failing key in key order.
            ClientFailed: the client answered a sampling or roots request with an error.
            KeyError: an outgoing request of the round has no answer.
        """
        items = self._state.items
        if not items:
            return None
        responses: dict[str, Any] = {}
        for key, item in items.items():
            if item.route is _Route.DECLINE:
                responses[key] = {"action": "decline"}
            elif item.route is not _Route.OMIT:
                responses[key] = self.shape_answer(key, answers[key], notes)
        return responses

    def completions_after_round(self, raw_result: Any) -> list[str]:
        """The ``elicitationId`` of each accepted URL that ``raw_result`` does not ask for again.

        Call it with the raw result of every upstream round, a complete result or an
        InputRequiredResult, before the response and before the next round. Each id
        comes out once; the front end sends ``notifications/elicitation/complete`` for it.
        """
        done: list[str] = []
        for step in self._state.steps:
            if step.accepted and not step.completed and not asks_for_url(raw_result, step.url):
                step.completed = True
                done.append(step.elicitation_id)
        return done

    def completions_on_failure(self) -> list[str]:
        """The ids of all accepted URLs without a completion yet.

        Call it when the rounds stop without a result: an error, too many rounds, a
        cancellation (the notification goes out even though the request gets no response).
        """
        return self.completions_after_round(None)


def _action_of(answer: Answer) -> str | None:
    """The valid action of an elicitation result, or ``None``."""
    if isinstance(answer, dict):
        action = answer.get("action")
        if action in ("accept", "decline", "cancel"):
            return str(action)
    return None


def _shape_roots(key: str, answer: Answer, notes: list[str] | None) -> dict[str, Any]:
    if not conforms(answer, "ListRootsResult"):
        raise _key_error(
            "invalid_client_answer", key, "the roots result does not have the shape of the schema"
        )
    kept: list[dict[str, Any]] = []
    for root in answer["roots"]:
        if root["uri"].startswith("file://"):
            kept.append({name: root[name] for name in ("uri", "name", "_meta") if name in root})
        elif notes is not None:
            notes.append(f"input request '{key}': dropped a root that is not a file URI")
    return {"roots": kept}
