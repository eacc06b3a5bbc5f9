-- hiernet.where: errors about the user's values point at the user's line.
--
-- A library function (topo builders, the algorithms' train) that refuses a
-- value the scenario gave must name the scenario's file:line, not its own:
-- the user cannot act on "lua/hiernet/topo.lua:93". where.fail raises at
-- the user's line; where.call runs a library body and moves the location
-- of any error raised inside the library (by error(), assert() or a C
-- binding such as net:link) to the user's line.
local where = {}

-- The library's chunks: the embedded ones are named "lua/hiernet/...";
-- with HIERNET_LUA_PATH=DIR they are read from DIR/hiernet/.
local override = os.getenv("HIERNET_LUA_PATH")
local override_prefix = (override and override ~= "") and (override .. "/hiernet/") or nil

-- True when a chunk's short source (as in error locations) is the library's.
local function in_library(src)
  if src:sub(1, 12) == "lua/hiernet/" then return true end
  return override_prefix ~= nil and src:sub(1, #override_prefix) == override_prefix
end

-- "file:line: " of the innermost caller outside the library on the
-- current task's stack (the user's call that led here), or "" when there
-- is none (a task the library spawned).
function where.user()
  for level = 2, 60 do -- 1 is this function
    local info = debug.getinfo(level, "Sl")
    if not info then return "" end
    if info.what ~= "C" and not in_library(info.short_src) then
      return info.currentline > 0 and (info.short_src .. ":" .. info.currentline .. ": ") or ""
    end
  end
  return ""
end

-- error() with the user's location in front of the formatted message.
function where.fail(fmt, ...)
  error(where.user() .. string.format(fmt, ...), 0)
end

-- The error err with the location `at` ("file:line: ", default the user's
-- line now) in place of a library location, or in front of a message that
-- has none. A location outside the library (the user's own code, a user
-- function the library called) stays. Non-string errors pass unchanged.
function where.relocate(err, at)
  if type(err) ~= "string" then return err end
  at = at or where.user()
  if at == "" then return err end
  local src, rest = err:match("^([^%s:][^\n:]*):%d+: (.*)$")
  if src and in_library(src) then return at .. rest end
  if src then return err end
  return at .. err
end

-- fn(...), with any error it raises relocated to `at` (default: the
-- user's line as seen from the caller of where.call).
function where.call_at(at, fn, ...)
  local r = table.pack(pcall(fn, ...))
  if not r[1] then error(where.relocate(r[2], at or where.user()), 0) end
  return table.unpack(r, 2, r.n)
end

function where.call(fn, ...)
  return where.call_at(nil, fn, ...)
end

return where
