"""The lines of the client: each into a message, or into the error of a bad line; and batches.

The reader of the front end (:class:`~.frontend.Frontend`) hands each line that it
reads to its :class:`ClientLines` (:meth:`ClientLines.handle`), which gives each
message back to the front end through :class:`LinesHost`. A line that is no
message gets its error here: a line over the limit ``line_too_long``, a line that
is no JSON ``parse_error``, one nested too deep ``too_deep``, one of a wrong
shape ``invalid_request_shape``. A bad line shaped as a response with the id of
a request of the bridge or of the upstream answers that request
(:meth:`LinesHost.resolve_bad_answer`); other responses that are not valid are
dropped.

A client of 2025-03-26 may send a JSON-RPC batch: each element goes to the front
end as a line of its own, and every answer to it goes into one
:class:`~.output.Batch`, written as one array once the last is in. While the
reader reads a batch, the errors of the reader (:meth:`ClientLines.write_error`),
its results (:meth:`ClientLines.write_result`) and the slots that start
(:meth:`ClientLines.join`) answer into that batch.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ...mcp import jsonrpc
from ...mcp.droplog import DropLog
from ...mcp.ids import shows_response
from ...mcp.jsonrpc import FrameError
from ...mcp.transports.framing import TooLong
from ..rules import errortable, legacy
from .options import Options
from .output import LARGE_FRAME_BYTES, Batch, LargeFrames, Output, Slot

__all__ = ["ClientLines", "LinesHost"]


class LinesHost(Protocol):
    """What the lines need of the front end: what it does with a message."""

    def takes_batches(self) -> bool:
        """A line that starts with ``[`` is a batch now."""
        ...

    def resolve_bad_answer(self, request_id: Any) -> bool:
        """A bad response with ``request_id``: True when a request of the bridge or the upstream
        waited for it (it learns that its answer was lost)."""
        ...

    def handle_message(self, message: jsonrpc.Message) -> None:
        """Do what the connection does with ``message`` of the client."""
        ...


class ClientLines:
    """The lines of one client; see the module docstring."""

    def __init__(
        self, host: LinesHost, output: Output, options: Options, drops: DropLog, large_frames: LargeFrames
    ) -> None:
        self._host = host
        self.output, self.options, self.drops = output, options, drops
        self._large_frames = large_frames
        #: The batch of the client that the reader reads now (module ``output``, :class:`Batch`).
        self._batch: Batch | None = None

    def handle(self, item: bytes | TooLong, control_free: bool = False) -> None:
        """Handle one line of the client (``TooLong``: one over the limit)."""
        if isinstance(item, TooLong):
            request_id = legacy.recover_id(item.head, item.tail)
            if shows_response(item.head) and self._host.resolve_bad_answer(request_id):
                return
            self.output.write_error(
                request_id,
                errortable.error_object("line_too_long", f"limit: {self.options.max_line_bytes} bytes"),
            )
            return
        if len(item) >= LARGE_FRAME_BYTES:
            self._large_frames.count()
        if item[:64].lstrip()[:1] == b"[" and self._host.takes_batches():
            self._handle_batch(item)
            return
        try:
            message = jsonrpc.parse(item, max_depth=self.options.max_depth, control_free=control_free)
        except FrameError as exc:
            self._handle_frame_error(item, exc)
            return
        self._host.handle_message(message)

    def _handle_batch(self, line: bytes) -> None:
        """A batch: each element as if it came alone, and their responses as one array."""
        try:  # the array is one level more than each of its messages
            elements = jsonrpc.parse_json(line, max_depth=self.options.max_depth + 1)
        except FrameError as exc:
            self._handle_frame_error(line, exc)
            return
        if not isinstance(elements, list) or not elements:
            self.output.write_error(None, errortable.error_object("invalid_request_shape"))
            return
        batch = self._batch = Batch()
        try:
            for element in elements:
                try:
                    message = jsonrpc.from_obj(element)
                except FrameError as exc:
                    self._handle_frame_error(b"", exc)
                    continue
                self._host.handle_message(message)
        finally:
            self._batch = None
            self.output.batch_frame(batch, None, end=True)

    def write_error(self, request_id: Any, error: dict[str, Any]) -> None:
        """Write an error of the reader, into the batch that it reads if any."""
        if self._batch is None:
            self.output.write_error(request_id, error)
            return
        frame = {"jsonrpc": "2.0", "error": error}
        if request_id is not None:
            frame = {"jsonrpc": "2.0", "id": request_id, "error": error}
        self.output.batch_frame(self._batch, jsonrpc.serialize(frame))

    def write_result(self, request_id: Any, result: Any) -> None:
        """Write a result of the reader, into the batch that it reads if any."""
        if self._batch is not None:
            self.output.batch_frame(self._batch, jsonrpc.serialize(jsonrpc.Response(request_id, result)))
        else:
            self.output.write(jsonrpc.Response(request_id, result))

    def join(self, slot: Slot) -> None:
        """The answer of ``slot`` goes into the batch that the reader reads, if any."""
        if self._batch is not None:
            self.output.join_batch(slot, self._batch)

    def _handle_frame_error(self, line: bytes, exc: FrameError) -> None:
        request_id = exc.id
        is_response = exc.is_response
        if request_id is None and exc.cause in ("parse_error", "too_deep"):
            # too_deep without an id: nesting past the parser's stack, the id was never read.
            request_id = legacy.recover_id(line[:256], line[-256:])
            is_response = shows_response(line[:256])
        if is_response and self._host.resolve_bad_answer(request_id):
            return
        if exc.is_response:
            self.drops(
                logging.DEBUG,
                "dropped responses of the client that are not valid",
                "dropped a response of the client that is not valid",
            )
            return
        if exc.cause == "parse_error":
            error = errortable.error_object("parse_error")
        elif exc.cause == "too_deep":
            error = errortable.error_object("too_deep", f"limit: {self.options.max_depth} levels")
        else:
            error = errortable.error_object("invalid_request_shape")
            if exc.cause == "invalid_id":
                request_id = None
        self.write_error(request_id, error)

