-- Refuses a typed REST route's JSON body that names a field its message does not define (gateway/json_fields.py
-- says why and fills in the tables): 400 {{ reason }} naming the field's path as `param` in the REST error shape
-- (the mapper in envoy.yaml.j2, then openai_errors.lua, as for Envoy's other refusals). Only names are checked: a body that is not JSON, or a value of the wrong
-- type, is left to the transcoder, which refuses it itself. The path printed is clipped, never echoed unbounded.

local ROUTES = {{ routes }}
local MESSAGES = {{ messages }}
local MAX_DEPTH = 64
local MAX_PATH = 120

local walk
local unknown  -- the first name found that its message lacks (per request)

local function skip_space(text, i)
  return text:find("[^ \t\r\n]", i) or #text + 1
end

-- The raw text of the string literal at i (escapes kept) and the index after its closing quote; nil if unclosed.
local function read_string(text, i)
  local j = i + 1
  while true do
    local q = text:find('["\\]', j)
    if q == nil then
      return nil
    end
    if text:byte(q) == 92 then
      j = q + 2
    else
      return text:sub(i + 1, q - 1), q + 1
    end
  end
end

-- An object's members: each name checked against `fields` (nil: any name; the first missing one is kept in
-- `unknown`, its value walked as anything), each value walked as `value_kind` or as its field's kind. Returns the
-- index after the object, or nil where the JSON is malformed.
local function walk_object(text, i, fields, value_kind, path, depth)
  i = skip_space(text, i + 1)
  if text:sub(i, i) == "}" then
    return i + 1
  end
  while true do
    if text:sub(i, i) ~= '"' then
      return nil
    end
    local name, after = read_string(text, i)
    if name == nil then
      return nil
    end
    local here = path == "" and name or path .. "." .. name
    local kind = value_kind
    if fields ~= nil then
      kind = fields[name]
      if kind == nil then
        unknown = unknown or here
        kind = "*"
      end
    end
    i = skip_space(text, after)
    if text:sub(i, i) ~= ":" then
      return nil
    end
    i = walk(text, i + 1, kind, here, depth + 1)
    if i == nil then
      return nil
    end
    i = skip_space(text, i)
    local c = text:sub(i, i)
    if c == "}" then
      return i + 1
    elseif c ~= "," then
      return nil
    end
    i = skip_space(text, i + 1)
  end
end

-- The value at i, of kind "" (a scalar: skipped), "*" (anything: skipped), "m:<message>" or "map:<kind>".
walk = function(text, i, kind, path, depth)
  i = skip_space(text, i)
  local c = text:sub(i, i)
  if depth > MAX_DEPTH then
    return nil
  end
  if c == "[" then
    if kind == "" or kind == "*" then  -- a list of numbers (token ids) in one search; its syntax is the transcoder's
      local _, last = text:find("^[%d%s,.eE+-]*", i + 1)
      if text:sub(last + 1, last + 1) == "]" then
        return last + 2
      end
    end
    local index = 0
    i = skip_space(text, i + 1)
    if text:sub(i, i) == "]" then
      return i + 1
    end
    while true do
      i = skip_space(text, i)
      local nested = text:find("^[%[{]", i) ~= nil  -- only a container's path is ever printed: none built else
      i = walk(text, i, kind, nested and path .. "[" .. index .. "]" or path, depth + 1)
      if i == nil then
        return nil
      end
      i = skip_space(text, i)
      c = text:sub(i, i)
      if c == "]" then
        return i + 1
      elseif c ~= "," then
        return nil
      end
      index = index + 1
      i = i + 1
    end
  elseif c == "{" then
    if kind:sub(1, 2) == "m:" then
      return walk_object(text, i, MESSAGES[kind:sub(3)], nil, path, depth)
    elseif kind:sub(1, 4) == "map:" then
      return walk_object(text, i, nil, kind:sub(5), path, depth)
    end
    return walk_object(text, i, nil, "*", path, depth)
  elseif c == '"' then
    local _, after = read_string(text, i)
    if after == nil then
      return nil
    end
    return after
  end
  local stop = text:find("[,%]}%s]", i)
  if stop == i or c == "" then
    return nil
  end
  return stop or #text + 1
end

local function clip(text)
  if #text > MAX_PATH then
    text = text:sub(1, MAX_PATH) .. "..."
  end
  return (text:gsub('[%c"\\]', "?"))
end

function envoy_on_request(handle)
  local headers = handle:headers()
  local message = ROUTES[(headers:get(":path") or ""):gsub("%?.*$", "")]
  if message == nil or (headers:get("content-type") or ""):sub(1, 16) == "application/grpc" then
    return
  end
  local body = handle:body()
  if body == nil then
    return
  end
  -- Refused only where the whole body is JSON: a malformed one is the transcoder's INVALID_JSON, whatever it names.
  local text = body:getBytes(0, body:length())
  unknown = nil
  local after = walk(text, 1, "m:" .. message, "", 0)
  if after == nil or unknown == nil or skip_space(text, after) <= #text then
    return
  end
  local field = clip(unknown)
  -- The reply is shaped by its local_reply_config mapper (envoy.yaml.j2), which finds the field in this header
  -- (taken again: a headers object from before body() is out of scope once the body is buffered).
  handle:headers():replace("{{ field_header }}", field)
  handle:respond({[":status"] = "400"}, "unknown field " .. field .. ": " .. message .. " has no such field")
end
