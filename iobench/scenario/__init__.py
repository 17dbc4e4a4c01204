"""What is compared: scenario files validated into typed configs, and the axes the command line adds."""
