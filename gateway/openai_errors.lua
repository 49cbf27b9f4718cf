-- OpenAI's error object for every REST error: {"error": {"message", "type", "param", "code"}}.
--
-- A service's failed call reaches here as the transcoder prints a google.rpc.Status:
--   {"code":3,"message":"...","details":[{ErrorInfo},{BadRequest}]}
-- (fields in proto order, compact). It becomes message = the status message, param = the first field
-- violation, code = the ErrorInfo reason, details = the status details as they were. Envoy's own replies to
-- REST calls are already in the error shape (local_reply_config) with the HTTP status standing in for `type`,
-- which is filled in here. gRPC replies (200, application/grpc; Envoy's own in plain words) pass untouched.
-- TYPES is rendered from scaleout_common/openai_errors.py; a status without an ErrorInfo (a failure no service
-- typed) gets the reason of its code (UNTYPED, from scaleout_common/errors.py untyped_reason). JSON string
-- literals are copied as they are, never unescaped and re-encoded.
-- Success responses' bodies are never touched (no body buffering on the streaming paths); their headers lose the
-- transcoder's gRPC internals (grpc-status, grpc-message, grpc-accept-encoding), and an event stream says
-- `cache-control: no-cache`.
-- Under {{ anthropic_prefix }} (Anthropic's Messages API) the same object is wrapped as Anthropic's
-- {"type": "error", "error": {...}, "request_id": ...} with Anthropic's type names (ANTHROPIC_TYPES) and the status
-- details as `status_details` (Anthropic's SDKs read an `error.details` object of their own); the request
-- marks itself, and every answer to it names the request in Anthropic's `request-id` header; a reason its SDKs
-- act on gets Anthropic's `error.details.error_code` (ANTHROPIC_ERROR_CODES, e.g. thread_not_found). Anthropic's beta
-- form of these paths (`?beta=true`: the TypeScript SDK's beta.messages, Claude Code) is the same route.
-- On SGLang's weight routes (SGLANG_OUTCOME_PATHS) the object begins with SGLang's "success":false and "message".
-- On vLLM's scale-out routes and its pooling routes (VLLM_PATHS: render, derender, generate, score, rerank, pooling,
-- /v2/embed; /v1/messages/render too, before the Anthropic prefix) it is vLLM's ErrorResponse: `code` the HTTP status as an integer, `type` vLLM's name for the status
-- (VLLM_TYPES), the reason kept in `details` (an Envoy reply's as a google.rpc.ErrorInfo there).

local TYPES = {{ error_types }}
local ANTHROPIC_TYPES = {{ anthropic_error_types }}
local ANTHROPIC_ERROR_CODES = {{ anthropic_error_codes }}
local ANTHROPIC_PREFIX = "{{ anthropic_prefix }}"
local UNTYPED = {{ untyped_reasons }}
local SGLANG_OUTCOME_PATHS = {{ sglang_outcome_paths }}
local VLLM_PATHS = {{ vllm_paths }}
local VLLM_TYPES = {{ vllm_error_types }}

local function error_type(status, anthropic, vllm)
  if vllm then
    return VLLM_TYPES[status] or (status >= 500 and "InternalServerError" or "BadRequestError")
  end
  if anthropic then
    return ANTHROPIC_TYPES[status] or (status >= 500 and "api_error" or "invalid_request_error")
  end
  return TYPES[status] or (status >= 500 and "server_error" or "invalid_request_error")
end

function envoy_on_request(handle)
  local headers = handle:headers()
  local path = headers:get(":path") or ""
  if SGLANG_OUTCOME_PATHS[path] then
    handle:streamInfo():dynamicMetadata():set("scaleout", "sglang_outcome", true)
  end
  if VLLM_PATHS[path:gsub("%?.*$", "", 1)] then
    handle:streamInfo():dynamicMetadata():set("scaleout", "vllm", true)
    return
  end
  if path:sub(1, #ANTHROPIC_PREFIX) == ANTHROPIC_PREFIX then
    local marks = handle:streamInfo():dynamicMetadata()
    marks:set("scaleout", "anthropic", true)
    marks:set("scaleout", "request_id", headers:get("x-request-id") or "")
    local bare = path:gsub("%?beta=true$", "", 1)
    if bare ~= path then
      headers:replace(":path", bare)
    end
  end
end

-- The JSON string literal (quotes included) that follows the first "key": in text, or nil.
local function string_after(text, key)
  local marker = '"' .. key .. '":"'
  local start = text:find(marker, 1, true)
  if not start then
    return nil
  end
  local i = start + #marker
  while i <= #text do
    local c = text:sub(i, i)
    if c == "\\" then
      i = i + 2
    elseif c == '"' then
      return text:sub(start + #marker - 1, i)
    else
      i = i + 1
    end
  end
  return nil
end

function envoy_on_response(handle)
  local marks = handle:streamInfo():dynamicMetadata():get("scaleout")
  local anthropic = marks ~= nil and marks["anthropic"] == true
  local vllm = marks ~= nil and marks["vllm"] == true
  local headers = handle:headers()
  if anthropic then
    headers:replace("request-id", marks["request_id"])
  end
  local status = tonumber(headers:get(":status")) or 200
  local content_type = headers:get("content-type") or ""
  if content_type:sub(1, 16) ~= "application/grpc" then
    -- A REST answer: a success carries none of the transcoder's gRPC internals, and a stream is never cached.
    if status < 400 then
      headers:remove("grpc-accept-encoding")
      headers:remove("grpc-status")
      headers:remove("grpc-message")
    end
    if content_type:find("text/event-stream", 1, true) then
      headers:replace("cache-control", "no-cache")
    end
  end
  if status < 400 or not content_type:find("json", 1, true) then
    return
  end
  local body = handle:body()
  if body == nil then
    return
  end
  local text = body:getBytes(0, body:length())
  local shaped
  if text:sub(1, 8) == '{"code":' then
    local reason = string_after(text, "reason")
    if reason == nil then
      reason = '"' .. (UNTYPED[tonumber(text:match('^{"code":(%d+)'))] or "{{ untyped_reason }}") .. '"'
    end
    shaped = '{"error":{"message":' .. (string_after(text, "message") or '""')
      .. ',"type":"' .. error_type(status, anthropic, vllm) .. '","param":' .. (string_after(text, "field") or "null")
      .. ',"code":' .. (vllm and tostring(status) or reason) .. ',"' .. (anthropic and "status_details" or "details") .. '":'
      .. (text:match(',"details":(.*)}$') or "[]") .. "}}"
    local error_code = anthropic and ANTHROPIC_ERROR_CODES[reason:sub(2, -2)]
    if error_code then
      shaped = shaped:sub(1, -3) .. ',"details":{"error_code":"' .. error_code .. '"}}}'
    end
  elseif text:find('"type":"?%d%d%d"?') then
    shaped = text:gsub('"type":"?%d%d%d"?', '"type":"' .. error_type(status, anthropic, vllm) .. '"', 1)
    -- Some of Envoy's replies have no text of their own (no route): say what happened.
    local said = status == 404 and "no route serves this method and path" or "the gateway could not serve this request"
    shaped = shaped:gsub('"message":""', '"message":"' .. said .. '"', 1)
    local reason = vllm and string_after(shaped, "code")
    if reason then
      local numbered = shaped:gsub('"code":"[^"]*"', '"code":' .. status, 1)
      numbered = numbered:gsub("%s+$", "")
      shaped = numbered:sub(1, -3)
        .. ',"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":' .. reason .. "}]}}"
    end
  else
    return
  end
  if anthropic then
    shaped = '{"type":"error","request_id":"' .. marks["request_id"] .. '",' .. shaped:sub(2)
  elseif marks ~= nil and marks["sglang_outcome"] == true then
    shaped = '{"success":false,"message":' .. (string_after(shaped, "message") or '""') .. "," .. shaped:sub(2)
  end
  body:setBytes(shaped)
  -- A headers object taken before body() is out of scope once the body is buffered: take them again.
  handle:headers():replace("content-type", "application/json")
end
