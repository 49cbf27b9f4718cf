"""GET /openapi.json on the gateway serves the document codegen wrote, and it validates."""

from __future__ import annotations

import requests
from openapi_spec_validator import validate

from scaleout_common.codegen import GENERATED, OPENAPI


def test_the_gateway_serves_the_generated_openapi_document(stack):
    response = requests.get(stack.rest_url + "/openapi.json", timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.content == (GENERATED / OPENAPI).read_bytes()
    document = response.json()
    validate(document)
    assert "/v1/chat/completions" in document["paths"]
