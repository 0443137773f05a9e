"""The shapes of the 2025-11-25 schema that the bridge's requests to the client use.

The bridge sends its client only requests that have the shape of the client's schema, and
checks the answers against the same table, so a client never gets a request that it
must refuse. This module is pure: it does no I/O and reads no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from .jsonshape import matches

__all__ = ["LEGACY_SHAPES", "conforms"]


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/$defs/{name}"}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    shape: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        shape["required"] = list(required)
    return shape


def _array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


def _const(value: str) -> dict[str, Any]:
    return {"type": "string", "const": value}


def _enum(*values: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


_STRING: Final = {"type": "string"}
_INTEGER: Final = {"type": "integer"}
_NUMBER: Final = {"type": "number"}
_BOOLEAN: Final = {"type": "boolean"}
_URI: Final = {"type": "string", "format": "uri"}
_BYTES: Final = {"type": "string", "format": "byte"}
_PRIORITY: Final = {"type": "number", "minimum": 0, "maximum": 1}
_META: Final = {"type": "object", "additionalProperties": {}}
_ANY_OBJECT: Final = {"type": "object", "additionalProperties": {}}
_OPEN_OBJECT: Final = {"type": "object", "additionalProperties": True, "properties": {}}
_REQUEST_META: Final = {
    "type": "object",
    "additionalProperties": {},
    "properties": {"progressToken": _ref("ProgressToken")},
}
#: The kinds of a ``SamplingMessageContentBlock``.
_SAMPLING_BLOCKS: Final = (
    _ref("TextContent"),
    _ref("ImageContent"),
    _ref("AudioContent"),
    _ref("ToolUseContent"),
    _ref("ToolResultContent"),
)
_SAMPLING_CONTENT: Final = {"anyOf": [*_SAMPLING_BLOCKS, _array(_ref("SamplingMessageContentBlock"))]}
_TOOL_SCHEMA: Final = _object(
    {
        "$schema": _STRING,
        "properties": {"type": "object", "additionalProperties": _OPEN_OBJECT},
        "required": _array(_STRING),
        "type": _const("object"),
    },
    ("type",),
)
_CHOICES: Final = _array(_object({"const": _STRING, "title": _STRING}, ("const", "title")))

#: The definitions of the 2025-11-25 schema that the requests of the bridge to the client
#: and their answers use, transcribed without descriptions (the tests compare them with
#: the schema file). Two deliberate differences:
#:
#: * ``ElicitRequestFormParams``: the properties of ``requestedSchema`` are not checked
#:   here; :func:`~.forms.compile_form_schema` checks each against ``PrimitiveSchemaDefinition``,
#:   so a property such as ``{"type": "object"}`` is a schema that "does not compile".
#: * ``ElicitResult``: a value of ``content`` may be any number, not only an integer,
#:   because a form property of type ``number`` takes 2.5.
LEGACY_SHAPES: Final[Mapping[str, Mapping[str, Any]]] = MappingProxyType(
    {
        "ProgressToken": {"type": ["string", "integer"]},
        "TaskMetadata": _object({"ttl": _INTEGER}),
        "Role": _enum("assistant", "user"),
        "Annotations": _object(
            {"audience": _array(_ref("Role")), "lastModified": _STRING, "priority": _PRIORITY}
        ),
        "Icon": _object(
            {
                "mimeType": _STRING,
                "sizes": _array(_STRING),
                "src": _URI,
                "theme": _enum("dark", "light"),
            },
            ("src",),
        ),
        "TextContent": _object(
            {"_meta": _META, "annotations": _ref("Annotations"), "text": _STRING, "type": _const("text")},
            ("text", "type"),
        ),
        "ImageContent": _object(
            {
                "_meta": _META,
                "annotations": _ref("Annotations"),
                "data": _BYTES,
                "mimeType": _STRING,
                "type": _const("image"),
            },
            ("data", "mimeType", "type"),
        ),
        "AudioContent": _object(
            {
                "_meta": _META,
                "annotations": _ref("Annotations"),
                "data": _BYTES,
                "mimeType": _STRING,
                "type": _const("audio"),
            },
            ("data", "mimeType", "type"),
        ),
        "ToolUseContent": _object(
            {
                "_meta": _META,
                "id": _STRING,
                "input": _ANY_OBJECT,
                "name": _STRING,
                "type": _const("tool_use"),
            },
            ("id", "input", "name", "type"),
        ),
        "ToolResultContent": _object(
            {
                "_meta": _META,
                "content": _array(_ref("ContentBlock")),
                "isError": _BOOLEAN,
                "structuredContent": _ANY_OBJECT,
                "toolUseId": _STRING,
                "type": _const("tool_result"),
            },
            ("content", "toolUseId", "type"),
        ),
        "TextResourceContents": _object(
            {"_meta": _META, "mimeType": _STRING, "text": _STRING, "uri": _URI}, ("text", "uri")
        ),
        "BlobResourceContents": _object(
            {"_meta": _META, "blob": _BYTES, "mimeType": _STRING, "uri": _URI}, ("blob", "uri")
        ),
        "ResourceLink": _object(
            {
                "_meta": _META,
                "annotations": _ref("Annotations"),
                "description": _STRING,
                "icons": _array(_ref("Icon")),
                "mimeType": _STRING,
                "name": _STRING,
                "size": _INTEGER,
                "title": _STRING,
                "type": _const("resource_link"),
                "uri": _URI,
            },
            ("name", "type", "uri"),
        ),
        "EmbeddedResource": _object(
            {
                "_meta": _META,
                "annotations": _ref("Annotations"),
                "resource": {"anyOf": [_ref("TextResourceContents"), _ref("BlobResourceContents")]},
                "type": _const("resource"),
            },
            ("resource", "type"),
        ),
        "ContentBlock": {
            "anyOf": [
                _ref("TextContent"),
                _ref("ImageContent"),
                _ref("AudioContent"),
                _ref("ResourceLink"),
                _ref("EmbeddedResource"),
            ]
        },
        "SamplingMessageContentBlock": {"anyOf": list(_SAMPLING_BLOCKS)},
        "SamplingMessage": _object(
            {"_meta": _META, "content": _SAMPLING_CONTENT, "role": _ref("Role")}, ("content", "role")
        ),
        "ModelHint": _object({"name": _STRING}),
        "ModelPreferences": _object(
            {
                "costPriority": _PRIORITY,
                "hints": _array(_ref("ModelHint")),
                "intelligencePriority": _PRIORITY,
                "speedPriority": _PRIORITY,
            }
        ),
        "ToolChoice": _object({"mode": _enum("auto", "none", "required")}),
        "ToolAnnotations": _object(
            {
                "destructiveHint": _BOOLEAN,
                "idempotentHint": _BOOLEAN,
                "openWorldHint": _BOOLEAN,
                "readOnlyHint": _BOOLEAN,
                "title": _STRING,
            }
        ),
        "ToolExecution": _object({"taskSupport": _enum("forbidden", "optional", "required")}),
        "Tool": _object(
            {
                "_meta": _META,
                "annotations": _ref("ToolAnnotations"),
                "description": _STRING,
                "execution": _ref("ToolExecution"),
                "icons": _array(_ref("Icon")),
                "inputSchema": _TOOL_SCHEMA,
                "name": _STRING,
                "outputSchema": _TOOL_SCHEMA,
                "title": _STRING,
            },
            ("inputSchema", "name"),
        ),
        "CreateMessageRequestParams": _object(
            {
                "_meta": _REQUEST_META,
                "includeContext": _enum("allServers", "none", "thisServer"),
                "maxTokens": _INTEGER,
                "messages": _array(_ref("SamplingMessage")),
                "metadata": _OPEN_OBJECT,
                "modelPreferences": _ref("ModelPreferences"),
                "stopSequences": _array(_STRING),
                "systemPrompt": _STRING,
                "task": _ref("TaskMetadata"),
                "temperature": _NUMBER,
                "toolChoice": _ref("ToolChoice"),
                "tools": _array(_ref("Tool")),
            },
            ("maxTokens", "messages"),
        ),
        "StringSchema": _object(
            {
                "default": _STRING,
                "description": _STRING,
                "format": _enum("date", "date-time", "email", "uri"),
                "maxLength": _INTEGER,
                "minLength": _INTEGER,
                "title": _STRING,
                "type": _const("string"),
            },
            ("type",),
        ),
        "NumberSchema": _object(
            {
                "default": _NUMBER,
                "description": _STRING,
                "maximum": _NUMBER,
                "minimum": _NUMBER,
                "title": _STRING,
                "type": _enum("integer", "number"),
            },
            ("type",),
        ),
        "BooleanSchema": _object(
            {"default": _BOOLEAN, "description": _STRING, "title": _STRING, "type": _const("boolean")},
            ("type",),
        ),
        "UntitledSingleSelectEnumSchema": _object(
            {
                "default": _STRING,
                "description": _STRING,
                "enum": _array(_STRING),
                "title": _STRING,
                "type": _const("string"),
            },
            ("enum", "type"),
        ),
        "TitledSingleSelectEnumSchema": _object(
            {
                "default": _STRING,
                "description": _STRING,
                "oneOf": _CHOICES,
                "title": _STRING,
                "type": _const("string"),
            },
            ("oneOf", "type"),
        ),
        "UntitledMultiSelectEnumSchema": _object(
            {
                "default": _array(_STRING),
                "description": _STRING,
                "items": _object({"enum": _array(_STRING), "type": _const("string")}, ("enum", "type")),
                "maxItems": _INTEGER,
                "minItems": _INTEGER,
                "title": _STRING,
                "type": _const("array"),
            },
            ("items", "type"),
        ),
        "TitledMultiSelectEnumSchema": _object(
            {
                "default": _array(_STRING),
                "description": _STRING,
                "items": _object({"anyOf": _CHOICES}, ("anyOf",)),
                "maxItems": _INTEGER,
                "minItems": _INTEGER,
                "title": _STRING,
                "type": _const("array"),
            },
            ("items", "type"),
        ),
        "LegacyTitledEnumSchema": _object(
            {
                "default": _STRING,
                "description": _STRING,
                "enum": _array(_STRING),
                "enumNames": _array(_STRING),
                "title": _STRING,
                "type": _const("string"),
            },
            ("enum", "type"),
        ),
        "PrimitiveSchemaDefinition": {
            "anyOf": [
                _ref("StringSchema"),
                _ref("NumberSchema"),
                _ref("BooleanSchema"),
                _ref("UntitledSingleSelectEnumSchema"),
                _ref("TitledSingleSelectEnumSchema"),
                _ref("UntitledMultiSelectEnumSchema"),
                _ref("TitledMultiSelectEnumSchema"),
                _ref("LegacyTitledEnumSchema"),
            ]
        },
        "ElicitRequestFormParams": _object(
            {
                "_meta": _REQUEST_META,
                "message": _STRING,
                "mode": _const("form"),
                "requestedSchema": _object(
                    {
                        "$schema": _STRING,
                        "properties": {"type": "object", "additionalProperties": {}},
                        "required": _array(_STRING),
                        "type": _const("object"),
                    },
                    ("properties", "type"),
                ),
                "task": _ref("TaskMetadata"),
            },
            ("message", "requestedSchema"),
        ),
        "ElicitRequestURLParams": _object(
            {
                "_meta": _REQUEST_META,
                "elicitationId": _STRING,
                "message": _STRING,
                "mode": _const("url"),
                "task": _ref("TaskMetadata"),
                "url": _URI,
            },
            ("elicitationId", "message", "mode", "url"),
        ),
        "RequestParams": _object({"_meta": _REQUEST_META}),
        "ElicitResult": _object(
            {
                "_meta": _META,
                "action": _enum("accept", "cancel", "decline"),
                "content": {
                    "type": "object",
                    "additionalProperties": {
                        "anyOf": [_array(_STRING), {"type": ["string", "number", "boolean"]}]
                    },
                },
            },
            ("action",),
        ),
        "CreateMessageResult": _object(
            {
                "_meta": _META,
                "content": _SAMPLING_CONTENT,
                "model": _STRING,
                "role": _ref("Role"),
                "stopReason": _STRING,
            },
            ("content", "model", "role"),
        ),
        "Root": _object({"_meta": _META, "name": _STRING, "uri": _URI}, ("uri",)),
        "ListRootsResult": _object({"_meta": _META, "roots": _array(_ref("Root"))}, ("roots",)),
    }
)


def conforms(value: Any, definition: str) -> bool:
    """True when ``value`` has the shape of the definition ``definition`` of :data:`LEGACY_SHAPES`.

    The check follows JSON Schema for the keywords the table uses
    (:func:`~.jsonshape.matches`); ``format`` is an annotation, as in the default mode of
    JSON Schema validators.

    Raises:
        KeyError: the table has no such definition.
    """
    return matches(value, LEGACY_SHAPES[definition], LEGACY_SHAPES)
