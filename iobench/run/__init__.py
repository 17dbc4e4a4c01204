"""One `iobench run`: the checked plan, the runner, its policy (probe, predictions, give-up bounds, early stop), the trial order, its own overhead, the facts of the machine it records, and resume."""
