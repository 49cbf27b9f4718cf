"""DerenderService.CheckReasoning: the reasoning parser's checks over token ids as vLLM's ReasoningParser makes
them (`is_reasoning_end`, `extract_content_ids`, `count_reasoning_tokens`), for a router or engine that has ids,
not text: over a whole sequence (a prompt, or prompt and output), the last tag decides whether the reasoning is
over, the content follows the first end tag. scaleout_common/reasoning_counts.py decides, over the parser's
tags as this tokenizer's ids. (The engine's own gate, `ReasoningWatch`, follows the text parsers over an output.)"""

from __future__ import annotations

from derender_svc.limits import check_token_ids
from derender_svc.parsers import REASONING_PARSERS
from derender_svc.session import Defaults, parser_name
from scaleout.v1 import derender_pb2
from scaleout_common.reasoning_counts import count_reasoning_tokens, sequence_content_ids, sequence_reasoning_end
from scaleout_common.reasoning_ids import to_proto
from scaleout_common.reasons import Reason, fail


def check_reasoning(request: derender_pb2.CheckReasoningRequest, defaults: Defaults):
    info, limits = defaults.info, defaults.limits
    if request.tokenizer_fingerprint and request.tokenizer_fingerprint != info.fingerprint:
        raise fail(
            Reason.TOKENIZER_MISMATCH,
            f"ids of tokenizer {request.tokenizer_fingerprint}, this server has {info.fingerprint}",
            "tokenizer_fingerprint",
        )
    if len(request.token_ids) > limits.max_tokens_per_choice:
        raise fail(Reason.TOO_MANY_TOKENS, f"at most {limits.max_tokens_per_choice} token ids", "token_ids")
    check_token_ids(request.token_ids, info.vocab_size, "token_ids")
    ids = list(request.token_ids)
    name = parser_name(
        request.reasoning_parser or defaults.reasoning_parser, REASONING_PARSERS, "reasoning_parser", info
    )
    if name is None:  # no reasoning: every id is content
        return derender_pb2.CheckReasoningResponse(is_reasoning_end=True, content_token_ids=ids)
    spec = info.reasoning_spec(name, REASONING_PARSERS[name])
    started = request.reasoning_started
    response = derender_pb2.CheckReasoningResponse(
        is_reasoning_end=sequence_reasoning_end(ids, spec),
        content_token_ids=sequence_content_ids(ids, spec),
        reasoning_tokens=count_reasoning_tokens(ids, info.counting_spec(name, REASONING_PARSERS[name]), started),
    )
    to_proto(spec, started, response.tokens)
    return response
