"""The compiled requestedSchema of a form elicitation: what compiles and what content it accepts."""

from __future__ import annotations

from typing import Any

import pytest

from mcpbridge.bridge.rules.forms import MAX_FORM_SUBSCHEMAS, SchemaError, compile_form_schema


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("email", ["a@b", "ada.lovelace@example.com"], ["", "ada", "a@", "@b", "a b@c", "a@b@c"]),
        (
            "uri",
            ["https://example.com/x?y", "urn:isbn:0451450523", "mailto:a@b"],
            ["example.com", "", "ht tp://x"],
        ),
        (
            "date",
            ["2024-02-29", "2025-12-31"],
            ["2025-02-29", "2025-13-01", "2025-1-01", "20250101", "２０２５-01-01"],
        ),
        (
            "date-time",
            ["2025-01-12T15:00:58Z", "2025-01-12t15:00:58.123+02:00", "2016-12-31T23:59:60Z"],
            [
                "2025-01-12",
                "2025-01-12T15:00Z",
                "2025-01-12T24:00:00Z",
                "2025-01-12T15:00:00",
                "2025-01-12T15:00:00+25:00",
            ],
        ),
    ],
)
def test_formats_are_checked(fmt: str, good: list[str], bad: list[str]) -> None:
    form = compile_form_schema({"type": "object", "properties": {"v": {"type": "string", "format": fmt}}})
    assert [text for text in good if not form.accepts({"v": text})] == []
    assert [text for text in bad if form.accepts({"v": text})] == []


def test_numbers_integers_and_booleans_follow_json_schema() -> None:
    form = compile_form_schema(
        {
            "type": "object",
            "properties": {
                "i": {"type": "integer", "minimum": 1, "maximum": 3},
                "n": {"type": "number", "maximum": 2.5},
                "b": {"type": "boolean"},
            },
        }
    )
    assert form.accepts({"i": 2, "n": 2.5, "b": False})
    assert form.accepts({"i": 3.0})
    assert not form.accepts({"i": True})
    assert not form.accepts({"n": 2.6})
    assert not form.accepts({"b": 0})
    assert not form.accepts([])
    assert form.accepts({"other": {"anything": [1]}})


def test_single_and_multi_select_choices_are_checked() -> None:
    form = compile_form_schema(
        {
            "type": "object",
            "properties": {
                "one": {
                    "type": "string",
                    "oneOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}],
                },
                "many": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["x", "y", "z"]},
                    "maxItems": 2,
                },
                "some": {
                    "type": "array",
                    "items": {"anyOf": [{"const": "p", "title": "P"}]},
                    "minItems": 1,
                },
            },
            "required": ["some"],
        }
    )
    assert form.accepts({"one": "b", "many": ["x", "z"], "some": ["p"]})
    assert not form.accepts({"one": "c", "some": ["p"]})
    assert not form.accepts({"many": ["x", "y", "z"], "some": ["p"]})
    assert not form.accepts({"many": ["w"], "some": ["p"]})
    assert not form.accepts({"some": []})
    assert not form.accepts({"some": "p"})


def test_a_schema_that_is_not_an_object_of_properties_does_not_compile() -> None:
    schemas: list[Any] = [
        None,
        [],
        {"type": "string"},
        {"type": "object"},
        {"type": "object", "properties": []},
    ]
    for schema in schemas:
        with pytest.raises(SchemaError):
            compile_form_schema(schema)
    too_many = {f"p{i}": {"type": "boolean"} for i in range(MAX_FORM_SUBSCHEMAS)}
    with pytest.raises(SchemaError):
        compile_form_schema({"type": "object", "properties": too_many})
