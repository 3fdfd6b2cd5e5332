"""Server-side scans of a row zset (Lua), so rows that filters reject never leave Redis.

Both scripts take one key (a cluster's `rows` or `st:<status>` zset) and ARGV:
`limit budget codes name_substring (lo hi kinds)*`; `lo`/`hi` are ZRANGEBYLEX bounds, `kinds`
is "" (any) or NUL-delimited kind keys (`\0A\0B\0`), `codes` "" or the status codes to keep.
They stop after `budget` members (so one call never blocks Redis long) and return
`{state, scanned, last_member, ...}` with state `done` | `full` | `budget`.
"""

from __future__ import annotations

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
    local batch = redis.call("ZRANGEBYLEX", KEYS[1], lo, hi, "LIMIT", 0, n)
    for j = 1, #batch do
      local m = batch[j]
      scanned = scanned + 1
      last = m
"""
    + _MATCH
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

# Returns `kind NUL code`, count pairs after the 3 header slots (ARGV[1] `limit` is ignored).
COUNT = (
    r"""
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
    local batch = redis.call("ZRANGEBYLEX", KEYS[1], lo, hi, "LIMIT", 0, n)
    for j = 1, #batch do
      local m = batch[j]
      scanned = scanned + 1
      last = m
"""
    + _MATCH
    + r"""
      if ok then
        local p1 = string.find(m, "\0", 1, true)
        local p2 = string.find(m, "\0", p1 + 1, true)
        local p3 = string.find(m, "\0", p2 + 1, true)
        local f = string.sub(m, p1 + 1, p2 - 1) .. "\0" .. string.sub(m, p3 + 1, p3 + 1)
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
