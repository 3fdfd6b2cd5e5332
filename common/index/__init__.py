"""The Redis index: the key layout, the row member format, the writers that apply row changes
with everything derived from them (status indexes, counts, name index, sync status), the
cluster registry's records, and the page and facet readers."""
