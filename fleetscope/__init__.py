"""The `fleetscope` command line: a thin dispatcher onto the other packages (imported lazily)."""
