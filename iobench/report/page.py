"""The report's pages from templates: one Jinja2 template a page (``templates/``), each section
rendering its own fragment (``iobench.report.sections``), every value escaped by default.

Code builds data, the template builds markup (asv's and pytest-html's habit): a section hands
its fragment's template the figures it computed, and the page template places the fragments.
A value that is markup already (a fragment, an image) is a ``Markup``; everything else a
template prints is escaped, so a config name, a run label or a path read from a received run
folder can never become markup.
"""

from __future__ import annotations

import base64
import functools
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, Template, select_autoescape
from markupsafe import Markup

from iobench import __version__
from iobench.units import fmt_bytes, fmt_s, fmt_share, fmt_times, noise_word


def data_uri(path: Path | str | None) -> str:
    """A PNG as a data URI, so the page needs no other file ('' when it was not made)."""
    if path is None or not Path(path).is_file():
        return ""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def dash(value: object) -> object:
    """None and NaN as an em dash (what every table cell shows for "unknown")."""
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    return value


@functools.cache
def environment() -> Environment:
    """The one Jinja2 environment: autoescaped, strict about names, the formatters as filters."""
    env = Environment(
        loader=PackageLoader("iobench.report", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        data_uri=data_uri, dash=dash, fmt_s=fmt_s, fmt_bytes=fmt_bytes, fmt_share=fmt_share,
        fmt_times=fmt_times, noise_word=noise_word,
    )  # fmt: skip
    env.globals["version"] = __version__
    return env


@functools.cache
def _compiled(source: str) -> Template:
    return environment().from_string(source)


def fragment(source: str, **values: Any) -> Markup:
    """A section's fragment: its template (a string in its own module) with its values."""
    return Markup(_compiled(source).render(**values))


def render(name: str, **values: Any) -> str:
    """A whole page from ``templates/NAME``."""
    return environment().get_template(name).render(**values)


__all__ = ["Markup", "data_uri", "dash", "environment", "fragment", "render"]
