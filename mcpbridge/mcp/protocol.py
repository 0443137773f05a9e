"""Constants of the two MCP revisions that mcpbridge speaks.

This module is pure: it holds names and values only.
"""

from __future__ import annotations

#: The revision mcpbridge speaks to an upstream server.
MODERN = "2026-07-28"
#: The revision VS Code speaks to the bridge.
LEGACY = "2025-11-25"

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
#: The ``_meta`` key of 2025-11-25 that ties a message to a task.
META_RELATED_TASK = "io.modelcontextprotocol/related-task"

#: The extension of 2026-07-28 that carries long-running requests as tasks.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
#: The requests of the Tasks extension that name a task (``params.taskId``).
TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
#: The notification of the Tasks extension on a listen stream (a detailed task).
TASK_NOTIFICATION = "notifications/tasks"

#: ``_meta`` keys that the protocol layer owns; a caller may not set them.
RESERVED_META_PREFIXES = ("io.modelcontextprotocol/",)
SDK_OWNED_META_KEYS = frozenset({"progressToken"})

#: Log levels in increasing severity (RFC 5424 names, as MCP uses them).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

RESULT_COMPLETE = "complete"
RESULT_INPUT_REQUIRED = "input_required"
#: The ``resultType`` of a ``CreateTaskResult`` of the Tasks extension.
RESULT_TASK = "task"

#: The requests and the notification of the client's input that the bridge sends to the client.
ELICITATION_CREATE = "elicitation/create"
SAMPLING_CREATE_MESSAGE = "sampling/createMessage"
ROOTS_LIST = "roots/list"
ELICITATION_COMPLETE = "notifications/elicitation/complete"

#: Methods that may answer with an InputRequiredResult.
INPUT_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})

#: Results that carry ``ttlMs`` and ``cacheScope``.
CACHEABLE_METHODS = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
#: Methods without side effects: the cacheable ones, and those that read one prompt or complete.
READ_ONLY_METHODS = CACHEABLE_METHODS | {"prompts/get", "completion/complete"}

LISTEN_ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
LIST_CHANGED = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}
RESOURCE_UPDATED = "notifications/resources/updated"
