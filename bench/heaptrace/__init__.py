"""The soak's heap diagnosis: `sitecustomize` (started in the traced processes) and `diff`."""
