-- API keys at the gateway. Rendered by gateway/edge.py; runs before everything else on a request.
--
-- Keys come from a file, one "client_name key [admin]" per line ("#" starts a comment), re-read every
-- {{ reload_s }} s by each worker, so keys are added and revoked without a restart (a file that cannot be read
-- keeps the last set). The key is taken from `authorization: Bearer <key>` (OpenAI SDKs, gRPC metadata) or
-- `x-api-key` (Anthropic SDKs) and compared with every configured key in time that depends only on the
-- lengths, never on where the first differing byte is.
--
-- A request without a valid key is refused: 401 with OpenAI's error object over REST, UNAUTHENTICATED over
-- gRPC. A valid one goes on with {{ client_header }}: <client name> (and {{ admin_header }}: true for an admin
-- key); whatever a client sent in those headers is dropped first. The key itself stays on the request, so the
-- one-hop service can pass it on for its own calls through the gateway.

local KEYS_FILE = "{{ keys_file }}"
local RELOAD_S = {{ reload_s }}
local CLIENT_HEADER = "{{ client_header }}"
local ADMIN_HEADER = "{{ admin_header }}"
local REASON = "{{ reason }}"
-- Paths any caller may reach: load balancers' health checks and the API document.
local OPEN_PREFIXES = {{ open_prefixes }}

local keys = {}
local loaded_at = nil

local function load_keys()
  local file = io.open(KEYS_FILE, "r")
  if file == nil then
    return
  end
  local fresh = {}
  for line in file:lines() do
    line = line:gsub("#.*$", "")
    local client, key, role = line:match("^%s*(%S+)%s+(%S+)%s*(%S*)%s*$")
    if client ~= nil then
      fresh[#fresh + 1] = {client = client, key = key, admin = role == "admin"}
    end
  end
  file:close()
  keys = fresh
end

-- 0 when a == b. Every byte of `given` is visited whatever the contents.
local function difference(expected, given)
  local diff = bit.bxor(#expected, #given)
  local n = #expected
  for i = 1, #given do
    local j = ((i - 1) % math.max(n, 1)) + 1
    diff = bit.bor(diff, bit.bxor(expected:byte(j) or 0, given:byte(i)))
  end
  return diff
end

local function presented_key(headers)
  local authorization = headers:get("authorization")
  if authorization ~= nil then
    local bearer = authorization:match("^[Bb]earer%s+(%S+)%s*$")
    if bearer ~= nil then
      return bearer
    end
  end
  return headers:get("x-api-key")
end

local function refuse(handle, headers, message)
  local content_type = headers:get("content-type") or ""
  if content_type:sub(1, 16) == "application/grpc" then
    handle:respond({[":status"] = "200", ["content-type"] = "application/grpc", ["grpc-status"] = "16",
      ["grpc-message"] = message}, "")
  else
    handle:respond({[":status"] = "401", ["content-type"] = "application/json", ["www-authenticate"] = "Bearer"},
      '{"error":{"message":"' .. message .. '","type":"401","param":null,"code":"' .. REASON .. '"}}')
  end
end

function envoy_on_request(handle)
  local headers = handle:headers()
  headers:remove(CLIENT_HEADER)
  headers:remove(ADMIN_HEADER)
  local path = headers:get(":path") or ""
  for _, prefix in ipairs(OPEN_PREFIXES) do
    if path:sub(1, #prefix) == prefix then
      return
    end
  end
  if headers:get(":method") == "OPTIONS" and headers:get("access-control-request-method") ~= nil then
    return -- a CORS preflight: browsers never send credentials on it
  end
  local now = os.time()
  if loaded_at == nil or now - loaded_at >= RELOAD_S then
    load_keys()
    loaded_at = now
  end
  local given = presented_key(headers)
  if given == nil then
    refuse(handle, headers, "missing API key: send Authorization: Bearer <key>")
    return
  end
  local found = nil
  for _, entry in ipairs(keys) do
    if difference(entry.key, given) == 0 and found == nil then
      found = entry
    end
  end
  if found == nil then
    refuse(handle, headers, "invalid API key")
    return
  end
  headers:replace(CLIENT_HEADER, found.client)
  if found.admin then
    headers:replace(ADMIN_HEADER, "true")
  end
end
