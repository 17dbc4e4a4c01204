"""An emulated slow network volume (``iobench lab``), for demos and for iobench's own tests.

Modules: :mod:`~iobench.lab.manage` (up/down/status), :mod:`~iobench.lab.fs` (the FUSE
filesystem), :mod:`~iobench.lab.libfuse` (what it asks of libfuse beyond mfusepy), :mod:`~iobench.system.shaping` (token bucket, burst credits),
:mod:`~iobench.lab.sshfs` (the real-network kind), :mod:`~iobench.predict.probe` (storage
probes), :mod:`~iobench.lab.testing` (a context manager for tests), :mod:`~iobench.cli.lab`.
Importing this package loads no FUSE library; only the daemon does.
"""
