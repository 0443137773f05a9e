"""A notes server that VS Code and MCP 2026-07-28 clients can both use, with no bridge to install.

Run it::

    python -m mcpbridge.examples.notes_server

It speaks JSON-RPC on stdin and stdout and logs to stderr. The first request of
the client decides the revision (:func:`mcpbridge.embed.serve_stdio_auto`): VS
Code sends ``initialize`` and gets MCP 2025-11-25, a 2026-07-28 client gets the
server as it is. So VS Code starts it directly, in ``.vscode/mcp.json``::

    {
      "servers": {
        "notes": {
          "type": "stdio",
          "command": "python",
          "args": ["-m", "mcpbridge.examples.notes_server"]
        }
      }
    }

What it shows, once each:

* ``add_note``: a plain tool; its input schema comes from the type hints. The
  first note makes the tool ``delete_note`` appear: the client gets a
  ``tools/list_changed`` notification before the result of the call.
* ``delete_note``: a tool that asks the user to confirm in a form (an input
  round). The first call answers "input required"; the client shows the form
  and calls again with the answer. Deleting the last note hides the tool again.
* ``remind``: a slow tool that reports progress and stops at once when the
  client cancels it.
* ``notes://all``: a resource; a client that subscribed to it hears of each
  change. ``notes://note/{title}``: a resource template, one note each.
* ``summarize_notes``: a prompt built from the notes.

The option ``--refuse-discover`` answers a ``server/discover`` that comes
first with an error, so a client that speaks both revisions (the Copilot
harness of VS Code) falls back to ``initialize``; then the bridge carries out
the input rounds of ``delete_note`` for it.

Copy this file to start your own server.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Sequence
from typing import Any

from .. import __version__
from ..embed import serve_stdio_auto
from ..mcp.server import Context, InputRequired, ResourceNotFound, Server, ToolError, elicit_form

ALL_NOTES_URI = "notes://all"
NOTE_URI_TEMPLATE = "notes://note/{title}"
#: A form without fields is a confirmation: "accept" means yes.
CONFIRM_FORM: dict[str, Any] = {"type": "object", "properties": {}}
MAX_REMIND_SECONDS = 3600


class Notes:
    """The notes, by title, in the order they were added; safe to use from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._notes: dict[str, str] = {}

    def put(self, title: str, text: str) -> int:
        """Save a note; return how many notes there are now."""
        with self._lock:
            self._notes[title] = text
            return len(self._notes)

    def get(self, title: str) -> str | None:
        with self._lock:
            return self._notes.get(title)

    def delete(self, title: str) -> int:
        """Delete a note if it exists; return how many notes are left."""
        with self._lock:
            self._notes.pop(title, None)
            return len(self._notes)

    def items(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._notes.items())


def as_markdown(notes: list[tuple[str, str]]) -> str:
    """All notes as one Markdown text."""
    if not notes:
        return "No notes yet."
    return "\n\n".join(f"# {title}\n\n{text}" for title, text in notes)


def build() -> Server:
    """Make the server. Each call makes a new server with no notes."""
    server = Server(
        "notes",
        __version__,
        title="Notes",
        instructions="Keep short notes: add them, read them, delete them, or ask for a summary.",
    )
    notes = Notes()

    # -- tools -----------------------------------------------------------------------

    @server.tool(annotations={"idempotentHint": True})
    def add_note(ctx: Context, title: str, text: str) -> str:
        """Save a note under a title; a note with the same title is replaced."""
        title = title.strip()
        if not title:
            # The model reads this text and can call again with a title.
            raise ToolError("Give the note a title.")
        count = notes.put(title, text)
        if count == 1:
            # Publishes tools/list_changed on this thread: the client gets it
            # before the result of this call.
            server.set_tool_enabled("delete_note", True)
        server.notify_resource_updated(ALL_NOTES_URI)
        return f"Saved the note {title!r} ({count} notes)."

    @server.tool(annotations={"destructiveHint": True})
    def delete_note(ctx: Context, title: str) -> str:
        """Delete a note, after the user confirms it."""
        if notes.get(title) is None:
            raise ToolError(f"There is no note titled {title!r}.")
        answer = ctx.input_responses.get("confirm")
        if answer is None:
            # First round: ask. The client shows the form and calls the tool again
            # with the same arguments and the answer under the same key.
            raise InputRequired({"confirm": elicit_form(f"Delete the note {title!r}?", CONFIRM_FORM)})
        if not isinstance(answer, dict) or answer.get("action") != "accept":
            return f"Kept the note {title!r}."
        if notes.delete(title) == 0:
            server.set_tool_enabled("delete_note", False)
        server.notify_resource_updated(ALL_NOTES_URI)
        return f"Deleted the note {title!r}."

    # Nothing to delete yet: the first note shows the tool.
    server.set_tool_enabled("delete_note", False)

    @server.tool(annotations={"readOnlyHint": True})
    def remind(ctx: Context, text: str, seconds: int = 5) -> str:
        """Wait some seconds, with a progress notification each second, then send the text back."""
        if not 1 <= seconds <= MAX_REMIND_SECONDS:
            raise ToolError(f"Wait from 1 to {MAX_REMIND_SECONDS} seconds.")
        for done in range(seconds):
            # Sent only when the client asked for progress.
            ctx.progress(done, total=seconds, message=f"{seconds - done} s left")
            # Raises Cancelled at once when the client cancels the call or the
            # input ends; the server then sends no result.
            ctx.sleep(1.0)
        ctx.progress(seconds, total=seconds)
        return f"Reminder: {text}"

    # -- resources and prompts -------------------------------------------------------

    @server.resource(ALL_NOTES_URI, name="notes", title="All notes", mime_type="text/markdown")
    def all_notes(ctx: Context) -> str:
        return as_markdown(notes.items())

    @server.resource_template(NOTE_URI_TEMPLATE, name="note", title="One note", mime_type="text/plain")
    def one_note(ctx: Context, title: str) -> str:
        text = notes.get(title)
        if text is None:
            raise ResourceNotFound(ctx.target)
        return text

    @server.prompt(description="Ask the model for a summary of the notes")
    def summarize_notes(ctx: Context, style: str = "short") -> str:
        return f"Summarize these notes in a {style} style.\n\n{as_markdown(notes.items())}"

    return server


def main(argv: Sequence[str] | None = None) -> None:
    """Serve on stdin and stdout until stdin ends; diagnostics go to stderr."""
    parser = argparse.ArgumentParser(
        prog="python -m mcpbridge.examples.notes_server",
        description="A notes server for VS Code and MCP 2026-07-28 clients, on stdio.",
    )
    parser.add_argument(
        "--refuse-discover",
        action="store_true",
        help="answer a server/discover before initialize with an error (for the Copilot harness)",
    )
    options = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="notes-server: %(levelname)s: %(message)s"
    )
    serve_stdio_auto(build(), discover="refuse" if options.refuse_discover else "answer")


if __name__ == "__main__":
    main()
