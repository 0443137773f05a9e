"""The URI templates of resource templates: RFC 6570 level 1 (``{var}``) and reserved expansion (``{+var}``).

Pure: no I/O, no threads, no clock.
"""

from __future__ import annotations

import re

__all__ = ["template_pattern"]


TEMPLATE_EXPRESSION = re.compile(r"\{([+]?)([A-Za-z0-9_]+)\}")


def template_pattern(template: str) -> re.Pattern[str]:
    """A regex for a URI template of RFC 6570 level 1 (``{var}``) and reserved expansion (``{+var}``)."""
    out: list[str] = []
    literals: list[str] = []
    position = 0
    for match in TEMPLATE_EXPRESSION.finditer(template):
        literals.append(template[position : match.start()])
        out.append(re.escape(literals[-1]))
        value = ".+" if match.group(1) == "+" else "[^/?#]+"
        out.append(f"(?P<{match.group(2)}>{value})")
        position = match.end()
    literals.append(template[position:])
    out.append(re.escape(literals[-1]))
    if any("{" in text or "}" in text for text in literals):
        raise ValueError(f"unsupported URI template {template!r}: only {{var}} and {{+var}} are known")
    return re.compile("".join(out))
