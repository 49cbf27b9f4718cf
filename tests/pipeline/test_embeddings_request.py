"""`/v1/embeddings`' field policy (every field honoured or refused, named) and its answer's encodings."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from pipeline_svc.embeddings_request import embeddings_request, in_client_terms
from pipeline_svc.embeddings_response import embeddings
from scaleout.v1 import engine_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail


def parse(**body):
    return embeddings_request(json.dumps(body).encode())


def test_the_four_input_forms_and_vllm_extras_reach_the_typed_request():
    assert list(parse(input="hi").typed.inputs) == ["hi"]
    assert list(parse(input=["a", "b"]).typed.inputs) == ["a", "b"]
    assert [list(t.token_ids) for t in parse(input=[1, 2]).typed.input_token_ids] == [[1, 2]]
    assert [list(t.token_ids) for t in parse(input=[[1], [2, 3]]).typed.input_token_ids] == [[1], [2, 3]]
    parsed = parse(
        input="x", model="m", dimensions=8, truncate_prompt_tokens=-1, truncation_side="left",
        add_special_tokens=False, use_activation=False, priority=-2, request_id="r1", user="u",
        encoding_format="base64", endianness="big", embed_dtype="float32", padding="do_not_pad", cache_salt="s",
    )  # fmt: skip
    typed = parsed.typed
    assert (typed.model, typed.dimensions, typed.truncate_prompt_tokens, typed.truncation_side) == ("m", 8, -1, "left")
    assert (typed.add_special_tokens, typed.use_activation) == (False, False)
    assert (typed.priority, typed.request_id) == (-2, "r1")
    assert (parsed.encoding, parsed.byte_order, parsed.identity) == ("base64", ">", {"user": "u"})
    assert parse(input="x", padding="max_length").typed.pad_to_max_length  # render pads (vLLM's padding)


REFUSED = [
    ({}, Reason.MISSING_PROMPT, "input"),
    ({"input": []}, Reason.INVALID_REQUEST, "input"),
    ({"input": [{"role": "user", "content": "hi"}]}, Reason.INVALID_REQUEST, "input"),
    ({"input": "x", "messages": []}, Reason.CONFLICTING_OPTIONS, "messages"),
    ({"input": "x", "encoding_format": "hex"}, Reason.UNSUPPORTED_FIELD, "encoding_format"),
    ({"input": "x", "embed_dtype": "float64"}, Reason.UNSUPPORTED_FIELD, "embed_dtype"),
    ({"input": "x", "padding": "longest"}, Reason.UNSUPPORTED_FIELD, "padding"),
    ({"input": "x", "endianness": "middle"}, Reason.UNSUPPORTED_FIELD, "endianness"),
    ({"input": "x", "normalize": True}, Reason.INVALID_REQUEST, "normalize"),
    ({"input": "x", "mm_processor_kwargs": {}}, Reason.UNSUPPORTED_FIELD, "mm_processor_kwargs"),
    ({"input": "x", "temperature": 1}, Reason.UNSUPPORTED_FIELD, "temperature"),
    ({"input": "x", "dimensions": True}, Reason.INVALID_REQUEST, "dimensions"),
    ({"input": "x", "use_activation": 1}, Reason.INVALID_REQUEST, "use_activation"),
    ({"input": "x", "user": 5}, Reason.INVALID_REQUEST, "user"),
    ({"input": "x", "cache_salt": ""}, Reason.INVALID_REQUEST, "cache_salt"),
]


@pytest.mark.parametrize(("body", "reason", "field"), REFUSED)
def test_fields_that_cannot_be_honoured_are_refused_naming_them(body, reason, field):
    with pytest.raises(ServiceError) as caught:
        embeddings_request(json.dumps(body).encode())
    assert caught.value.reason == reason
    assert [name for name, _ in caught.value.violations] == [field]


def test_render_and_engine_paths_are_named_as_the_client_wrote_them():
    error = lambda: fail(Reason.EMPTY_PROMPT, "inputs[1] has no tokens", "inputs[1]")  # noqa: E731
    assert in_client_terms(error(), b'{"input": ["a", ""]}').violations[0][0] == "input[1]"
    error = lambda: fail(Reason.PROMPT_TOO_LONG, "too long", "input_token_ids[0]")  # noqa: E731
    assert in_client_terms(error(), b'{"input": [1, 2]}').violations[0][0] == "input"
    assert in_client_terms(error(), b'{"input": [[1], [2]]}').violations[0][0] == "input[0]"


def test_float_and_base64_answers_carry_the_same_float32_values():
    response = engine_pb2.EmbedResponse(request_id="r", prompt_tokens=3)
    response.embeddings.add().values.extend([0.1, -2.5, 3e-8])
    floats = embeddings(response, "m", "float", "<")
    little = embeddings(response, "m", "base64", "<")["data"][0]["embedding"]
    big = embeddings(response, "m", "base64", ">")["data"][0]["embedding"]
    assert np.frombuffer(base64.b64decode(little), dtype="<f4").tolist() == floats["data"][0]["embedding"]
    assert np.frombuffer(base64.b64decode(big), dtype=">f4").tolist() == floats["data"][0]["embedding"]
    assert floats["usage"] == {"prompt_tokens": 3, "total_tokens": 3}
    assert (floats["id"], floats["object"], floats["model"], floats["data"][0]["object"]) == (
        "embd-r", "list", "m", "embedding",
    )  # fmt: skip
