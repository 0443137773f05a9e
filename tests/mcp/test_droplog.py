"""Every fault that the bridge survives leaves one clear line: the rate of the drop lines."""

from __future__ import annotations

import logging

import pytest

from mcpbridge.mcp.droplog import DROP_LOG_INTERVAL, DropLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def logger() -> logging.Logger:
    logger = logging.getLogger("mcpbridge.test-droplog")
    logger.setLevel(logging.DEBUG)
    return logger


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "mcpbridge.test-droplog"]


def test_the_first_drop_is_logged_and_the_next_ones_in_10_s_are_counted(
    logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    assert DROP_LOG_INTERVAL == 10.0
    clock = Clock()
    drops = DropLog(logger, clock=clock)
    with caplog.at_level(logging.DEBUG, logger.name):
        drops(logging.WARNING, "dropped bad lines", "a bad line of %d bytes", 5)
        for size in range(6, 10):
            clock.now += 2.0
            drops(logging.WARNING, "dropped bad lines", "a bad line of %d bytes", size)
        assert messages(caplog) == ["a bad line of 5 bytes"]
        clock.now += 2.0  # 10 s after the first line
        drops(logging.WARNING, "dropped bad lines", "a bad line of %d bytes", 10)
        assert messages(caplog)[1:] == ["a bad line of 10 bytes (and 4 more of these in the 10 s before)"]
        assert [record.levelno for record in caplog.records] == [logging.WARNING] * 2


def test_kinds_are_counted_apart_and_flush_tells_the_counts_left(
    logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    drops = DropLog(logger, clock=clock)
    with caplog.at_level(logging.DEBUG, logger.name):
        for _ in range(3):
            drops(logging.WARNING, "dropped bad lines", "a bad line")
            drops(logging.DEBUG, "dropped late answers", "a late answer")
        drops.flush()
        drops.flush()  # nothing left to tell
    assert messages(caplog) == [
        "a bad line",
        "a late answer",
        "dropped bad lines since the last such line: 2 more",
        "dropped late answers since the last such line: 2 more",
    ]
    assert [record.levelno for record in caplog.records][2:] == [logging.WARNING, logging.DEBUG]


def test_a_drop_below_the_level_of_the_logger_costs_nothing(
    logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    drops = DropLog(logger, clock=clock)
    with caplog.at_level(logging.INFO, logger.name):
        logger.setLevel(logging.INFO)
        drops(logging.DEBUG, "dropped late answers", "a late answer")
        drops.flush()
    assert messages(caplog) == []
