"""The headers of ``--header``, ``--header-env`` and ``--header-secret``: their syntax, the names
that they refuse, and their values from the command line or the environment (the value of a
secret comes from the token store at the start: :mod:`.secret_command`).

This module is pure. A diagnostic names the header only once it is a valid HTTP token, and
never holds a value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from ..oauth.config import SECRET_NAME
from .words import ArgError, invalid_value

__all__ = [
    "PROXY_AUTHORIZATION",
    "REFUSED_HEADER_NAMES",
    "REFUSED_HEADER_PREFIX",
    "SECRET_HEADER_NAMES",
    "Header",
    "HeaderArg",
    "field_value_problem",
    "parse_header",
    "resolve_headers",
    "trim",
    "variable",
]


#: Header names that ``--header`` and ``--header-env`` refuse (lower case): the HTTP client or
#: the protocol layer sends them, or they change the connection. A second copy would make
#: the request ambiguous.
REFUSED_HEADER_NAMES: Final = frozenset(
    {
        "host",
        "connection",
        "content-length",
        "transfer-encoding",
        "accept",
        "content-type",
        "accept-encoding",
        "dpop",
        "te",
        "trailer",
        "upgrade",
        "keep-alive",
        "proxy-connection",
        "expect",
    }
)
#: A user header goes to the upstream server (also through the tunnel of a proxy), never to
#: the proxy: the proxy credentials belong in the proxy URL.
PROXY_AUTHORIZATION: Final = "proxy-authorization"
#: The header names of the protocol, for example ``mcp-protocol-version``.
REFUSED_HEADER_PREFIX: Final = "mcp-"
#: Header names whose value is usually a secret: ``--header`` with one of them gives a warning.
SECRET_HEADER_NAMES: Final = frozenset({"authorization", "cookie", "x-api-key", "api-key"})


@dataclass(frozen=True, slots=True)
class Header:
    """One header of ``--header`` or ``--header-env``, in command-line order."""

    name: str
    #: The value without spaces and tabs at its ends. Send it as
    #: ``value.encode("utf-8", "surrogateescape")``: that gives back the bytes of the
    #: command line or the environment.
    value: str = field(repr=False)
    #: The variable of ``--header-env``, or ``None`` for ``--header``.
    from_env: str | None
    #: The secret of ``--header-secret``: ``value`` is empty until the start reads the secret.
    from_secret: str | None = None


#: The characters of an HTTP token (RFC 9110 section 5.6.2).
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def trim(text: str) -> str:
    return text.strip(" \t")


def variable(env: Mapping[str, str], name: str) -> str | None:
    """The value of ``name`` without spaces and tabs at its ends; ``None`` if unset or empty."""
    value = trim(env.get(name, ""))
    return value or None


def field_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be an HTTP field value, or ``None``: no control character other
    than the tab; its bytes are those of the command line or the environment."""
    try:
        data = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return "the value has a character that is not valid"
    if any((b < 0x20 and b != 0x09) or b == 0x7F for b in data):
        return "the value has a control character"
    return None


@dataclass(frozen=True, slots=True)
class HeaderArg:
    option: str  # "--header", "--header-env" or "--header-secret"
    name: str
    source: str  # the value of --header, the variable of --header-env, the secret of --header-secret


def parse_header(earlier: Sequence[HeaderArg], option: str, value: str) -> HeaderArg:
    """``<name>:<value>`` of ``--header`` or ``<name>=<VAR>`` of ``--header-env``.

    The name is shown in a diagnostic only once it is a valid HTTP token.
    """
    from_env = option in ("--header-env", "--header-secret")
    if option == "--header-secret":
        syntax = (
            "use <name>=<secret>, with an HTTP header name and a secret name of 1 to 64 letters, "
            "digits and . _ @ + -"
        )
    elif from_env:
        syntax = "use <name>=<variable>, with an HTTP header name and the name of an environment variable"
    else:
        syntax = "use <name>:<value>, with an HTTP header name"
    name, separator, rest = value.partition("=" if from_env else ":")
    if not separator or not _TOKEN.match(name):
        raise invalid_value(option, syntax)
    lower = name.lower()
    if lower in REFUSED_HEADER_NAMES:
        hint = "the bridge or the HTTP connection sets this header"
    elif lower == PROXY_AUTHORIZATION:
        hint = (
            "the header goes to the upstream server and not to the proxy: "
            "put the user and the password in the proxy URL of HTTPS_PROXY"
        )
    elif lower.startswith(REFUSED_HEADER_PREFIX):
        hint = "the header names that start with mcp- are for the protocol"
    else:
        hint = ""
    if hint:
        raise ArgError("refused_header", f"the header {name} of {option} is not permitted: {hint}", option)
    if any(h.name.lower() == lower for h in earlier):
        raise ArgError(
            "duplicate_header",
            f"the header {name} occurs more than one time in --header and --header-env",
            option,
        )
    if from_env:
        if not (SECRET_NAME if option == "--header-secret" else _VARIABLE_NAME).match(rest):
            raise invalid_value(option, syntax)
        return HeaderArg(option, name, rest)
    header_value = trim(rest)
    if not header_value:
        raise invalid_value(option, "the header has no value", name)
    problem = field_value_problem(header_value)
    if problem is not None:
        raise invalid_value(option, problem, name)
    return HeaderArg(option, name, header_value)


def resolve_headers(
    args: Sequence[HeaderArg], env: Mapping[str, str]
) -> tuple[list[Header], list[str], bool]:
    """The headers with the values of their variables, the warnings, and whether one of them
    is a static authorization header."""
    headers: list[Header] = []
    warnings: list[str] = []
    static_authorization = False
    for h in args:
        if h.option == "--header-secret":
            headers.append(Header(h.name, "", None, h.source))
        elif h.option == "--header-env":
            value = variable(env, h.source)
            if value is None:
                raise ArgError(
                    "missing_variable",
                    f"the environment variable {h.source} of {h.option} is not set, or it is empty",
                    h.option,
                )
            if field_value_problem(value) is not None:
                raise ArgError(
                    "invalid_variable",
                    f"the environment variable {h.source} is not valid: "
                    "the value is not a valid HTTP header value",
                    h.option,
                )
            headers.append(Header(h.name, value, h.source))
        else:
            headers.append(Header(h.name, h.source, None))
            if h.name.lower() in SECRET_HEADER_NAMES and not warnings:
                # One warning is enough: the first secret header on the command line.
                warnings.append(
                    f"the value of the header {h.name} is on the command line. VS Code writes the command "
                    "line to its log, and the process list shows it. Use --header-env."
                )
        if h.name.lower() == "authorization":
            static_authorization = True
    return headers, warnings, static_authorization
