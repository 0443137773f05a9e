"""A keyring backend for the tests: one JSON file, safe across processes.

The tests select it with ``keyring.set_keyring(FileKeyring(path))`` in process, or with
``PYTHON_KEYRING_BACKEND=tests.oauth_keyring.FileKeyring`` and ``MCPBRIDGE_TEST_KEYRING=<file>``
for a bridge process. ``MCPBRIDGE_TEST_KEYRING_MODE=locked`` makes every call fail as a
locked keychain; ``unavailable`` as one that does not answer.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from keyring import errors
from keyring.backend import KeyringBackend


class FileKeyring(KeyringBackend):
    """Passwords in one JSON file, under an exclusive lock for each call."""

    priority = 1

    def __init__(self, path: str | os.PathLike[str] | None = None, mode: str | None = None) -> None:
        super().__init__()
        default = os.environ.get("MCPBRIDGE_TEST_KEYRING", os.devnull)
        self.path = Path(path if path is not None else default)
        self.mode = mode if mode is not None else os.environ.get("MCPBRIDGE_TEST_KEYRING_MODE", "")
        self.calls: list[tuple[str, str]] = []

    def _check(self) -> None:
        if self.mode == "locked":
            raise errors.KeyringLocked("locked")
        if self.mode == "unavailable":
            raise errors.InitError("no answer")

    def _update(self, change: object) -> object:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                data = json.loads(self.path.read_text()) if self.path.exists() else {}
                result = change(data)  # type: ignore[operator]
                temporary = self.path.with_suffix(".tmp")
                temporary.write_text(json.dumps(data))
                os.replace(temporary, self.path)
                return result
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def get_password(self, service: str, username: str) -> str | None:
        self._check()
        self.calls.append(("get", username))
        if not self.path.exists():
            return None
        data = json.loads(self.path.read_text())
        return data.get(f"{service}\n{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        self._check()
        self.calls.append(("set", username))

        def change(data: dict[str, str]) -> None:
            data[f"{service}\n{username}"] = password

        self._update(change)

    def delete_password(self, service: str, username: str) -> None:
        self._check()
        self.calls.append(("delete", username))

        def change(data: dict[str, str]) -> bool:
            return data.pop(f"{service}\n{username}", None) is not None

        if not self._update(change):
            raise errors.PasswordDeleteError("not found")

    def entries(self) -> dict[str, str]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}
