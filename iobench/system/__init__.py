"""The Linux machine and what iobench may touch on it: /proc, scratch folders and removal, the target's lock, signals, GPU detection, rate shaping."""
