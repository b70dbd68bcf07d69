"""What values-seg writes: the run directory and its ownership, the lock, atomic files, the cache store, keys and provenance."""
