"""JSON in Lua for the transformation runtime: decode bodies, encode values.

Envoy's Lua filter has no JSON library. Arrays decode to tables with the
ARRAY metatable (so an empty array stays an array), JSON null to the NULL
sentinel (nil would leave holes), numbers to Lua numbers.
"""

JSON = r"""
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
"""
