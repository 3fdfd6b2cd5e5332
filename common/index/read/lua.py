"""Server-side scans of a row zset (Lua), so rows that filters reject never leave Redis.

Both scripts take one key (a cluster's `rows` or `st:<status>` zset) and ARGV:
`limit budget codes name_substring (lo hi kinds)*`; `lo`/`hi` are ZRANGEBYLEX bounds, `kinds`
is "" (any) or NUL-delimited kind keys (`\0A\0B\0`), `codes` "" or the status codes to keep.
They stop after `budget` members (so one call never blocks Redis long) and return
`{state, scanned, last_member, ...}` with state `done` | `full` | `budget`.
"""

from __future__ import annotations

from collections.abc import Iterable

from common.index import keys, rows

# The scripts find a member's fields by its first three NULs: the identity (namespace, kind,
# name) is fields 0-2 and the one-byte status code follows it; STATUS_REVISIONS also reads the revision,
# four fields after the status. rows.FIELDS owns the layout.
if rows.FIELDS[:8] != (
    "namespace",
    "kind",
    "name",
    "status",
    "reason",
    "message",
    "lastTransitionTime",
    "revision",
) or any(len(code) != 1 for code in rows.CODE_STATUS):
    raise ImportError("common.index.read.lua: the scripts' member layout differs from rows.FIELDS")

# Count fields as the `counts` hash stores them (`kind NUL status [NUL suspended]`), from the
# status codes: the part after `kind NUL` of each code's field.
_PAIRS = ", ".join(
    f'["{code}"] = "{keys.counts_field("", status, code in rows.SUSPENDED_CODES)[1:]}"'.replace(
        "\x00", "\\0"
    )
    for code, status in sorted(rows.CODE_STATUS.items())
)
_STATUS = (
    "local STATUS = {"
    + _PAIRS
    + "}\n"
    + r"""
local function count_field(m)
  local p1 = string.find(m, "\0", 1, true)
  local p2 = string.find(m, "\0", p1 + 1, true)
  local p3 = string.find(m, "\0", p2 + 1, true)
  return string.sub(m, p1 + 1, p2 - 1) .. "\0" .. STATUS[string.sub(m, p3 + 1, p3 + 1)]
end
"""
)


def kinds_arg(kinds: Iterable[str]) -> bytes:
    """A script's `kinds` argument: NUL-delimited kind keys (`\\0A\\0B\\0`)."""
    return b"\x00" + b"\x00".join(k.encode() for k in sorted(kinds)) + b"\x00"


# The row-matching part shared by both scripts: sets `ok` for member `m`.
_MATCH = r"""
      local ok = true
      if sub ~= "" and string.find(m, sub, 1, true) == nil then
        ok = false  -- most members lack the substring anywhere: one plain search rejects them
      elseif codes ~= "" or kinds ~= "" or sub ~= "" then
        local p1 = string.find(m, "\0", 1, true)
        local p2 = string.find(m, "\0", p1 + 1, true)
        local p3 = string.find(m, "\0", p2 + 1, true)
        if codes ~= "" then
          ok = string.find(codes, string.sub(m, p3 + 1, p3 + 1), 1, true) ~= nil
        end
        if ok and kinds ~= "" then
          ok = string.find(kinds, "\0" .. string.sub(m, p1 + 1, p2 - 1) .. "\0", 1, true) ~= nil
        end
        if ok and sub ~= "" then
          ok = string.find(string.sub(m, p2 + 1, p3 - 1), sub, 1, true) ~= nil
        end
      end
"""

# One batch of a range, each member matched (`ok`): the loop both scans share.
_BATCH = (
    r"""
    local batch = redis.call("ZRANGEBYLEX", KEYS[1], lo, hi, "LIMIT", 0, n)
    for j = 1, #batch do
      local m = batch[j]
      scanned = scanned + 1
      last = m
"""
    + _MATCH
)

# Returns matching members (up to `limit`) in order after the 3 header slots.
SCAN = (
    r"""
local limit, budget = tonumber(ARGV[1]), tonumber(ARGV[2])
local codes, sub = ARGV[3], ARGV[4]
local out = {"done", 0, ""}
local found, scanned, last = 0, 0, ""
for i = 5, #ARGV, 3 do
  local lo, hi, kinds = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local chunk = limit - found
  if chunk < 32 then chunk = 32 end
  while true do
    local n = budget - scanned
    if n <= 0 then out[1] = "budget"; out[2] = scanned; out[3] = last; return out end
    if chunk < n then n = chunk end
"""
    + _BATCH
    + r"""
      if ok then
        found = found + 1
        out[found + 3] = m
        if found >= limit then out[1] = "full"; out[2] = scanned; out[3] = last; return out end
      end
    end
    if #batch < n then break end
    lo = "(" .. last
    if chunk < 1024 then chunk = chunk * 2 end
  end
end
out[2] = scanned; out[3] = last
return out
"""
)

# Returns `kind NUL status`, count pairs after the 3 header slots (ARGV[1] `limit` is ignored).
COUNT = (
    _STATUS
    + r"""
local budget = tonumber(ARGV[2])
local codes, sub = ARGV[3], ARGV[4]
local counts = {}
local scanned, last = 0, ""
local state = "done"
for i = 5, #ARGV, 3 do
  local lo, hi, kinds = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  while state == "done" do
    local n = budget - scanned
    if n <= 0 then state = "budget"; break end
    if n > 1024 then n = 1024 end
"""
    + _BATCH
    + r"""
      if ok then
        local f = count_field(m)
        counts[f] = (counts[f] or 0) + 1
      end
    end
    if #batch < n then break end
    lo = "(" .. last
  end
  if state ~= "done" then break end
end
local out = {state, scanned, last}
for f, c in pairs(counts) do out[#out + 1] = f; out[#out + 1] = c end
return out
"""
)

# The name-index path of SCAN: KEYS[2] is the cluster's `names` hash and ARGV[1] `dense`
# (ARGV[2..] as SCAN's). Plain searches of the lower-cased name dictionary (its field "",
# common.index.write.name_index) find the matching names (case-insensitive), their values the identities of the matching rows; those
# inside the ranges are sorted (bytewise: Lua's `<` follows the server's locale) and read one by
# one. More than `dense` candidates, or no index, and it scans like SCAN (a dense match fills a
# page quickly anyway). `scanned` counts the rows read.
_NAMED_INDEX = r"""
local dense = tonumber(table.remove(ARGV, 1))
local function lt(a, b)
  local n = #a
  if #b < n then n = #b end
  local i = 1
  while i <= n and string.byte(a, i) == string.byte(b, i) do i = i + 1 end
  if i > n then return #a < #b end
  return string.byte(a, i) < string.byte(b, i)
end
local function candidates(sub)
  local dict = redis.call("HGET", KEYS[2], "")
  if not dict then return nil end
  local names, pos = {}, 1
  sub = string.lower(sub)
  while true do
    local s = string.find(dict, sub, pos, true)
    if s == nil then break end
    local b, e = s, string.find(dict, "\0", s, true)
    while string.byte(dict, b - 1) ~= 0 do b = b - 1 end
    local word = string.sub(dict, b, e - 1)
    local k = string.find(word, "\1", 1, true)  -- `lower \1 name`: the name has capitals
    names[#names + 1] = k and string.sub(word, k + 1) or word
    if #names > dense then return nil end
    pos = e + 1
  end
  local out = {}
  if #names == 0 then return out end
  local values = redis.call("HMGET", KEYS[2], unpack(names))
  for j = 1, #names do
    local name, v, p = names[j], values[j] or "", 1
    while p <= #v do
      local a = string.find(v, "\0", p, true)
      local b = string.find(v, "\0", a + 1, true)
      out[#out + 1] = string.sub(v, p, b) .. name .. "\0"
      if #out > dense then return nil end
      p = b + 1
    end
  end
  -- One name's entries are stored sorted, and so are its identities (an entry has exactly two
  -- NULs, so none is a prefix of another): only several names need a sort.
  if #names > 1 then table.sort(out, lt) end
  return out
end
-- The members of `cands` inside the ranges, of their kinds and codes: up to `limit` (0 = all).
local function matching(cands, limit)
  local codes, out, read, ri, c = ARGV[3], {}, 0, 5, 1
  while c <= #cands and ri <= #ARGV do
    local id, lo, hi, kinds = cands[c], ARGV[ri], ARGV[ri + 1], ARGV[ri + 2]
    if hi ~= "+" and not lt(id, string.sub(hi, 2)) then
      ri = ri + 3  -- past this range: try the next one
    else
      local ok = lo == "-" or not lt(id, string.sub(lo, 2))
      if ok and kinds ~= "" then
        local p1 = string.find(id, "\0", 1, true)
        local p2 = string.find(id, "\0", p1 + 1, true)
        ok = string.find(kinds, string.sub(id, p1, p2), 1, true) ~= nil
      end
      if ok then
        local got = redis.call("ZRANGEBYLEX", KEYS[1], "[" .. id, "[" .. id .. "\255", "LIMIT", 0, 1)
        read = read + 1
        local m = got[1]
        if m ~= nil and codes ~= "" then
          ok = string.find(codes, string.sub(m, #id + 1, #id + 1), 1, true) ~= nil
        end
        if m ~= nil and ok then
          out[#out + 1] = m
          if #out == limit then return out, read, true end
        end
      end
      c = c + 1
    end
  end
  return out, read, false
end
local cands = nil
if ARGV[4] ~= "" then cands = candidates(ARGV[4]) end
"""

# NAMED: SCAN's reply from the name index when it applies (else SCAN itself).
NAMED = (
    _NAMED_INDEX
    + r"""
if cands ~= nil then
  local ms, read, full = matching(cands, tonumber(ARGV[1]))
  local out = {"done", read, ms[#ms] or ""}
  if full then out[1] = "full" end
  for j = 1, #ms do out[j + 3] = ms[j] end
  return out
end
"""
    + SCAN
)

# NAMED_COUNT: COUNT's reply from the name index when it applies (else COUNT itself).
NAMED_COUNT = (
    _STATUS
    + _NAMED_INDEX
    + r"""
if cands ~= nil then
  local ms, read = matching(cands, 0)
  local counts, out = {}, {"done", read, ""}
  for j = 1, #ms do
    local m = ms[j]
    local f = count_field(m)
    counts[f] = (counts[f] or 0) + 1
  end
  for f, n in pairs(counts) do out[#out + 1] = f; out[#out + 1] = n end
  return out
end
"""
    + COUNT
)

_STATUS_REVISION = r"""
-- The status code of the row of `rows` (a cluster's rows) with identity `id` (namespace NUL
-- kind NUL name NUL) followed by its revision (the member's field after lastTransitionTime;
-- "" for none), or "" when the cluster has no such row.
local function status_revision(rows, id)
  local m = redis.call('ZRANGEBYLEX', rows, '[' .. id, '(' .. id .. '\255', 'LIMIT', 0, 1)
  if not m[1] then
    return ""
  end
  local s = m[1]
  local p = #id + 2  -- the NUL after the status code
  for _ = 1, 3 do  -- past reason, message, lastTransitionTime
    p = string.find(s, "\0", p + 1, true)
    if p == nil then break end
  end
  local rev = ""
  if p ~= nil then
    local e = string.find(s, "\0", p + 1, true)
    rev = string.sub(s, p + 1, (e or (#s + 1)) - 1)
  end
  return string.sub(s, #id + 1, #id + 1) .. rev
end
"""

STATUS_REVISIONS = (
    _STATUS_REVISION
    + r"""
-- KEYS[1]: a cluster's rows; ARGV: identities. For each, `status_revision`
-- (common.index.read.groups: which clusters hold a group's object, its status and revision
-- there: one lookup serves both).
local out = {}
for i, id in ipairs(ARGV) do
  out[i] = status_revision(KEYS[1], id)
end
return out
"""
)

IDENTS = r"""
-- KEYS[1]: a cluster's rows; ARGV[1]: where to start (a ZRANGEBYLEX bound); ARGV[2]: how many.
-- The identity (namespace NUL kind NUL name NUL) and status code of each member from there,
-- one line each in one string, and the bound to go on from ("" at the end)
-- (common.index.read.group_facets: which groups a cluster holds, without the rows' other fields).
local limit = tonumber(ARGV[2])
local ms = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', 'LIMIT', 0, limit)
local out = {}
for i, m in ipairs(ms) do
  local p1 = string.find(m, "\0", 1, true)
  local p2 = string.find(m, "\0", p1 + 1, true)
  local p3 = string.find(m, "\0", p2 + 1, true)
  out[i] = string.sub(m, 1, p3 + 1)
end
local after = ""
if #ms == limit then
  after = "(" .. ms[#ms]
end
return {after, table.concat(out, "\n")}
"""

_SINCE = (
    f"local SEPARATORS = {len(rows.FIELDS) - 1}\n"
    + r"""
-- What a cluster's change feed (common.index.feed) says moved after generation `held` (every
-- feed entry up to it is in what the caller holds): the generation now; `whole` 1 when the feed
-- cannot say (entries after `held` may have been trimmed, or the generation moved past the
-- last entry), else 0; and one line per entry after `held` whose identity or status code
-- changed (every entry when `every`: a revision or a message moved), in feed order: the
-- identity (namespace NUL kind NUL name NUL), the old status code ("+" for a row new) and the
-- new one ("." for a row gone). With `labelled`, one line per entry whose identity, status code
-- or labels changed, each followed by the old labels field NUL the new one ("" for a row new or
-- gone, and for a member older than the labels field).
local function head(m)
  local p1 = string.find(m, "\0", 1, true)
  local p2 = string.find(m, "\0", p1 + 1, true)
  local p3 = string.find(m, "\0", p2 + 1, true)
  return string.sub(m, 1, p3 + 1)
end

local function labels_field(m)
  local _, n = string.gsub(m, "%z", "")
  if n < SEPARATORS then
    return ""
  end
  return string.match(m, "[^%z]*$")
end

local function since(feed, genkey, held, every, labelled)
  local gen = tonumber(redis.call('GET', genkey) or '0')
  if gen == held then
    return gen, 0, {}
  end
  local oldest = redis.call('XRANGE', feed, '-', '+', 'COUNT', 1)[1]
  if oldest == nil or gen < held then
    return gen, 1, {}
  end
  local dash = string.find(oldest[1], "-", 1, true)
  local og = tonumber(string.sub(oldest[1], 1, dash - 1))
  local os = tonumber(string.sub(oldest[1], dash + 1))
  if og > held + 1 or (og == held + 1 and os > 0) then
    return gen, 1, {}
  end
  local es = redis.call('XRANGE', feed, (held + 1) .. '-0', '+')
  local last = 0
  local out = {}
  for _, e in ipairs(es) do
    local id, f = e[1], e[2]
    last = tonumber(string.sub(id, 1, string.find(id, "-", 1, true) - 1))
    local n, o = nil, nil
    for j = 1, #f, 2 do
      if f[j] == "n" then n = f[j + 1] elseif f[j] == "o" then o = f[j + 1] end
    end
    if n == nil then
      if o ~= nil and o ~= "" then
        out[#out + 1] = head(o) .. "." .. (labelled and (labels_field(o) .. "\0") or "")
      end
    else
      local h = head(n)
      if o == nil then
        out[#out + 1] = string.sub(h, 1, #h - 1) .. "+" .. string.sub(h, #h)
          .. (labelled and ("\0" .. labels_field(n)) or "")
      else
        local ho = head(o)
        if labelled then
          local lo, ln = labels_field(o), labels_field(n)
          if ho ~= h or lo ~= ln then
            out[#out + 1] = ho .. string.sub(h, #h) .. lo .. "\0" .. ln
          end
        elseif every or ho ~= h then
          out[#out + 1] = ho .. string.sub(h, #h)
        end
      end
    end
  end
  if last ~= gen then
    return gen, 1, {}
  end
  return gen, 0, out
end
"""
)

FOLLOW = (
    _SINCE
    + r"""
-- KEYS[1]: a cluster's change feed; KEYS[2]: its generation; ARGV[1]: a generation the caller
-- holds the cluster's rows at; ARGV[2]: "1" for a line for every entry, "2" for the lines
-- with their labels fields (`since`'s `labelled`), else "0".
-- Returns {generation, whole, the lines joined by "\n"} (`since`)
-- (common.index.read.group_facets: the written cluster's rows moved by the changes instead of
-- read again; common.index.read.facets and groups: its namespaces whose counts moved, whether
-- its namespaces did).
local gen, whole, out = since(KEYS[1], KEYS[2], tonumber(ARGV[1]), ARGV[2] == "1", ARGV[2] == "2")
return {gen, whole, table.concat(out, "\n")}
"""
)

CODES_SINCE = (
    _SINCE
    + _STATUS_REVISION
    + r"""
-- KEYS[1]: a cluster's change feed; KEYS[2]: its generation; KEYS[3]: its rows. ARGV[1]: the
-- generation the caller holds some rows' codes at; ARGV[2]: how many of the identities that
-- follow it holds (those first, then the ones it does not).
-- Returns {generation, whole, the feed's lines since (every entry; `since`) joined by "\n",
-- codes}: per identity its `status_revision`, or "=" for a held one that no entry since
-- touched (the caller's is still right). With `whole`, every identity is looked up
-- (common.index.read.groups: a page's codes on a written cluster in the round trip that
-- would have looked them all up, looking up only the ones that moved).
local gen, whole, out = since(KEYS[1], KEYS[2], tonumber(ARGV[1]), true)
local held = tonumber(ARGV[2])
local touched = {}
for _, line in ipairs(out) do
  touched[string.sub(line, 1, #line - 2)] = true
end
local codes = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  if whole == 0 and i - 2 <= held and not touched[id] then
    codes[i - 2] = "="
  else
    codes[i - 2] = status_revision(KEYS[3], id)
  end
end
return {gen, whole, table.concat(out, "\n"), codes}
"""
)
