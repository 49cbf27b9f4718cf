"""SGLang's output fields of a chat or completion request (vllm-router and SMG add them to every body they
forward), and vLLM's `include_reasoning`, mapped onto the DerenderContext. The whole mapping:

| field                  | absent | value        | DerenderContext                                               |
|------------------------|--------|--------------|---------------------------------------------------------------|
| `separate_reasoning`   | true   | false        | reasoning_parser "none": the reasoning stays in `content`     |
| `include_reasoning`    | true   | false        | reasoning_delivery OMITTED: parsed out, left out of the answer|
| `stream_reasoning`     | true   | false        | reasoning_delivery WHOLE: a stream sends it in one delta once |
|                        |        |              | its block closes (SGLang's parser buffers it to the end tag)  |
| `no_stop_trim`         | false  | true         | include_stop_str_in_output: the matched stop string or stop   |
|                        |        |              | token's text stays in the output                              |
| `return_hidden_states` | false  | true         | refused, UNSUPPORTED_FIELD: hidden states never leave the     |
|                        |        |              | engine                                                        |

Precedence: `separate_reasoning: false` wins (unparsed, there is no reasoning to leave out or hold back), then
`include_reasoning: false` over `stream_reasoning: false`. Chat only, but for `no_stop_trim` and
`return_hidden_states`, which completions take too.
"""

from __future__ import annotations

from render_svc.structured import NONE
from scaleout.v1 import derender_pb2
from scaleout_common.reasons import Reason, fail


def _off(request, name: str) -> bool:
    """An `optional bool` field given as false (absent reads as true)."""
    return name in request.DESCRIPTOR.fields_by_name and request.HasField(name) and not getattr(request, name)


def apply(context: derender_pb2.DerenderContext, request) -> None:
    """The fields of `request` (RenderChatRequest or RenderCompletionRequest) onto `context`."""
    if request.return_hidden_states:
        raise fail(
            Reason.UNSUPPORTED_FIELD,
            "`return_hidden_states` = true is not supported: hidden states never leave the engine",
            "return_hidden_states",
        )
    if request.no_stop_trim:
        context.include_stop_str_in_output = True
    if _off(request, "separate_reasoning"):
        context.reasoning_parser = NONE
    elif _off(request, "include_reasoning"):
        context.reasoning_delivery = derender_pb2.REASONING_DELIVERY_OMITTED
    elif _off(request, "stream_reasoning"):
        context.reasoning_delivery = derender_pb2.REASONING_DELIVERY_WHOLE
