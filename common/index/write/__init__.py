"""The index's write side: `writer` applies a cluster's row changes with the status indexes,
counts, name index, time index, history and change feed in one fenced MULTI/EXEC; `store` is the
collector's full sync into it, `store_events` the watcher's events, `name_index` the name
index's format. Nothing here is imported by the read side (common.index.read)."""
