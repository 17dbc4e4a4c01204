"""What a run writes into and what it runs, judged before anything is made. The role
folders' rule (``iobench.system.trust``, OpenSSH's StrictModes) holds for the results
folder, a ``--fleet-dir``, a resumed run folder, and every interpreter the run starts.

Why: iobench runs as root. A results folder another user owns (or one below a folder they
can write, not sticky) lets them swap the run's folder, as soon as it appears, for a tree of
their own in which each log iobench makes is a link to a file of root's; pip, which opens
its ``--log`` by name and appends, then writes into that file. An interpreter another user
owns, or one in a folder they can change, is their code run as root. Each is refused in one
line naming the folder, its owner and the fix (``chown``, run as that user, or
``--trust-owner``); the writes themselves go through ``iobench.files``, which judges every
folder again on its own descriptor and holds the run folder open.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from iobench.errors import SafetyError, UsageError
from iobench.rundir.fleet import WORKERS
from iobench.rundir.meta import RunMeta
from iobench.system.trust import strict_modes_problem, trust_owners, user_login

#: what they could then do
WRITES = "have iobench write into a file of their choosing"
#: what another user could swap in a folder iobench writes a run into
RUN_FILES = "the run's logs (pip appends to them by name)"


def trust(names: list[str], meta: RunMeta | None) -> list[str]:
    """``--trust-owner USER``: each a user of this machine, trusted from now on (the role
    checks, the scratch folders, the folders written into, the interpreters); the names, for
    meta.json. The command line's alone: a run folder (received, or edited) cannot grant
    it, so a resume of a run that trusted someone says it again."""
    if meta is not None and meta.trusted_owners and not names:
        who = " ".join(f"--trust-owner {o}" for o in meta.trusted_owners)
        raise UsageError(
            f"cannot resume {meta.run_id}: it trusted folders owned by "
            f"{', '.join(meta.trusted_owners)}; a run folder does not grant that trust, say it "
            f"again: {who}"
        )
    uids = set()
    for name in names:
        try:
            uids.add(
                pwd.getpwnam(name).pw_uid if not name.isdigit() else pwd.getpwuid(int(name)).pw_uid
            )
        except KeyError:
            raise UsageError(f"--trust-owner {name}: no such user on this machine") from None
    trust_owners(uids)
    return sorted(names)


def preflight(
    req: Any, workload: Mapping[str, Any], meta: RunMeta | None
) -> tuple[list[str], list[str]]:
    """Every check of whom the run would let change what it writes, runs or installs, in
    order, before anything is made: ``--trust-owner`` first, then the folders written into
    (as given: a link on the way judged, not resolved away), the interpreters, and what
    they run or install. ``req``: the run's request (``iobench.run.plan.RunRequest``).
    Returns the trusted owners' names and the plan's notes on interpreters."""
    owners = trust(req.trust_owner, meta)
    check_places(req.results or Path("results"), req.fleet_dir, req.resume)
    named = check_interpreters(req.python, workload)
    check_inputs(req.scenario, req.wheelhouse, req.requirements)
    return owners, named


def check_places(results: Path, fleet_dir: Path | None, resume: Path | None) -> None:
    """The folders the run writes into: the results folder (or the default ``./results``
    below the current folder), a ``--fleet-dir``, a resumed run's folder."""
    places: list[tuple[str, Path, Path]] = []  # (option, as given, what is judged)
    if fleet_dir is not None:  # its workers/ may be there already (another worker's, or planted)
        places.append(("--fleet-dir", fleet_dir, fleet_dir / WORKERS))
    if resume is not None:  # its own folders too: the trials write there
        places += [("--resume", resume, resume / name) for name in ("logs", "samples")]
    elif fleet_dir is None:
        places.append(("--results", results, results))
    for flag, given, path in places:
        if problem := strict_modes_problem(path, RUN_FILES, harm=WRITES):
            raise SafetyError(f"{flag} {given}: {problem}")


def interpreters(python: str | None, workload: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(where it is named, the interpreter) for each interpreter the run starts besides the
    one running iobench: ``--python``, a scenario's ``[workload] python`` and its
    ``by_config`` ones (a resumed run's come from its meta.json)."""
    found: list[tuple[str, object]] = [("--python", python)]
    found.append(("workload.python", workload.get("python")))
    by_config = workload.get("by_config")
    for name, table in by_config.items() if isinstance(by_config, Mapping) else ():
        if isinstance(table, Mapping):
            found.append((f"workload.by_config.{name}.python", table.get("python")))
    return [(where, str(path)) for where, path in found if isinstance(path, str) and path]


def check_interpreters(python: str | None, workload: Mapping[str, Any]) -> list[str]:
    """Refuse an interpreter another user could change (the file, a link on the way, or a
    folder above it); the plan's notes naming each one a scenario chose."""
    notes = []
    for where, path in interpreters(python, workload):
        for place, what in loaded_from(Path(path)):
            if problem := strict_modes_problem(place, what):
                raise SafetyError(f"{where} {path}: {problem}")
        if where != "--python":
            notes.append(
                f"note: the scenario names the interpreter its workload runs: {path} "
                f"({where}), run as {user_login(os.geteuid())}"
            )
    return notes


def check_inputs(scenario: str | None, wheelhouse: Path | None, requirements: Path | None) -> None:
    """Refuse an input another user could change whose content the run executes or installs:
    a scenario file given by path (its ready check and workload run as you), a
    ``--wheelhouse`` (its wheels are installed and imported) and a ``--requirements`` file
    (its lines may name an index). A shipped scenario's name is iobench's own."""
    given: list[tuple[str, Path, str]] = []
    if scenario and (path := Path(scenario)).is_file():
        given.append(("--scenario", path, "the scenario, whose ready check and workload run"))
    if wheelhouse is not None:
        given.append(("--wheelhouse", wheelhouse, "the wheels installed and imported"))
    if requirements is not None:
        given.append(("--requirements", requirements, "the requirements installed"))
    for flag, path, what in given:
        if problem := strict_modes_problem(Path(os.path.abspath(path)), what):
            raise SafetyError(f"{flag} {path}: {problem}")


def loaded_from(exe: Path) -> list[tuple[Path, str]]:
    """What an interpreter runs code from as it starts, with what each is: the program, its
    prefix's ``lib`` (the standard library, site-packages and their ``.pth`` files), and
    for a venv its ``pyvenv.cfg`` and the base interpreter's ``home`` and ``lib`` (a venv of
    root's whose ``home`` names another user's folder ran their ``sitecustomize`` as root)."""
    found = [(exe, "the interpreter"), (exe.parent.parent / "lib", "the interpreter's modules")]
    real = Path(os.path.realpath(exe))
    found.append((real.parent.parent / "lib", "the interpreter's standard library"))
    for cfg in (exe.parent / "pyvenv.cfg", exe.parent.parent / "pyvenv.cfg"):
        try:
            lines = cfg.read_text(errors="replace").splitlines()
        except OSError:
            continue
        found.append((cfg, "the venv's configuration"))
        for line in lines:
            key, _, value = line.partition("=")
            if key.strip() == "home" and os.path.isabs(home := value.strip()):
                found += [(Path(home), "the venv's base interpreter"),
                          (Path(home).parent / "lib", "the base interpreter's standard library")]  # fmt: skip
    return found


__all__ = [
    "RUN_FILES",
    "check_inputs",
    "check_interpreters",
    "check_places",
    "interpreters",
    "loaded_from",
    "preflight",
    "trust",
]
