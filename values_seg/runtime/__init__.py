"""How a process runs: worker processes, memory, the console and the one progress mechanism."""
