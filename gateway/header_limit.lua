-- Request headers above {{ max_bytes }} bytes (names and values together) are answered 431
-- {{ reason }} here, before any other work: that is what the services take (gRPC metadata,
-- scaleout_common/server.py), so no header the gateway passes is refused upstream as RESOURCE_EXHAUSTED (a 429
-- that SDKs back off and retry). Envoy's codec limit sits higher on purpose: over HTTP/2 a header field the codec
-- cannot decode fails the whole connection, every stream of the client's beside it; under it, the one request is
-- refused here and the rest of the connection goes on.

local MAX_BYTES = {{ max_bytes }}
local REASON = "{{ reason }}"
local GRPC_CODE = "{{ grpc_code }}"

function envoy_on_request(handle)
  local size = 0
  for name, value in pairs(handle:headers()) do
    size = size + #name + #value
  end
  if size <= MAX_BYTES then
    return
  end
  local said = "request headers of " .. size .. " bytes, above the limit of " .. MAX_BYTES
  if (handle:headers():get("content-type") or ""):sub(1, 16) == "application/grpc" then
    -- A gRPC caller gets the reason's own code (Envoy would turn a 431 into UNKNOWN).
    handle:respond({[":status"] = "200", ["content-type"] = "application/grpc", ["grpc-status"] = GRPC_CODE,
      ["grpc-message"] = said .. " (" .. REASON .. ")"}, "")
  else
    handle:respond({[":status"] = "431"}, said)
  end
end
