"""The answer in a minute, before or beside measuring: storage probes, an install's operation mix, the time-to-ready model, and `iobench doctor`."""
