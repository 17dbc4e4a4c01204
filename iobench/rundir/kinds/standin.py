"""The ``standin`` kind at the bottom: iobench's own tests' stand-in for an install (hyperfine's
mock executor): the same phases, written by a small writer instead of an installer, so that the
runner's plumbing and every start-up strategy's restart run in a second. Being the install
kind's fake, it is the one kind that takes another's declarations: install's row and places."""

from __future__ import annotations

from dataclasses import replace

from iobench.rundir.kinds import install

NAME = "standin"
KIND = replace(
    install.KIND,
    name=NAME,
    doc="the stand-in of iobench's own tests: an install's phases without an installer",
    installs=False,
)
