"""The Lua program that carries out transformations inside Envoy's Lua filter.

It is the listener's Lua filter code, the same for every route; a route with a
transformation passes its compiled templates as plain data in the per-route
`filter_context`, read with `handle:filterContext()`. Nothing a user writes is
ever Lua code, there is one Lua state per worker however many routes transform,
and a changed transformation changes only the route. The runtime:

- reads the request (and its JSON body when a template needs it), renders
  every template against the original message, then removes, sets and adds
  headers and replaces the body (fixing content-length);
- stashes the request values that response templates read (request headers,
  path, method) in dynamic metadata, as Envoy keeps nothing else between the
  request and response halves of a Lua script;
- does the same for the response.

A failure inside the runtime answers 500 on the request path (a request that
cannot be transformed must not reach the backend half-transformed) and is
logged on the response path.
"""

RUNTIME = r"""
local NS = "lychgate.transformation"
local NULL = {}
local ARRAY = {}

local function utf8(cp)
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 0x40), 0x80 + cp % 0x40) end
  if cp < 0x10000 then
    return string.char(0xE0 + math.floor(cp / 0x1000), 0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
  end
  return string.char(0xF0 + math.floor(cp / 0x40000), 0x80 + math.floor(cp / 0x1000) % 0x40,
                     0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
end

local ESCAPES = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t' }

local function skip(s, i)
  local _, e = s:find("^[ \n\r\t]*", i)
  return e + 1
end

local function decode_string(s, i)
  local out, j = {}, i + 1
  while true do
    local c = s:sub(j, j)
    if c == "" then error("unterminated string") end
    if c == '"' then return table.concat(out), j + 1 end
    if c == "\\" then
      local e = s:sub(j + 1, j + 1)
      if e == "u" then
        local cp = tonumber(s:sub(j + 2, j + 5), 16)
        if not cp then error("bad \\u escape") end
        j = j + 6
        if cp >= 0xD800 and cp <= 0xDBFF and s:sub(j, j + 1) == "\\u" then
          local lo = tonumber(s:sub(j + 2, j + 5), 16)
          if lo and lo >= 0xDC00 and lo <= 0xDFFF then
            cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
            j = j + 6
          end
        end
        out[#out + 1] = utf8(cp)
      else
        local r = ESCAPES[e]
        if not r then error("bad escape") end
        out[#out + 1] = r
        j = j + 2
      end
    else
      local k = s:find('["\\]', j)
      if not k then error("unterminated string") end
      out[#out + 1] = s:sub(j, k - 1)
      j = k
    end
  end
end

local decode
decode = function(s, i)
  i = skip(s, i)
  local c = s:sub(i, i)
  if c == "{" then
    local obj = {}
    i = skip(s, i + 1)
    if s:sub(i, i) == "}" then return obj, i + 1 end
    while true do
      if s:sub(i, i) ~= '"' then error("expected a key") end
      local k, v
      k, i = decode_string(s, i)
      i = skip(s, i)
      if s:sub(i, i) ~= ":" then error("expected :") end
      v, i = decode(s, i + 1)
      obj[k] = v
      i = skip(s, i)
      c = s:sub(i, i)
      if c == "}" then return obj, i + 1 end
      if c ~= "," then error("expected , or }") end
      i = skip(s, i + 1)
    end
  elseif c == "[" then
    local arr = setmetatable({}, ARRAY)
    i = skip(s, i + 1)
    if s:sub(i, i) == "]" then return arr, i + 1 end
    while true do
      local v
      v, i = decode(s, i)
      arr[#arr + 1] = v
      i = skip(s, i)
      c = s:sub(i, i)
      if c == "]" then return arr, i + 1 end
      if c ~= "," then error("expected , or ]") end
      i = i + 1
    end
  elseif c == '"' then
    return decode_string(s, i)
  elseif s:find("^true", i) then
    return true, i + 4
  elseif s:find("^false", i) then
    return false, i + 5
  elseif s:find("^null", i) then
    return NULL, i + 4
  end
  local num = s:match("^-?%d+%.?%d*", i)
  if not num then error("unexpected character at " .. i) end
  local exp = s:match("^[eE][-+]?%d+", i + #num) or ""
  local n = tonumber(num .. exp)
  if not n then error("bad number") end
  return n, i + #num + #exp
end

local function decode_all(s)
  local v, i = decode(s, 1)
  if skip(s, i) <= #s then error("trailing characters") end
  return v
end

local function encode_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    if c == '"' then return '\\"' elseif c == "\\" then return "\\\\"
    elseif c == "\n" then return "\\n" elseif c == "\r" then return "\\r" elseif c == "\t" then return "\\t" end
    return string.format("\\u%04x", c:byte())
  end) .. '"'
end

local encode
local function number_text(v)
  if v == math.floor(v) and math.abs(v) < 1e15 then return string.format("%d", v) end
  return string.format("%.14g", v)
end
encode = function(v)
  local t = type(v)
  if v == nil or v == NULL then return "null" end
  if t == "boolean" then return tostring(v) end
  if t == "number" then return number_text(v) end
  if t == "string" then return encode_string(v) end
  local parts = {}
  if getmetatable(v) == ARRAY then
    for i = 1, #v do parts[i] = encode(v[i]) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  for i, k in ipairs(keys) do parts[i] = encode_string(k) .. ":" .. encode(v[k]) end
  return "{" .. table.concat(parts, ",") .. "}"
end

local function text(v)
  if v == nil or v == NULL then return "" end
  local t = type(v)
  if t == "string" then return v end
  if t == "number" then return number_text(v) end
  if t == "boolean" then return tostring(v) end
  return encode(v)
end

local function field(doc, path)
  local v = doc
  for key in path:gmatch("[^.]+") do
    if type(v) ~= "table" or v == NULL then return nil end
    if getmetatable(v) == ARRAY then
      local n = tonumber(key)
      v = n and v[n + 1] or nil
    else
      v = v[key]
    end
  end
  return v
end

local function url_decode(s)
  s = s:gsub("+", " ")
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

local function query_param(path, name)
  local q = path:match("%?(.*)$")
  if not q then return nil end
  for pair in q:gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    if url_decode(k) == name then return url_decode(v) end
  end
  return nil
end

local function render(parts, src)
  local out = {}
  for i, p in ipairs(parts) do
    local kind, arg = p[1], p[2]
    local as_json = kind:sub(1, 5) == "json:"
    if as_json then kind = kind:sub(6) end
    local v
    if kind == "text" then v = arg
    elseif kind == "header" then v = src.header(arg)
    elseif kind == "request_header" then v = src.request_header(arg)
    elseif kind == "path" then v = (src.path or ""):gsub("%?.*$", "")
    elseif kind == "method" then v = src.method
    elseif kind == "query" then v = query_param(src.path or "", arg)
    elseif kind == "body" then v = src.body
    elseif kind == "field" then v = field(src.doc, arg)
    end
    if as_json then out[i] = encode(v) else out[i] = text(v) end
  end
  return table.concat(out)
end

local function header_value(v)
  return (v:gsub("[%z\r\n]", ""))
end

local function transform(handle, M, src)
  local buffer
  if M.read_body then
    -- Waits for the whole body; header objects taken before this are no longer valid.
    buffer = handle:body(true)
    src.body = buffer and buffer:getBytes(0, buffer:length()) or ""
    if M.json then
      local ok, doc = pcall(decode_all, src.body)
      if ok then src.doc = doc end
    end
  end
  local h = handle:headers()
  local sets, adds = {}, {}
  for i, e in ipairs(M.set) do sets[i] = render(e[2], src) end
  for i, e in ipairs(M.add) do adds[i] = render(e[2], src) end
  local body = M.body and render(M.body, src)
  for _, name in ipairs(M.remove) do h:remove(name) end
  for i, e in ipairs(M.set) do h:replace(e[1], header_value(sets[i])) end
  for i, e in ipairs(M.add) do h:add(e[1], header_value(adds[i])) end
  if body and buffer then
    buffer:setBytes(body)
    h:replace("content-length", tostring(#body))
  end
end

-- filter_context {transformation = [request, response, stash]}, each message
-- [set, add, remove, body, json, read_body]; false where there is none.
local function message(m)
  if not m then return nil end
  return {set = m[1], add = m[2], remove = m[3], body = m[4] or nil, json = m[5], read_body = m[6]}
end

local function context(handle)
  local t = handle:filterContext():get("transformation") or {}
  return {request = message(t[1]), response = message(t[2]), stash = t[3] or nil}
end

function envoy_on_request(handle)
  local T = context(handle)
  local h = handle:headers()
  local path, method = h:get(":path") or "", h:get(":method") or ""
  if T.stash then
    local md = handle:streamInfo():dynamicMetadata()
    md:set(NS, "path", path)
    md:set(NS, "method", method)
    for _, name in ipairs(T.stash) do
      local v = h:get(name)
      if v then md:set(NS, "h:" .. name, v) end
    end
  end
  if not T.request then return end
  local src = {
    header = function(n) return handle:headers():get(n) end,
    request_header = function(n) return handle:headers():get(n) end,
    path = path, method = method,
  }
  local ok, err = pcall(transform, handle, T.request, src)
  if not ok then
    handle:logErr("lychgate transformation of the request failed: " .. tostring(err))
    handle:respond({[":status"] = "500"}, "the request could not be transformed\n")
  end
end

function envoy_on_response(handle)
  local T = context(handle)
  if not T.response then return end
  local md = handle:streamInfo():dynamicMetadata():get(NS) or {}
  local src = {
    header = function(n) return handle:headers():get(n) end,
    request_header = function(n) return md["h:" .. n] end,
    path = md.path, method = md.method,
  }
  local ok, err = pcall(transform, handle, T.response, src)
  if not ok then
    handle:logErr("lychgate transformation of the response failed: " .. tostring(err))
  end
end
"""
