"""``mcp-bridge-vscode secret`` and the values of ``--header-secret``.

``secret set <name>`` reads the value from stdin, or with a prompt that does not echo when
stdin is a terminal, and keeps it in the token store of ``--token-store`` (the keychain,
else the file store with a token key) under ``--account``; ``secret delete <name>`` deletes
it; ``secret list`` writes the names of the account on stdout, one a line, never a value.

At the start of the URL form and of ``check``, :func:`with_header_secrets` reads the value
of each ``--header-secret`` from the same store. A missing secret stops the start with a
line that names the command to run. A value never reaches the command line, a log line or
an error message: the log knows it as a secret before anything can log it.

Exit codes of ``secret``: 0 when it did what it was asked (also a delete of a secret that
was not there); 1 when the store failed; 2 when the arguments are not valid, the store
does not open, or the value is empty or not a valid header value.
"""

from __future__ import annotations

import dataclasses
import getpass
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import BinaryIO

from .. import log as bridge_log
from ..oauth.errors import StoreError, StoreOpenError
from ..oauth.header_secrets import MAX_SECRET_BYTES, HeaderSecrets, open_secret_store
from ..oauth.keychain import KeyringStore
from ..oauth.tokenstore import TokenStore
from . import settings as args
from .headers import Header, field_value_problem, trim
from .options import PROGRAM

__all__ = ["EXIT_SECRET", "secret", "with_header_secrets"]

logger = logging.getLogger("mcpbridge.vscode")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
#: The exit code of a start whose ``--header-secret`` cannot be read.
EXIT_SECRET = 2


def _secrets(
    store: args.Store,
    env: Mapping[str, str] | None,
    keychain: Callable[[], TokenStore],
    *,
    of: str,
) -> tuple[HeaderSecrets, str] | None:
    """The secrets of the account and the line that names their store; ``None`` after the
    error line when the store does not open (``of`` names the secrets in that line)."""
    try:
        opened = open_secret_store(
            store.token_store,
            key=store.token_key,
            key_file=store.token_key_file,
            env=os.environ if env is None else env,
            keychain=keychain,
        )
    except StoreOpenError as exc:
        logger.error("the store of %s did not open: %s", of, exc.detail)
        return None
    return HeaderSecrets(opened.store, store.account), opened.line


def with_header_secrets(
    upstream: args.UrlUpstream,
    env: Mapping[str, str] | None = None,
    *,
    keychain: Callable[[], TokenStore] = KeyringStore.open,
) -> args.UrlUpstream | int:
    """``upstream`` with the value of each ``--header-secret``; or the exit code after the
    error line when a secret cannot be read."""
    wanted = [header for header in upstream.headers if header.from_secret]
    if not wanted:
        return upstream
    account = upstream.store.account
    opened = _secrets(upstream.store, env, keychain, of="the secrets of --header-secret")
    if opened is None:
        return EXIT_SECRET
    secrets = opened[0]
    values: dict[str, str] = {}
    for header in wanted:
        name = header.from_secret
        assert name is not None
        try:
            value = secrets.get(name)
        except StoreError as exc:
            logger.error('the secret "%s" of --header-secret cannot be read: %s', name, exc.detail)
            return EXIT_SECRET
        if value is None:
            option = "" if account == args.DEFAULT_ACCOUNT else f"--account {account} "
            logger.error(
                'the secret "%s" of --header-secret is not stored for the account "%s": '
                'run "%s secret set %s%s" and type its value',
                name,
                account,
                PROGRAM,
                option,
                name,
            )
            return EXIT_SECRET
        bridge_log.add_secret(value)
        values[name] = value
    headers = tuple(
        Header(h.name, values[h.from_secret], None, h.from_secret) if h.from_secret else h
        for h in upstream.headers
    )
    return dataclasses.replace(upstream, headers=headers)


def secret(
    settings: args.SecretSettings,
    *,
    env: Mapping[str, str] | None = None,
    keychain: Callable[[], TokenStore] = KeyringStore.open,
    stdin: BinaryIO | None = None,
) -> int:
    """Run ``secret set``, ``delete`` or ``list``; return the exit code."""
    action, name = settings.action, settings.name
    value: str | None = None
    if action == "set":
        assert name is not None
        value = _read_value(name, sys.stdin.buffer if stdin is None else stdin)
        if value is None:
            return EXIT_USAGE
    opened = _secrets(settings.store, env, keychain, of="the secrets")
    if opened is None:
        return EXIT_USAGE
    secrets, line = opened
    try:
        if action == "list":
            for found in secrets.names():
                sys.stdout.write(found + "\n")
            sys.stdout.flush()
            return EXIT_OK
        assert name is not None
        if action == "delete":
            if secrets.delete(name):
                logger.info('deleted the secret "%s" of the account "%s"', name, settings.store.account)
            else:
                logger.info('the account "%s" has no secret "%s"', settings.store.account, name)
            return EXIT_OK
        assert value is not None
        secrets.set(name, value)
    except StoreError as exc:
        logger.error("the store of the secrets failed: %s", exc.detail)
        return EXIT_FAILED
    logger.info('stored the secret "%s" of the account "%s": %s', name, settings.store.account, line)
    return EXIT_OK


def _read_value(name: str, stdin: BinaryIO) -> str | None:
    """The value of the secret: a prompt without echo on a terminal, else all of stdin (one
    line end at its end is not part of it); ``None`` after the error line."""
    if stdin.isatty():
        text = getpass.getpass(f"The value of the secret {name} (not shown): ")
    else:
        data = stdin.read(MAX_SECRET_BYTES + 3)
        if len(data) > MAX_SECRET_BYTES + 2:
            logger.error("the value of the secret is longer than %d bytes", MAX_SECRET_BYTES)
            return None
        text = data.decode("utf-8", "surrogateescape")
        if text.endswith("\n"):
            text = text[:-1]
            if text.endswith("\r"):
                text = text[:-1]
    value = trim(text)
    bridge_log.add_secret(value)
    if not value:
        logger.error("the value of the secret is empty: write it to stdin, or type it at the prompt")
        return None
    problem = field_value_problem(value)
    if problem is not None:
        logger.error("the value of the secret is not a valid HTTP header value: %s", problem)
        return None
    return value
