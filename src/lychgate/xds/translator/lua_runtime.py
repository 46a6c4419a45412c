"""The Lua program that carries out transformations inside Envoy's Lua filter.

It is the listener's Lua filter code, the same for every route; a route with a
transformation passes its compiled templates as plain data in the per-route
`filter_context`, read with `handle:filterContext()`. Nothing a user writes is
ever Lua code, there is one Lua state per worker however many routes transform,
and a changed transformation changes only the route. The program is the JSON
codec (lua_json.py), the template interpreter (lua_template.py) and this glue,
which for each message (request, then response):

- buffers the body when a template or the body settings need it, and parses it
  when `parseAs: AsJson` (a body that is not JSON answers 400, as kgateway);
- answers 400 when a template reads JSON body fields but the body was not
  parsed as JSON (kgateway's "undeclared variables");
- renders every template against the original message, then sets headers (an
  empty value removes the header), adds them (an empty value adds nothing),
  removes headers, replaces the body (fixing content-length; an empty body
  drops content-type) and sets dynamic metadata (empty values are not set);
- stashes the request values response templates read (request headers, path,
  method) in dynamic metadata, as Envoy keeps nothing else between the request
  and response halves of a Lua script.

A template that fails to render (a field of an undefined value...) renders as
"" and is logged, as kgateway's engines do. A failure of the runtime itself
answers 500 on the request path (a request that cannot be transformed must not
reach the backend half-transformed) and is logged on the response path.
"""

from lychgate.xds.translator.lua_json import JSON
from lychgate.xds.translator.lua_template import TEMPLATE

GLUE = r"""
local NS = "lychgate.transformation"
math.randomseed(os.time() + math.floor(os.clock() * 1000000))

local function url_decode(s)
  s = s:gsub("+", " ")
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

local function query_param(path, name)
  local q = (path or ""):match("%?(.*)$")
  if not q then return "" end
  for pair in q:gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    if url_decode(k) == name then return url_decode(v) end
  end
  return ""
end

local function header_value(v)
  return (v:gsub("[%z\r\n]", ""))
end

local function rendered(handle, template, ctx, what)
  local out, err = render(template, ctx)
  if out == nil then
    handle:logWarn("lychgate transformation: " .. what .. " renders empty: " .. tostring(err))
    return ""
  end
  return out
end

-- Transforms one message; returns why it must be refused (400), or nil.
local function transform(handle, M, src)
  local buffer
  if M.read_body then
    -- Waits for the whole body; header objects taken before this are no longer valid.
    buffer = handle:body(true)
    src.body = buffer and buffer:getBytes(0, buffer:length()) or ""
  end
  local ctx = {src = src, random = {}}
  if M.parse == "AsJson" and src.body and src.body:find("%S") then
    local ok, doc = pcall(decode_all, src.body)
    if not ok then return "the body is not JSON: " .. tostring(doc), buffer end
    ctx.doc = doc
    if is_object(doc) then ctx.obj = doc end
  end
  if M.free and ctx.doc == nil then
    return "a template reads JSON body fields but the body was not parsed as JSON", buffer
  end
  local sets, adds, metas = {}, {}, {}
  for i, e in ipairs(M.set) do sets[i] = rendered(handle, e[2], ctx, "header " .. e[1]) end
  for i, e in ipairs(M.add) do adds[i] = rendered(handle, e[2], ctx, "header " .. e[1]) end
  for i, e in ipairs(M.meta) do metas[i] = rendered(handle, e[3], ctx, "dynamic metadata " .. e[2]) end
  local body = M.body and rendered(handle, M.body, ctx, "the body")
  local h = handle:headers()
  for i, e in ipairs(M.set) do
    if sets[i] == "" then h:remove(e[1]) else h:replace(e[1], header_value(sets[i])) end
  end
  for i, e in ipairs(M.add) do
    if adds[i] ~= "" then h:add(e[1], header_value(adds[i])) end
  end
  for _, name in ipairs(M.remove) do h:remove(name) end
  if body and buffer then
    buffer:setBytes(body)
    h:replace("content-length", tostring(#body))
    if body == "" then h:remove("content-type") end
  end
  if #M.meta > 0 then
    local md = handle:streamInfo():dynamicMetadata()
    for i, e in ipairs(M.meta) do
      if metas[i] ~= "" then md:set(e[1], e[2], metas[i]) end
    end
  end
  return nil
end

-- filter_context {transformation = [request, response, stash]}, each message
-- [set, add, remove, body, parse, read_body, free, metadata]; false where there is none.
local function message(m)
  if not m then return nil end
  return {set = m[1], add = m[2], remove = m[3], body = m[4] or nil, parse = m[5], read_body = m[6],
          free = m[7], meta = m[8]}
end

local function context(handle)
  local t = handle:filterContext():get("transformation") or {}
  return {request = message(t[1]), response = message(t[2]), stash = t[3] or nil}
end

local function stash(handle, names)
  local h = handle:headers()
  local md = handle:streamInfo():dynamicMetadata()
  md:set(NS, "path", h:get(":path") or "")
  md:set(NS, "method", h:get(":method") or "")
  for _, name in ipairs(names) do
    if name == "*" then
      for k, v in pairs(h) do md:set(NS, "h:" .. k, v) end
    else
      local v = h:get(name)
      if v then md:set(NS, "h:" .. name, v) end
    end
  end
end

function envoy_on_request(handle)
  local T = context(handle)
  if T.stash then stash(handle, T.stash) end
  if not T.request then return end
  local h = handle:headers()
  local path, method = h:get(":path") or "", h:get(":method") or ""
  local src = {
    header = function(n) return handle:headers():get(n) end,
    request_header = function(n) return handle:headers():get(n) end,
    query = function(n) return query_param(path, n) end,
    path = path, method = method,
  }
  local ok, refused = pcall(transform, handle, T.request, src)
  if not ok then
    handle:logErr("lychgate transformation of the request failed: " .. tostring(refused))
    handle:respond({[":status"] = "500"}, "the request could not be transformed\n")
  elseif refused then
    handle:respond({[":status"] = "400", ["content-type"] = "text/plain"},
                   "the request could not be transformed: " .. refused .. "\n")
  end
end

function envoy_on_response(handle)
  local T = context(handle)
  if not T.response then return end
  local md = handle:streamInfo():dynamicMetadata():get(NS) or {}
  local src = {
    header = function(n) return handle:headers():get(n) end,
    request_header = function(n) return md["h:" .. n] end,
    query = function(n) return query_param(md.path, n) end,
    path = md.path, method = md.method,
  }
  local ok, refused, buffer = pcall(transform, handle, T.response, src)
  if not ok then
    handle:logErr("lychgate transformation of the response failed: " .. tostring(refused))
  elseif refused then
    -- kgateway answers 400 when a response cannot be transformed.
    local h = handle:headers()
    h:replace(":status", "400")
    if buffer then
      local text = "the response could not be transformed: " .. refused .. "\n"
      buffer:setBytes(text)
      h:replace("content-length", tostring(#text))
      h:replace("content-type", "text/plain")
    end
  end
end
"""

RUNTIME = JSON + TEMPLATE + GLUE
