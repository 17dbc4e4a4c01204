"""What counts as one requirement: a PEP 508 string, a path or a URL pip takes, never a pip
option; and the distribution it installs, where its text names one."""

from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement


def dist_name(req: str) -> str | None:
    """The distribution a requirement installs, when its text names it (a path or a URL
    without ``name @`` may not)."""
    try:
        return Requirement(req).name
    except InvalidRequirement:
        base = req.rstrip("/").rsplit("/", 1)[-1]
        return base.split("-", 1)[0] if base.endswith((".whl", ".tar.gz", ".zip")) else None


def requirement_problem(req: object) -> str | None:
    """Why ``req`` is not one requirement pip can take (a PEP 508 string, a path or a URL), or None.

    Anything that starts with '-' is a pip option, never a requirement; a string with
    spaces that is not PEP 508 would carry options too.
    """
    if not isinstance(req, str) or not req.strip():
        return "expected a requirement such as torch==2.13.0"
    text = req.strip()
    if text.startswith("-"):
        return "a pip option, not a requirement (expected e.g. torch==2.13.0)"
    try:
        Requirement(text)
        return None
    except InvalidRequirement:
        pass
    if not any(c.isspace() for c in text) and (
        "/" in text or text.endswith((".whl", ".zip", ".tar.gz"))
    ):
        return None  # a path or URL (file, https, git+https) that pip accepts
    return "not a requirement (PEP 508, a path or a URL), e.g. torch==2.13.0"


__all__ = ["dist_name", "requirement_problem"]
