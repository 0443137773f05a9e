"""A count that a peer's tool can wait for, so that a test waits for an event, not for a time.

The SDK peers run it in their event loop (anyio); they import it as a sibling module,
since they run as scripts from this folder.
"""

from __future__ import annotations

import anyio


class Count:
    """A number that only grows, and a bounded wait for it to reach a value."""

    def __init__(self) -> None:
        self.value = 0
        self._grown: anyio.Event | None = None

    def add(self) -> None:
        self.value += 1
        if self._grown is not None:
            self._grown.set()
            self._grown = None

    async def reach(self, at_least: int, seconds: float) -> int:
        """The value, once it is at least ``at_least``; a ``ValueError`` that says both after ``seconds``."""
        with anyio.move_on_after(seconds):
            while self.value < at_least:
                if self._grown is None:
                    self._grown = anyio.Event()
                await self._grown.wait()
        if self.value < at_least:
            raise ValueError(f"the count is {self.value}, not {at_least}, after {seconds} s")
        return self.value
