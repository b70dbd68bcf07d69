"""How a run executes: what its jobs share, worker processes, memory, the console and progress."""
