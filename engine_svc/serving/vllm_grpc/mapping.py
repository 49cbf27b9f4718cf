"""vLLM's gRPC engine messages (`vllm.grpc.engine`, registry package smg-grpc-proto) <-> our engine contract.

The whole field mapping, checked against the peer's own servicer (lightseekorg/smg,
grpc_servicer/smg_grpc_servicer/vllm/servicer.py) and what SMG's router reads:

GenerateRequest (theirs)          -> scaleout.v1.GenerateRequest
  request_id                      -> request_id
  tokenized.input_ids             -> token_ids (original_text: a debugging copy of the prompt, not read)
  text                            refused (UNSUPPORTED_FIELD): the engine takes token ids only
  stream                          streamed (chunks, then one complete per choice) or unary (one complete per choice)
  kv_transfer_params(_json)       refused (UNSUPPORTED_FIELD): P/D runs through the HTTP routes (docs/disaggregated.md)
  mm_inputs, extra_mm_inputs,
  media_refs                      refused (UNSUPPORTED_FIELD): text models only
  data_parallel_rank              0 or absent; other ranks refused (one rank)
SamplingParams (theirs)           -> scaleout.v1.SamplingParams (a zero means "unset" where vLLM reads it so)
  temperature (optional)          -> temperature
  top_p, min_p, repetition_penalty,
  frequency_/presence_penalty     -> the same, when not 0
  top_k                           -> top_k when > 0 (0: no cut)
  max_tokens (optional)           -> max_tokens;  min_tokens -> min_tokens when not 0
  stop, stop_token_ids            -> stop (matched by the engine), stop_token_ids
  skip_special_tokens             -> stop_keep_special_tokens = not it (how stop strings see special tokens)
  spaces_between_special_tokens,
  include_stop_str_in_output      the router's text only (the engine returns token ids, uncut)
  ignore_eos, seed, logit_bias    -> the same
  n                               -> GenerateRequest.n (0: 1)
  logprobs, prompt_logprobs       -> the same (-1, "the whole vocabulary", refused: INVALID_SAMPLING_PARAM)
  truncate_prompt_tokens          the prompt's last k token ids (-1: the last max_model_len)
  grammar_from_first_token        the face sets no reasoning gate: constraints start at the first token anyway
  json_schema | regex | grammar |
  structural_tag | json_object |
  choice.choices                  -> structured_outputs.<the same> (choice -> choice.values)
scaleout.v1.GenerateResponse      -> GenerateResponse (theirs)
  choices[i] delta                -> chunk{token_ids, index, prompt_tokens, cached_tokens, completion_tokens
                                     (the choice's total so far), output_logprobs; input_logprobs on a
                                     choice's first chunk}
  choice's finish                 -> complete{output_ids (unary: all; stream: the last delta, as vLLM's
                                     DELTA mode), finish_reason lower-case ("stop" | "length" | "abort" |
                                     "error"), matched_token_id | matched_stop_str, completion_tokens (total)}
  error (in band)                 -> the call ends with its gRPC status (as vLLM's servicer aborts)
TokenLogprobs                     -> OutputLogProbs{token_logprobs, token_ids, top_logprobs[{values, token_ids}]}
PromptInfo.logprobs               -> InputLogProbs (first prompt token: an empty InputTokenLogProb)
"""

from __future__ import annotations

from smg_grpc_proto.generated import vllm_engine_pb2 as vllm

from scaleout.v1 import common_pb2, engine_pb2
from scaleout_common.reasons import Reason, fail

FINISH_REASONS = {
    common_pb2.FINISH_REASON_STOP: "stop",
    common_pb2.FINISH_REASON_LENGTH: "length",
    common_pb2.FINISH_REASON_ABORT: "abort",
    common_pb2.FINISH_REASON_ERROR: "error",
}
NONZERO = ("top_p", "min_p", "repetition_penalty", "frequency_penalty", "presence_penalty", "min_tokens")
CONSTRAINTS = {"json_schema", "regex", "grammar", "structural_tag", "json_object"}  # same names on both sides
REFUSED = {
    "text": "the engine takes token ids (tokenized.input_ids) only",
    "kv_transfer_params": "is not taken on this face: disaggregated prefill runs through the HTTP routes",
    "kv_transfer_params_json": "is not taken on this face: disaggregated prefill runs through the HTTP routes",
    "mm_inputs": "this engine serves text models only",
    "extra_mm_inputs": "this engine serves text models only",
    "media_refs": "this engine serves text models only",
}


def generate_request(request: vllm.GenerateRequest, max_model_len: int) -> engine_pb2.GenerateRequest:
    """Our GenerateRequest for theirs, or a typed refusal naming the field."""
    for field, _ in request.ListFields():
        if field.name in REFUSED:
            raise fail(Reason.UNSUPPORTED_FIELD, f"{field.name}: {REFUSED[field.name]}", field.name)
    if request.HasField("data_parallel_rank") and request.data_parallel_rank != 0:
        raise fail(Reason.UNSUPPORTED_FIELD, "this engine has one data-parallel rank (0)", "data_parallel_rank")
    theirs = request.sampling_params
    ids = list(request.tokenized.input_ids)
    if theirs.HasField("truncate_prompt_tokens") and theirs.truncate_prompt_tokens != 0:
        keep = max_model_len if theirs.truncate_prompt_tokens < 0 else theirs.truncate_prompt_tokens
        ids = ids[-keep:]
    ours = engine_pb2.GenerateRequest(request_id=request.request_id, token_ids=ids)
    if theirs.n > 1:
        ours.n = theirs.n
    ours.sampling_params.CopyFrom(sampling_params(theirs))
    return ours


def sampling_params(theirs: vllm.SamplingParams) -> common_pb2.SamplingParams:
    ours = common_pb2.SamplingParams(
        stop=theirs.stop,
        stop_token_ids=theirs.stop_token_ids,
        stop_keep_special_tokens=not theirs.skip_special_tokens,
        ignore_eos=theirs.ignore_eos,
        logit_bias=dict(theirs.logit_bias),
    )
    for name in ("temperature", "max_tokens", "seed", "logprobs", "prompt_logprobs"):
        if theirs.HasField(name):
            setattr(ours, name, getattr(theirs, name))
    for name in ("logprobs", "prompt_logprobs"):
        if theirs.HasField(name) and getattr(theirs, name) < 0:
            raise fail(
                Reason.INVALID_SAMPLING_PARAM,
                f"{name} -1 (the whole vocabulary) is not served: ask for a number of top logprobs",
                f"sampling_params.{name}",
            )
    for name in NONZERO:
        if getattr(theirs, name):
            setattr(ours, name, getattr(theirs, name))
    if theirs.top_k > 0:
        ours.top_k = theirs.top_k
    constraint = theirs.WhichOneof("constraint")
    if constraint == "choice":
        ours.structured_outputs.choice.values.extend(theirs.choice.choices)
    elif constraint in CONSTRAINTS:
        setattr(ours.structured_outputs, constraint, getattr(theirs, constraint))
    return ours


def output_logprobs(token_ids, logprobs: common_pb2.TokenLogprobs) -> vllm.OutputLogProbs:
    return vllm.OutputLogProbs(
        token_logprobs=logprobs.logprobs,
        token_ids=token_ids,
        top_logprobs=[vllm.TopLogProbs(values=top.logprobs, token_ids=top.token_ids) for top in logprobs.top],
    )


def input_logprobs(prompt_ids, logprobs: common_pb2.TokenLogprobs) -> vllm.InputLogProbs:
    """Ours cover prompt tokens 1..N-1; theirs every token, the first without a value."""
    return vllm.InputLogProbs(
        token_logprobs=[vllm.InputTokenLogProb(), *(vllm.InputTokenLogProb(value=v) for v in logprobs.logprobs)],
        token_ids=prompt_ids,
        top_logprobs=[
            vllm.TopLogProbs(),
            *(vllm.TopLogProbs(values=t.logprobs, token_ids=t.token_ids) for t in logprobs.top),
        ],
    )


def stop_fields(choice: engine_pb2.GenerateChoice) -> dict:
    which = choice.WhichOneof("stop_reason")
    if which == "stop_token_id":
        return {"matched_token_id": choice.stop_token_id}
    if which == "stop_str":
        return {"matched_stop_str": choice.stop_str}
    return {}
