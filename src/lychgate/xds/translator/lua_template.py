"""The template interpreter of the transformation runtime, in Lua.

It walks the plain data translate/policies/templates.py compiled (statements
and expression nodes, as lists) against a context:

    ctx.src     the message: header(n), request_header(n), body, path, method
    ctx.obj     the JSON body when it is an object: its fields are variables
    ctx.doc     the whole JSON body, for context()
    ctx.vars    what {% set %} and {% for %} bound
    ctx.random  replace_with_random's string per pattern (one per message)

`render(template, ctx)` returns the text, or nil and the error: reading a
field of an undefined value, comparing a number with a string and the like.
Undefined values (a missing field, header or variable) render as "".
"""

TEMPLATE = r"""
local function is_array(v) return type(v) == "table" and getmetatable(v) == ARRAY end
local function is_object(v) return type(v) == "table" and v ~= NULL and getmetatable(v) ~= ARRAY end
local function array(t) return setmetatable(t or {}, ARRAY) end

local function truthy(v)
  if v == nil or v == NULL or v == false then return false end
  local t = type(v)
  if t == "number" then return v ~= 0 end
  if t == "string" then return v ~= "" end
  if t == "table" then return next(v) ~= nil end
  return true
end

local function sorted_keys(obj)
  local keys = {}
  for k in pairs(obj) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

local function equal(a, b)
  if type(a) == "table" and type(b) == "table" then return a == b or encode(a) == encode(b) end
  return a == b
end

local function get(v, k)
  if v == nil or v == NULL then error("cannot read '" .. text(k) .. "' of an undefined value") end
  if is_array(v) then
    local n = tonumber(k)
    if not n then return nil end
    if n < 0 then n = #v + n end
    return v[n + 1]
  end
  if type(v) ~= "table" then return nil end
  if type(k) == "number" then k = number_text(k) end
  return v[k]
end

local function lookup(ctx, name)
  local v = ctx.vars[name]
  if v ~= nil then return v end
  if ctx.obj then return ctx.obj[name] end
  return nil
end

local function num(v)
  if type(v) ~= "number" then error("expected a number, got " .. encode(v)) end
  return v
end

local function plain_replace(s, from, to)
  if from == "" then return s end
  local out, i = {}, 1
  while true do
    local a, b = s:find(from, i, true)
    if not a then break end
    out[#out + 1] = s:sub(i, a - 1)
    out[#out + 1] = to
    i = b + 1
  end
  out[#out + 1] = s:sub(i)
  return table.concat(out)
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

local function b64encode(s, alphabet, pad)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local chars = {}
    for j = 1, 4 do
      local idx = math.floor(n / 64 ^ (4 - j)) % 64
      chars[j] = alphabet:sub(idx + 1, idx + 1)
    end
    if not b then chars[3], chars[4] = pad and "=" or "", pad and "=" or ""
    elseif not c then chars[4] = pad and "=" or "" end
    out[#out + 1] = table.concat(chars)
  end
  return table.concat(out)
end

-- Strict, as kgateway's engines: padded, no stray characters; "" when invalid.
local function b64decode(s, alphabet)
  if #s % 4 ~= 0 then return "" end
  local index = {}
  for i = 1, 64 do index[alphabet:sub(i, i)] = i - 1 end
  local out = {}
  for i = 1, #s, 4 do
    local chunk = s:sub(i, i + 3)
    local pads = #(chunk:match("=*$"))
    if pads > 2 or (pads > 0 and i + 3 < #s) then return "" end
    local n = 0
    for j = 1, 4 - pads do
      local v = index[chunk:sub(j, j)]
      if not v then return "" end
      n = n * 64 + v
    end
    n = n * 64 ^ pads
    local bytes = string.char(math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
    out[#out + 1] = bytes:sub(1, 3 - pads)
  end
  return table.concat(out)
end

local function random_text()
  local bytes = {}
  for i = 1, 16 do bytes[i] = string.char(math.random(0, 255)) end
  return b64encode(table.concat(bytes), B64, false)
end

local function round(v, places)
  local m = 10 ^ (places or 0)
  local x = num(v) * m
  x = x >= 0 and math.floor(x + 0.5) or -math.floor(-x + 0.5)
  return x / m
end

local function to_number(v, fallback, integer)
  local n = tonumber(type(v) == "string" and v:match("^%s*(.-)%s*$") or v)
  if n == nil then
    if type(v) == "boolean" then n = v and 1 or 0 else return fallback or 0 end
  end
  if integer then n = n >= 0 and math.floor(n) or -math.floor(-n) end
  return n
end

local function length(v)
  if v == nil or v == NULL then return 0 end
  if type(v) == "string" then return #v end
  if is_array(v) then return #v end
  if type(v) == "table" then return #sorted_keys(v) end
  error("length of a " .. type(v))
end

local function items(v)
  local out = array()
  if is_object(v) then
    for _, k in ipairs(sorted_keys(v)) do out[#out + 1] = array({k, v[k]}) end
  end
  return out
end

local function chars(s)
  local out = array()
  for c in s:gmatch(".") do out[#out + 1] = c end
  return out
end

local function to_list(v)
  if is_array(v) then local out = array(); for i, x in ipairs(v) do out[i] = x end; return out end
  if type(v) == "string" then return chars(v) end
  if is_object(v) then return array(sorted_keys(v)) end
  if v == nil or v == NULL then return array() end
  error("cannot make a list of " .. encode(v))
end

local function less(a, b)
  if type(a) == type(b) and (type(a) == "number" or type(a) == "string") then return a < b end
  error("cannot compare " .. encode(a) .. " with " .. encode(b))
end

local function split(s, sep)
  local out = array()
  if sep == nil or sep == NULL then
    for w in s:gmatch("%S+") do out[#out + 1] = w end
    return out
  end
  if sep == "" then return chars(s) end
  local i = 1
  while true do
    local a, b = s:find(sep, i, true)
    if not a then break end
    out[#out + 1] = s:sub(i, a - 1)
    i = b + 1
  end
  out[#out + 1] = s:sub(i)
  return out
end

local function title(s)
  return (s:lower():gsub("(%a)([%w']*)", function(a, b) return a:upper() .. b end))
end

local F = {}
F.header = function(ctx, a) return ctx.src.header(text(a[1]):lower()) or "" end
F.request_header = function(ctx, a) return ctx.src.request_header(text(a[1]):lower()) or "" end
F.body = function(ctx) return ctx.src.body or "" end
F.context = function(ctx) return ctx.doc end
F.env = function(ctx, a) return os.getenv(text(a[1])) or "" end
F.path = function(ctx) return ((ctx.src.path or ""):gsub("%?.*$", "")) end
F.method = function(ctx) return ctx.src.method or "" end
F.query_param = function(ctx, a) return ctx.src.query(text(a[1])) end
F.base64_encode = function(ctx, a) return b64encode(text(a[1]), B64, true) end
F.base64_decode = function(ctx, a) return b64decode(text(a[1]), B64) end
F.base64url_encode = function(ctx, a) return b64encode(text(a[1]), B64URL, true) end
F.base64url_decode = function(ctx, a) return b64decode(text(a[1]), B64URL) end
F.substring = function(ctx, a)
  local s, start, len = text(a[1]), to_number(a[2], -1, true), a[3] ~= nil and to_number(a[3], 0, true) or 0
  if start < 0 or start >= #s then return "" end
  if len <= 0 or start + len > #s then return s:sub(start + 1) end
  return s:sub(start + 1, start + len)
end
F.trim = function(ctx, a) return (text(a[1]):match("^%s*(.-)%s*$")) end
F.replace_with_random = function(ctx, a)
  local pattern = text(a[2])
  ctx.random[pattern] = ctx.random[pattern] or random_text()
  return plain_replace(text(a[1]), pattern, ctx.random[pattern])
end
F.replace_with_string = function(ctx, a) return plain_replace(text(a[1]), text(a[2]), text(a[3])) end
F.replace = function(ctx, a) return plain_replace(text(a[1]), text(a[2]), text(a[3])) end
F.raw_string = function(ctx, a)
  local s = encode(a[1])
  if s:sub(1, 1) == '"' then s = s:sub(2, -2) end
  return s
end
F.word_count = function(ctx, a) local n = 0; for _ in text(a[1]):gmatch("%S+") do n = n + 1 end; return n end
F.json = function(ctx, a) return encode(a[1]) end
F.tojson = F.json
F.length = function(ctx, a) return length(a[1]) end
F.count = F.length
F.upper = function(ctx, a) return text(a[1]):upper() end
F.lower = function(ctx, a) return text(a[1]):lower() end
F.capitalize = function(ctx, a) local s = text(a[1]); return s:sub(1, 1):upper() .. s:sub(2):lower() end
F.title = function(ctx, a) return title(text(a[1])) end
F.default = function(ctx, a)
  if a[1] == nil or (a[3] and not truthy(a[1])) then return a[2] end
  return a[1]
end
F.d = F.default
F.join = function(ctx, a)
  local parts = {}
  for i, v in ipairs(to_list(a[1])) do parts[i] = text(v) end
  return table.concat(parts, a[2] ~= nil and text(a[2]) or "")
end
F.first = function(ctx, a) local l = to_list(a[1]); return l[1] end
F.last = function(ctx, a) local l = to_list(a[1]); return l[#l] end
F.int = function(ctx, a) return to_number(a[1], a[2], true) end
F.float = function(ctx, a) return to_number(a[1], a[2], false) end
F.string = function(ctx, a) return text(a[1]) end
F.abs = function(ctx, a) return math.abs(num(a[1])) end
F.round = function(ctx, a) return round(a[1], a[2]) end
F.sort = function(ctx, a) local l = to_list(a[1]); table.sort(l, less); return l end
F.reverse = function(ctx, a)
  if type(a[1]) == "string" then return a[1]:reverse() end
  local l, out = to_list(a[1]), array()
  for i = #l, 1, -1 do out[#out + 1] = l[i] end
  return out
end
F.list = function(ctx, a) return to_list(a[1]) end
F.items = function(ctx, a) return items(a[1]) end
F.keys = function(ctx, a) return is_object(a[1]) and array(sorted_keys(a[1])) or array() end
F.values = function(ctx, a)
  local out = array()
  if is_object(a[1]) then for _, k in ipairs(sorted_keys(a[1])) do out[#out + 1] = a[1][k] end end
  return out
end
F.min = function(ctx, a) local l = F.sort(ctx, a); return l[1] end
F.max = function(ctx, a) local l = F.sort(ctx, a); return l[#l] end
F.range = function(ctx, a)
  local from, to, step = 0, num(a[1]), num(a[3] or 1)
  if a[2] ~= nil then from, to = num(a[1]), num(a[2]) end
  if step == 0 then error("range() step 0") end
  local out = array()
  local i = from
  while (step > 0 and i < to) or (step < 0 and i > to) do
    out[#out + 1] = i
    if #out > 10000 then error("range() longer than 10000") end
    i = i + step
  end
  return out
end
F.split = function(ctx, a) return split(text(a[1]), a[2]) end
F.startswith = function(ctx, a) local p = text(a[2]); return text(a[1]):sub(1, #p) == p end
F.endswith = function(ctx, a) local p = text(a[2]); return p == "" or text(a[1]):sub(-#p) == p end
F.urlencode = function(ctx, a)
  return (text(a[1]):gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end
F.at = function(ctx, a) return get(a[1], a[2]) end
F.exists = function(ctx, a) return lookup(ctx, text(a[1])) ~= nil end
F.existsIn = function(ctx, a) return is_object(a[1]) and a[1][text(a[2])] ~= nil end
F.isString = function(ctx, a) return type(a[1]) == "string" end
F.isNumber = function(ctx, a) return type(a[1]) == "number" end
F.isInteger = function(ctx, a) return type(a[1]) == "number" and a[1] == math.floor(a[1]) end
F.isFloat = function(ctx, a) return type(a[1]) == "number" and a[1] ~= math.floor(a[1]) end
F.isBoolean = function(ctx, a) return type(a[1]) == "boolean" end
F.isArray = function(ctx, a) return is_array(a[1]) end
F.isObject = function(ctx, a) return is_object(a[1]) end
F.odd = function(ctx, a) return num(a[1]) % 2 == 1 end
F.even = function(ctx, a) return num(a[1]) % 2 == 0 end
F.divisibleBy = function(ctx, a) return num(a[1]) % num(a[2]) == 0 end

local TESTS = {
  defined = function(v) return v ~= nil end,
  undefined = function(v) return v == nil end,
  none = function(v) return v == NULL end,
  string = function(v) return type(v) == "string" end,
  number = function(v) return type(v) == "number" end,
  integer = function(v) return type(v) == "number" and v == math.floor(v) end,
  float = function(v) return type(v) == "number" and v ~= math.floor(v) end,
  boolean = function(v) return type(v) == "boolean" end,
  mapping = is_object,
  sequence = function(v) return is_array(v) or type(v) == "string" end,
  iterable = function(v) return type(v) == "table" and v ~= NULL or type(v) == "string" end,
  ["true"] = function(v) return v == true end,
  ["false"] = function(v) return v == false end,
  odd = function(v) return num(v) % 2 == 1 end,
  even = function(v) return num(v) % 2 == 0 end,
  divisibleby = function(v, n) return num(v) % num(n) == 0 end,
  startingwith = function(v, p) return type(v) == "string" and v:sub(1, #p) == p end,
  endingwith = function(v, p) return type(v) == "string" and (p == "" or v:sub(-#p) == p) end,
  ["in"] = function(v, c) return F.contains(c, v) end,
  eq = function(v, o) return equal(v, o) end,
  ne = function(v, o) return not equal(v, o) end,
}

F.contains = function(container, v)
  if type(container) == "string" then return container:find(text(v), 1, true) ~= nil end
  if is_array(container) then
    for _, x in ipairs(container) do if equal(x, v) then return true end end
    return false
  end
  if is_object(container) then return container[text(v)] ~= nil end
  error("'in' needs a string, a list or an object")
end

local BINARY = {
  ["=="] = function(a, b) return equal(a, b) end,
  ["!="] = function(a, b) return not equal(a, b) end,
  ["<"] = function(a, b) return less(a, b) end,
  [">"] = function(a, b) return less(b, a) end,
  ["<="] = function(a, b) return not less(b, a) end,
  [">="] = function(a, b) return not less(a, b) end,
  ["in"] = function(a, b) return F.contains(b, a) end,
  ["~"] = function(a, b) return text(a) .. text(b) end,
  ["+"] = function(a, b)
    if type(a) == "string" and type(b) == "string" then return a .. b end
    return num(a) + num(b)
  end,
  ["-"] = function(a, b) return num(a) - num(b) end,
  ["*"] = function(a, b)
    if type(a) == "string" then return a:rep(num(b)) end
    return num(a) * num(b)
  end,
  ["/"] = function(a, b) return num(a) / num(b) end,
  ["//"] = function(a, b) return math.floor(num(a) / num(b)) end,
  ["%"] = function(a, b) return num(a) % num(b) end,
}

local eval
eval = function(e, ctx)
  local k = e[1]
  if k == "s" or k == "n" or k == "b" then return e[2]
  elseif k == "v" then return lookup(ctx, e[2])
  elseif k == "a" then return get(eval(e[2], ctx), eval(e[3], ctx))
  elseif k == "f" then
    local name, args = e[2], e[3]
    local a = {}
    local first = 1
    if name == "default" or name == "d" then
      -- default() stands in for a value that cannot be read at all (Inja): a.b of an undefined a
      local ok, v = pcall(eval, args[1], ctx)
      if ok then a[1] = v end
      first = 2
    end
    for i = first, #args do a[i] = eval(args[i], ctx) end
    return F[name](ctx, a)
  elseif k == "op" then return BINARY[e[2]](eval(e[3], ctx), eval(e[4], ctx))
  elseif k == "and" then return truthy(eval(e[2], ctx)) and truthy(eval(e[3], ctx))
  elseif k == "or" then return truthy(eval(e[2], ctx)) or truthy(eval(e[3], ctx))
  elseif k == "not" then return not truthy(eval(e[2], ctx))
  elseif k == "neg" then return -num(eval(e[2], ctx))
  elseif k == "cond" then
    if truthy(eval(e[2], ctx)) then return eval(e[3], ctx) end
    return eval(e[4], ctx)
  elseif k == "is" then
    local args = {}
    for i, x in ipairs(e[4]) do args[i] = eval(x, ctx) end
    return TESTS[e[2]](eval(e[3], ctx), args[1])
  elseif k == "list" then
    local out = array()
    for i, x in ipairs(e[2]) do out[i] = eval(x, ctx) end
    return out
  elseif k == "null" then return NULL
  end
  error("unknown template node " .. tostring(k))
end

local exec

local function run_for(n, ctx, out)
  local names, seq = n[2], eval(n[3], ctx)
  local list, object = {}, is_object(seq)
  if object then list = sorted_keys(seq)
  elseif is_array(seq) then list = seq
  elseif type(seq) == "string" then list = chars(seq)
  elseif seq ~= nil and seq ~= NULL then error("cannot loop over " .. encode(seq)) end
  if #list == 0 then return exec(n[5], ctx, out) end
  local vars = ctx.vars
  local saved = {vars[names[1]], names[2] and vars[names[2]], vars.loop}
  local parent = vars.loop
  for i, item in ipairs(list) do
    if names[2] then
      if object then vars[names[1]], vars[names[2]] = item, seq[item]
      else vars[names[1]], vars[names[2]] = get(item, 0), get(item, 1) end
    else
      vars[names[1]] = item
    end
    vars.loop = {index0 = i - 1, index1 = i, first = i == 1, last = i == #list, length = #list,
                 revindex = #list - i + 1, revindex0 = #list - i, parent = parent}
    exec(n[4], ctx, out)
  end
  vars[names[1]], vars.loop = saved[1], saved[3]
  if names[2] then vars[names[2]] = saved[2] end
end

exec = function(nodes, ctx, out)
  for _, n in ipairs(nodes) do
    local k = n[1]
    if k == "t" then out[#out + 1] = n[2]
    elseif k == "o" then out[#out + 1] = text(eval(n[2], ctx))
    elseif k == "if" then
      local taken = false
      for _, branch in ipairs(n[2]) do
        if truthy(eval(branch[1], ctx)) then
          exec(branch[2], ctx, out)
          taken = true
          break
        end
      end
      if not taken then exec(n[3], ctx, out) end
    elseif k == "for" then run_for(n, ctx, out)
    elseif k == "set" then ctx.vars[n[2]] = eval(n[3], ctx)
    end
  end
end

local function render(template, ctx)
  ctx.vars = {}
  local out = {}
  local ok, err = pcall(exec, template, ctx, out)
  if not ok then return nil, err end
  return table.concat(out)
end
"""
