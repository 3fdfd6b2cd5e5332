"""The Redis index, in three layers (docs/architecture.md#layers-and-import-contracts):

- the stored formats, in this package: the key layout (`keys`), the row member (`rows`), the
  edge and kind codes, the dependents graph, the per-namespace counts, the time index
  (`timeline`), history, the change feed, sync status, the registry's records, and the lease
  that fences every writer;
- `write/`: the writers that apply row changes with everything derived from them, in one
  transaction (the full sync's `store`, the watcher's `store_events`, both through `writer`);
- `read/`: the page, group, facet, time-sorted and relation readers the query service uses.

Readers and writers never import each other; both import the formats (import-linter pins it).
"""
