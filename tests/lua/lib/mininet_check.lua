-- mininet_check.lua — what the Mininet scenario tests share (load with
--   local M = dofile(<tests/lua>/lib/mininet_check.lua)):
-- M.network(name) on backend none, M.skip_without_mininet() (one line, exit
-- 77), exact comparisons and one-line error checks, and M.load, which
-- returns the lines a load wrote to log.txt (HIERNET_TEST_OUT) so that a
-- test can check each is logged once.
local hn = require("hiernet")
local mininet = require("hiernet.mininet")
local M = {}

local out = assert(os.getenv("HIERNET_TEST_OUT"), "HIERNET_TEST_OUT is set by ctest")

function M.network(name)
  return hn.network{ name = name, backend = "none" }
end

function M.skip_without_mininet()
  local ok, err = pcall(mininet.load, M.network("probe"), nil, "MinimalTopo")
  if not ok and err:find("install Debian package mininet", 1, true) then
    print("SKIP: " .. err)
    os.exit(77)
  end
  assert(ok, err)
end

function M.expect_eq(got, want, what)
  assert(got == want, string.format("%s: got '%s', want '%s'", what, tostring(got), tostring(want)))
end

function M.expect_error(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "no error, want one matching '" .. pattern .. "'")
  assert(err:find(pattern, 1, true), string.format("error '%s' lacks '%s'", err, pattern))
  assert(not err:find("\n"), "error is not one line: " .. err)
  return err
end

function M.names(list)
  local o = {}
  for i, n in ipairs(list) do o[i] = n.name end
  return table.concat(o, " ")
end

function M.link_names(links)
  local o = {}
  for i, l in ipairs(links) do o[i] = l.name end
  return table.concat(o, " ")
end

function M.route(net, a, b)
  return table.concat(net:route(a, b), " ")
end

local function log_size()
  local f = assert(io.open(out .. "/log.txt"))
  local size = f:seek("end")
  f:close()
  return size
end

local function log_since(from)
  local f = assert(io.open(out .. "/log.txt"))
  f:seek("set", from)
  local text = f:read("a")
  f:close()
  return text
end

function M.expect_logged_once(text, line, what)
  local _, n = text:gsub(line:gsub("%p", "%%%0"), "")
  assert(n == 1, string.format("%s: '%s' logged %d times in:\n%s", what, line, n, text))
end

-- Loads into a fresh network; returns (t, net, the log lines the load wrote).
function M.load(file, class, args, options)
  local net = M.network(class)
  local from = log_size()
  local t = mininet.load(net, file, class, args, options)
  return t, net, log_since(from)
end

return M
