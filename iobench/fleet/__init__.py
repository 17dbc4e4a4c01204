"""Many workers, one volume: the workers of a fleet run and how they agree (docs/fleet.md).

Under a launcher (``mpirun -n N iobench run --fleet``) the workers are MPI ranks and mpi4py
carries every message (``comm``): the run id and trial order rank 0 chose, the clock offsets,
the start of each trial, and each worker's row and samples back to rank 0. Every wait has a
deadline, so a rank that died or stopped answering is recorded as lost and never hangs the
others. Where no launcher can reach the workers (serverless endpoints, pods a scheduler
starts), each one writes its own run folder under a shared ``--fleet-dir`` and measures its
clock against the volume's file times (``volume``); the report merges them. ``hosts``
makes hosts of their own on one machine (namespaces: ``netns``; the volume over their
network and the launcher's way in: ``serve``), so a fleet launched by ``mpirun`` meets what
it meets on real hosts: a client cache, a /tmp, a network path and a clock of its own.
"""
