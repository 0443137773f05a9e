"""The settings of a front end: its limits and time limits."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ...mcp.client import Connect
from ..rules import translate
from ..rules.lists import ToolFilter
from .output import MAX_QUEUED_BYTES

__all__ = [
    "OUTPUT_STALL_TIMEOUT",
    "Connect",
    "HostChoice",
    "Options",
    "TaskMode",
    "Timeouts",
    "UpstreamRevision",
]

#: The longest time the client may read nothing while output waits for it: then the
#: bridge ends the connection as at the end of its input.
OUTPUT_STALL_TIMEOUT = 60.0


class UpstreamRevision(str, enum.Enum):
    """``--protocol``: the revision that the bridge speaks to the upstream server."""

    AUTO = "auto"
    MODERN = "2026-07-28"
    LEGACY = "legacy"


class TaskMode(str, enum.Enum):
    """``--tasks``: whether the bridge carries the tasks of the Tasks extension."""

    AUTO = "auto"
    OFF = "off"


class HostChoice(str, enum.Enum):
    """``--host-profile``: the profile of the host, or ``auto`` to pick it from its ``initialize``."""

    AUTO = "auto"
    VSCODE = "vscode"
    GENERIC = "generic"


@dataclass(frozen=True)
class Timeouts:
    """Time limits in seconds (architecture: "Limits and time limits")."""

    discover: float = 60.0
    #: The list requests and completion/complete.
    list: float = 120.0
    #: The first round of prompts/get and resources/read.
    read: float = 120.0
    #: Each round of tools/call; VS Code's cancellation is the outer limit.
    call: float = 3600.0
    #: The client's answers to one round of input requests.
    input: float = 3600.0


@dataclass(frozen=True)
class Options:
    fallback_name: str
    version: str
    max_line_bytes: int = 64 * 1024 * 1024
    #: Nesting of a client message.
    max_depth: int = 64
    #: Requests in flight; the reader refuses more at once.
    max_in_flight: int = 256
    #: The wait for the slots at the end.
    shutdown_grace: float = 2.0
    watch_interval: float = 0.2
    #: Progress notifications of one request per second.
    max_progress_rate: int = 50
    timeouts: Timeouts = field(default_factory=Timeouts)
    icon_rule: translate.IconRule = translate.IconRule.ALL
    #: ``--protocol``: ``auto`` passes through a command or a URL that answers the client's
    #: own ``initialize`` and translates one that refuses it as a server of 2026-07-28 only
    #: (module era); ``legacy`` skips the discover; ``2026-07-28`` always translates and never
    #: falls back.
    #: Without a ``legacy`` upstream for the front end, each acts as ``2026-07-28``.
    protocol: UpstreamRevision = UpstreamRevision.AUTO
    #: The upstream's send never waits long (a child process on stdio): the reader sends
    #: each forwarded request itself, and the thread that delivers the answer writes the
    #: response, so a call costs no hand-off to a slot thread
    #: (see :meth:`~.sessions.run.RequestRun.send_first_round`).
    forward_on_reader: bool = False
    #: ``--allow-tool`` and ``--deny-tool``: the tools that the client never sees.
    tool_filter: ToolFilter = ToolFilter()
    #: See :data:`OUTPUT_STALL_TIMEOUT`.
    output_stall_timeout: float = OUTPUT_STALL_TIMEOUT
    #: The bytes that may wait for the client before the reader stops reading it
    #: (see :data:`~.output.MAX_QUEUED_BYTES`).
    max_output_bytes: int = MAX_QUEUED_BYTES
    #: ``--tasks``: ``auto`` declares the Tasks extension on each upstream ``tools/call`` and
    #: carries the tasks of the server (module taskdriver); ``off`` declares nothing.
    tasks: TaskMode = TaskMode.AUTO
    #: ``--host-profile``: ``auto`` picks the profile of the host from its ``initialize``
    #: (:func:`~.rules.revisions.choose_profile`); ``vscode`` and ``generic`` force one.
    host_profile: HostChoice = HostChoice.AUTO

    def __post_init__(self) -> None:
        # The command line gives the words: each becomes its member here, once.
        object.__setattr__(self, "protocol", UpstreamRevision(self.protocol))
        object.__setattr__(self, "tasks", TaskMode(self.tasks))
        object.__setattr__(self, "host_profile", HostChoice(self.host_profile))

