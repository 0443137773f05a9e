"""The run of ``mcp-bridge-vscode check`` that every step shares: the one time limit of the
whole run, and the steps and problems it adds to the report.

:class:`CheckRun` is the base of the run of :mod:`.check`; :mod:`.check_tools` adds the
lists and the tool call.
"""

from __future__ import annotations

import time
from typing import Any, Final

from ..bridge.rules.revisions import LATEST as LATEST_REVISION
from ..bridge.rules.revisions import OTHER_HOSTS, choose_profile
from ..mcp.errors import McpError, RequestTimeout
from ..mcp.text import format_duration
from . import settings as args
from .check_advice import diagnose, failure_text
from .check_report import FAILED, SKIPPED, TIMED_OUT, Problem, Report, Step

__all__ = ["CLOSE_GRACE", "LATE_CLOSE_GRACE", "CheckRun"]


#: The wait for the close of an upstream server while the time limit has time left.
CLOSE_GRACE: Final = 2.0
#: The wait for the close once the time limit is (nearly) used up: a server that keeps
#: running after the end of its stdin is stopped at once, so the run ends in time.
LATE_CLOSE_GRACE: Final = 0.1


class CheckRun:
    """The state of one check: its settings, its report and the time limit of the whole run."""

    def __init__(self, settings: args.CheckSettings, env: dict[str, str], started: float) -> None:
        from ..bridge.rules.lists import ToolFilter

        self.settings = settings
        self.env = env
        serving, upstream = settings.serving, settings.upstream
        self.tool_filter = ToolFilter(serving.allow_tools, serving.deny_tools)
        #: The one time limit of the whole run (a :func:`time.monotonic` time).
        self.deadline = started + upstream.discover_timeout
        self.report = Report(
            upstream={}, host_profile=_host_profile(serving.host_profile), protocol=str(upstream.protocol)
        )
        #: The server answered 401 or 403: the sign-in flows matter.
        self.asked_sign_in = False
        #: The ``WWW-Authenticate`` header of that answer (it may name the metadata's address).
        self.challenge: str | None = None
        #: The requests of a 2025-era server since the last clear (see :data:`.check_tools.SERVER_REQUESTS`).
        self.server_asked: set[str] = set()
        #: What the server answered the ``--call-tool`` call on a 2026-07-28 connection, when
        #: that says that the tool needs the requests of the 2025 era.
        self.needs_2025_era: str | None = None
        #: The names of the tools of the full tool list, once the check read it.
        self.tool_names: list[str] | None = None
        #: The app-only tools that the bridge keeps under the tool filter for the apps that it keeps.
        self.kept_app_tools: set[str] = set()

    # ------------------------------------------------------------ time limit

    def _left(self, limit: float | None = None) -> float:
        """The seconds left of the time limit of the run, at most ``limit``."""
        left = max(0.0, self.deadline - time.monotonic())
        return left if limit is None else min(left, limit)

    def _wait(self, method: str) -> float:
        """The time that a request of ``method`` may wait for its answer.

        Raises:
            RequestTimeout: no time is left.
        """
        left = self._left()
        if left <= 0:
            raise RequestTimeout(f"{method}: no time left")
        return left

    def _grace(self) -> float:
        """The wait for the close of a server: half of what is left of the time limit (a child
        gets it twice: after the end of its stdin, then after ``SIGTERM``), within bounds."""
        return min(CLOSE_GRACE, max(self._left() / 2, LATE_CLOSE_GRACE))

    def _out_of_time(self, step: str) -> bool:
        """Whether no time is left for ``step``; then it is skipped."""
        if self._left() > 0:
            return False
        limit = format_duration(self.settings.upstream.discover_timeout)
        self._skip(step, f"no time left (--discover-timeout {limit} bounds the whole check)")
        return True

    # --------------------------------------------------------------- report

    def _step(self, name: str, started: float, status: str, outcome: str) -> None:
        self.report.steps.append(Step(name, _ms(started), status, outcome))

    def _skip(self, name: str, reason: str) -> None:
        self.report.steps.append(Step(name, 0, SKIPPED, reason))

    def _problem(self, problem: str, fix: str) -> None:
        self.report.problems.append(Problem(problem, fix))

    def _failure(self, step: str, exc: McpError, started: float) -> None:
        if exc.http_status in (401, 403):
            self.asked_sign_in = True
            self.challenge = getattr(exc, "www_authenticate", None) or self.challenge
        if isinstance(exc, RequestTimeout):
            status, outcome = TIMED_OUT, failure_text(exc)
            if self._left() <= 0:
                limit = format_duration(self.settings.upstream.discover_timeout)
                outcome = f"no answer before the end of the {limit} of --discover-timeout"
        else:
            status, outcome = FAILED, failure_text(exc)
        self._step(step, started, status, outcome)
        problem, fix = diagnose(step, exc, self.settings.upstream)
        self._problem(problem, fix)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _host_profile(setting: str) -> dict[str, Any]:
    """The profile that VS Code and the other hosts get under ``--host-profile setting``."""
    vscode = choose_profile(setting, "Visual Studio Code", LATEST_REVISION).name
    others = choose_profile(setting, next(iter(sorted(OTHER_HOSTS))), LATEST_REVISION).name
    return {"setting": setting, "vscode": vscode, "otherHosts": others}
