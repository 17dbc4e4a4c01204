"""What a run writes into and what it runs, judged before anything is made. The role
folders' rule (``iobench.system.trust``, OpenSSH's StrictModes) holds for the results
folder, a ``--fleet-dir`` and a resumed run folder.

Why: iobench runs as root. A results folder another user owns (or one below a folder they
can write, not sticky) lets them swap the run's folder, as soon as it appears, for a tree of
their own in which each log iobench makes is a link to a file of root's; pip, which opens
its ``--log`` by name and appends, then writes into that file. Each is refused in one line naming the folder, its owner and the fix (``chown``, run as that user, or
``--trust-owner``); the writes themselves go through ``iobench.files``, which judges every
folder again on its own descriptor and holds the run folder open.
"""

from __future__ import annotations

import pwd
from pathlib import Path

from iobench.errors import SafetyError, UsageError
from iobench.rundir.fleet import WORKERS
from iobench.rundir.meta import RunMeta
from iobench.system.trust import strict_modes_problem, trust_owners

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


def check_places(results: Path, fleet_dir: Path | None, resume: Path | None) -> None:
    """The folders the run writes into: the results folder (or the default ``./results``
    below the current folder), a ``--fleet-dir``, a resumed run's folder."""
    places: list[tuple[str, Path, Path]] = []  # (option, as given, what is judged)
    if fleet_dir is not None:  # its workers/ may be there already (another worker's, or planted)
        places.append(("--fleet-dir", fleet_dir, fleet_dir / WORKERS))
    if resume is not None:
        places.append(("--resume", resume, resume))
    elif fleet_dir is None:
        places.append(("--results", results, results))
    for flag, given, path in places:
        if problem := strict_modes_problem(path, RUN_FILES, harm=WRITES):
            raise SafetyError(f"{flag} {given}: {problem}")


__all__ = ["RUN_FILES", "check_places", "trust"]
