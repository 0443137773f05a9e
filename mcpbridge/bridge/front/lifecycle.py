"""The lifecycle of a client connection: what each state does with each kind of message.

This module is pure: it does no I/O and reads no clock. The front end looks up
the :class:`Action` for the state of its connection and the class of each
message of the client (:func:`~.rules.legacy.classify`,
:func:`~.rules.legacy.classify_notification`) in :data:`LIFECYCLE`, and does it.
The page "How it works" shows the same table; a test compares the two.

The states:

* ``awaiting_initialize``: the start of the connection, and the end of a
  canceled initialize. Only ``initialize`` starts the upstream server.
* ``initializing``: one ``initialize`` won the move from ``awaiting_initialize``
  (or ``initialize_failed``); its slot starts the upstream server and asks it
  ``server/discover``. The other requests wait for its answer (they hold a slot
  each, no thread), and then get what the state that follows does with them.
* ``initialize_failed``: the last initialize failed. A new ``initialize`` starts
  the upstream server again; the other requests get ``not_connected`` with the
  cause of the failure.
* ``ready``: the upstream server speaks 2026-07-28; the requests are forwarded.
* ``ready_2025``: the upstream server speaks the 2025 era; the requests pass through.
* ``closing``: the end of the input. The reader reads no more lines.
* ``upstream_lost``: the upstream server stopped. Each request gets ``upstream_exited``.

Where the table says ``not_initialized``, ``not_connected`` or holds it, a request whose ``_meta`` has the
protocol version key of 2026-07-28 gets ``method_not_found`` instead, so that a
client of both revisions continues with ``initialize``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from ..rules.legacy import MethodClass, NotificationClass

__all__ = ["KINDS", "LABELS", "LIFECYCLE", "Action", "Kind", "State", "action"]


class State(enum.Enum):
    """The state of a client connection."""

    AWAITING = "awaiting_initialize"
    INITIALIZING = "initializing"
    FAILED = "initialize_failed"
    READY = "ready"
    READY_2025 = "ready_2025"
    CLOSING = "closing"
    LOST = "upstream_lost"


#: The states in which the upstream server carries the requests.
READY_STATES: Final = frozenset({State.READY, State.READY_2025})
#: The states of the end of the connection.
END_STATES: Final = frozenset({State.CLOSING, State.LOST})


class Action(enum.Enum):
    """What the front end does with a message; the value is the text of the table on the page."""

    #: Move to ``initializing`` and start the upstream server on a slot.
    START = "starts the upstream server"
    #: -32600 ``already_initialized``.
    ALREADY_INITIALIZED = "already_initialized"
    #: The result ``{}``.
    PONG = "answers {}"
    #: Keep the level of ``logging/setLevel`` (-32602 for a level that is not one) and answer ``{}``.
    SET_LEVEL = "keeps the level, answers {}"
    #: -32601 ``method_not_found``.
    METHOD_NOT_FOUND = "method_not_found"
    #: -32600 ``not_initialized`` (-32601 with the ``_meta`` key of 2026-07-28).
    NOT_INITIALIZED = "not_initialized"
    #: Keep the request (it takes a slot) until initialize ends, then do what the next state does.
    HOLD = "holds it until initialize is answered"
    #: -32603 ``not_connected``, with the cause of the failed initialize in ``data.detail``.
    NOT_CONNECTED = "not_connected"
    #: Forward to the 2026-07-28 server (or answer from the list cache); a hidden tool is unknown.
    FORWARD = "forwards it"
    #: The tasks that the client made, when the bridge declared tasks; else -32601.
    TASKS = "answers from the tasks"
    #: Change the URIs of the listen stream, when the server offers subscriptions; else -32601.
    SUBSCRIBE = "changes the listen filter"
    #: Pass it to the 2025-era server as it is; a hidden tool is unknown.
    PASS = "passes it through"
    #: -32603 ``upstream_exited``.
    UPSTREAM_EXITED = "upstream_exited"
    #: Nothing: the request gets no response.
    NO_RESPONSE = "no response"
    #: Start the listen stream once, when the initialize result declares a list change or
    #: subscriptions.
    LISTEN = "starts the listen stream"
    #: Cancel the request in flight with that ``requestId``.
    CANCEL = "cancels the request"
    #: Nothing (a debug line).
    IGNORE = "ignores it"


Kind = MethodClass | NotificationClass

#: Every kind of message, in the order of the rows of the table.
KINDS: Final[tuple[Kind, ...]] = (*MethodClass, *NotificationClass)

#: The label of each kind in the first column of the table on the page.
LABELS: Final[Mapping[Kind, str]] = MappingProxyType(
    {
        MethodClass.INITIALIZE: "initialize",
        MethodClass.PING: "ping",
        MethodClass.SET_LEVEL: "logging/setLevel",
        MethodClass.DISCOVER: "server/discover",
        MethodClass.FORWARD: "tools/*, prompts/*, resources/* (list, read), completion/complete",
        MethodClass.SUBSCRIBE: "resources/subscribe",
        MethodClass.UNSUBSCRIBE: "resources/unsubscribe",
        MethodClass.TASK: "tasks/*",
        MethodClass.UNKNOWN: "another request",
        NotificationClass.INITIALIZED: "notifications/initialized",
        NotificationClass.CANCELLED: "notifications/cancelled",
        NotificationClass.ROOTS_LIST_CHANGED: "notifications/roots/list_changed",
        NotificationClass.OTHER: "another notification",
    }
)

_A = Action
_EVERYWHERE: dict[Kind, Action] = {MethodClass.PING: _A.PONG, MethodClass.SET_LEVEL: _A.SET_LEVEL}
_DISCOVER: dict[Kind, Action] = {MethodClass.DISCOVER: _A.METHOD_NOT_FOUND}
_QUIET: dict[Kind, Action] = {
    NotificationClass.INITIALIZED: _A.IGNORE,
    NotificationClass.CANCELLED: _A.CANCEL,
    NotificationClass.ROOTS_LIST_CHANGED: _A.IGNORE,
    NotificationClass.OTHER: _A.IGNORE,
}
_OTHER_REQUESTS = (
    MethodClass.FORWARD,
    MethodClass.SUBSCRIBE,
    MethodClass.UNSUBSCRIBE,
    MethodClass.TASK,
    MethodClass.UNKNOWN,
)


def _row(state: State, actions: Mapping[Kind, Action]) -> dict[tuple[State, Kind], Action]:
    return {(state, kind): action for kind, action in actions.items()}


def _before_ready(initialize: Action, others: Action) -> dict[Kind, Action]:
    return {
        MethodClass.INITIALIZE: initialize,
        **_EVERYWHERE,
        **_DISCOVER,
        **{kind: others for kind in _OTHER_REQUESTS},
        **_QUIET,
    }


#: (state, kind of message) -> action: the lifecycle of a connection.
LIFECYCLE: Final[Mapping[tuple[State, Kind], Action]] = MappingProxyType(
    {
        **_row(State.AWAITING, _before_ready(_A.START, _A.NOT_INITIALIZED)),
        **_row(State.INITIALIZING, _before_ready(_A.ALREADY_INITIALIZED, _A.HOLD)),
        **_row(State.FAILED, _before_ready(_A.START, _A.NOT_CONNECTED)),
        **_row(
            State.READY,
            {
                MethodClass.INITIALIZE: _A.ALREADY_INITIALIZED,
                **_EVERYWHERE,
                **_DISCOVER,
                MethodClass.FORWARD: _A.FORWARD,
                MethodClass.SUBSCRIBE: _A.SUBSCRIBE,
                MethodClass.UNSUBSCRIBE: _A.SUBSCRIBE,
                MethodClass.TASK: _A.TASKS,
                MethodClass.UNKNOWN: _A.METHOD_NOT_FOUND,
                **_QUIET,
                NotificationClass.INITIALIZED: _A.LISTEN,
            },
        ),
        **_row(
            State.READY_2025,
            {
                MethodClass.INITIALIZE: _A.ALREADY_INITIALIZED,
                MethodClass.PING: _A.PASS,
                MethodClass.SET_LEVEL: _A.PASS,
                **_DISCOVER,
                **{kind: _A.PASS for kind in _OTHER_REQUESTS},
                NotificationClass.INITIALIZED: _A.PASS,
                NotificationClass.CANCELLED: _A.CANCEL,
                NotificationClass.ROOTS_LIST_CHANGED: _A.PASS,
                NotificationClass.OTHER: _A.PASS,
            },
        ),
        **_row(
            State.CLOSING,
            {
                **{kind: _A.NO_RESPONSE for kind in MethodClass},
                **{kind: _A.IGNORE for kind in NotificationClass},
            },
        ),
        **_row(
            State.LOST,
            {
                MethodClass.INITIALIZE: _A.UPSTREAM_EXITED,
                **_EVERYWHERE,
                **_DISCOVER,
                **{kind: _A.UPSTREAM_EXITED for kind in _OTHER_REQUESTS},
                **_QUIET,
            },
        ),
    }
)


def action(state: State, kind: Kind) -> Action:
    """What a connection in ``state`` does with a message of ``kind``."""
    return LIFECYCLE[state, kind]
