"""The whole field mapping of vLLM's render requests (0.33's ChatCompletionRequest and CompletionRequest) onto
our render core, in one table: each field vLLM takes is one of

- OURS: our typed request (RenderChatRequest / RenderCompletionRequest) has it under the same name and meaning;
- FACE: this face reads it itself (the note says into what);
- NO_OP: accepted at the values listed, which change nothing here as in vLLM's render; any other is refused;
- REFUSED: any value but null is refused (the note says why).

A key the table does not hold is refused too (UNSUPPORTED_FIELD naming it), where vLLM ignores it. `null` means
"not given", as vLLM reads it.
"""

from __future__ import annotations

from typing import NamedTuple

OURS, FACE, NO_OP, REFUSED = "ours", "face", "no-op", "refused"
CHAT, COMPLETION, BOTH = "chat", "completion", "both"


class Field(NamedTuple):
    how: str
    route: str = BOTH
    values: tuple = ()
    note: str = ""


TEXT_ONLY = "this deployment serves a text-only model (no multimodal inputs)"

FIELDS: dict[str, Field] = {
    # the prompt
    "messages": Field(OURS, CHAT, note="`reasoning` -> reasoning_content; `developer` renders as vLLM's (system)"),
    "prompt": Field(
        FACE, COMPLETION, note="a string or strings -> prompts; token ids or lists of them -> prompt_token_ids"
    ),
    "prompt_embeds": Field(REFUSED, COMPLETION, note="prompt embeddings are not supported"),
    "suffix": Field(REFUSED, COMPLETION, note="the model has no fill-in-the-middle template (vLLM refuses it too)"),
    "model": Field(OURS, note="a served name, else 404 MODEL_NOT_FOUND; echoed as `model`"),
    "add_generation_prompt": Field(OURS, CHAT),
    "continue_final_message": Field(OURS, CHAT),
    "add_special_tokens": Field(OURS),
    "documents": Field(OURS, CHAT),
    "chat_template": Field(OURS, CHAT, note="only with --trust-request-chat-template (vLLM's flag of that name)"),
    "chat_template_kwargs": Field(OURS, CHAT),
    "reasoning_effort": Field(
        FACE, CHAT, note="-> chat_template_kwargs reasoning_effort, and enable_thinking unless given"
    ),
    "tools": Field(OURS, CHAT),
    "tool_choice": Field(OURS, CHAT),
    "parallel_tool_calls": Field(OURS, CHAT),
    "truncate_prompt_tokens": Field(OURS),
    "truncation_side": Field(OURS),
    "echo": Field(OURS),
    # sampling
    "temperature": Field(OURS),
    "top_p": Field(OURS),
    "top_k": Field(OURS),
    "min_p": Field(OURS),
    "presence_penalty": Field(OURS),
    "frequency_penalty": Field(OURS),
    "repetition_penalty": Field(OURS),
    "seed": Field(FACE, note="-> seed; -1 means none, as in vLLM"),
    "n": Field(OURS),
    "max_tokens": Field(FACE, note="-> max_tokens (completions: 16 when absent; 0 with echo: 1, vLLM's echo-only)"),
    "max_completion_tokens": Field(OURS, CHAT),
    "min_tokens": Field(OURS),
    "ignore_eos": Field(OURS),
    "stop": Field(FACE, note="a string or strings -> stop"),
    "stop_token_ids": Field(OURS),
    "include_stop_str_in_output": Field(OURS),
    "skip_special_tokens": Field(OURS),
    "spaces_between_special_tokens": Field(OURS),
    "logprobs": Field(OURS, note="chat: a switch (with top_logprobs); completions: the count"),
    "top_logprobs": Field(OURS, CHAT),
    "prompt_logprobs": Field(OURS),
    "logprob_token_ids": Field(OURS),
    "logit_bias": Field(OURS, note="clamped to [-100, 100], as vLLM clamps it"),
    "allowed_token_ids": Field(OURS),
    "bad_words": Field(OURS),
    "thinking_token_budget": Field(OURS, CHAT, note="completions: refused (they have no reasoning gate)"),
    "include_reasoning": Field(OURS, CHAT),
    # SGLang's: vllm-router adds them to every body it sends here (render_svc/sglang_fields.py maps them)
    "separate_reasoning": Field(OURS, CHAT),
    "stream_reasoning": Field(OURS, CHAT),
    "no_stop_trim": Field(OURS, note="-> include_stop_str_in_output"),
    "return_hidden_states": Field(OURS, note="false only: true is refused (UNSUPPORTED_FIELD)"),
    "response_format": Field(OURS),
    "structured_outputs": Field(OURS),
    "stream_interval": Field(OURS),
    # the request and its answer
    "request_id": Field(OURS, note='`request_id` answers "chatcmpl-<id>" / "cmpl-<id>[-<prompt>]", as vLLM\'s'),
    "cache_salt": Field(OURS),
    "priority": Field(OURS),
    "kv_transfer_params": Field(
        OURS, note="echoed as `kv_transfer_params`; chat: its `prompt_token_ids` -> prompt_token_ids (vLLM's reuse)"
    ),
    "stream": Field(OURS, note="render never streams: shapes `stream`, `stream_options` and output_kind"),
    "stream_options": Field(OURS),
    "return_token_offsets": Field(OURS, note="-> `token_offsets` (null for token id prompts, as vLLM's)"),
    "return_prompt_text": Field(OURS, note="-> `scaleout.prompt_text` (completions: our addition)"),
    "return_token_ids": Field(
        OURS, note="echoed as `return_token_ids`; our derender_context carries it with the prompt's ids"
    ),
    "user": Field(FACE, note="the caller's identity: nothing to render (vLLM ignores it too)"),
    "session_id": Field(FACE, note="the caller's session: nothing to render (vLLM's render ignores it too)"),
    "use_beam_search": Field(NO_OP, values=(False,), note="beam search is not supported (vLLM's render refuses it)"),
    "length_penalty": Field(NO_OP, values=(1, 1.0), note="beam search only"),
    "watermarking": Field(NO_OP, values=(False,), note="this deployment has no watermark"),
    "return_weight_versions": Field(NO_OP, values=(False,), note="weight versions are not reported"),
    "routed_experts_prompt_start": Field(NO_OP, values=(0,), note="routed experts are not reported"),
    "return_tokens_as_token_ids": Field(NO_OP, values=(False,), note="a generate-time option render cannot carry"),
    "mm_payload": Field(NO_OP, values=("tensors", "none"), note=TEXT_ONLY),
    "return_mm_kwargs": Field(NO_OP, values=(True, False), note=TEXT_ONLY),
    "media_io_kwargs": Field(NO_OP, CHAT, values=({},), note=TEXT_ONLY),
    "mm_processor_kwargs": Field(NO_OP, CHAT, values=({},), note=TEXT_ONLY),
    "ec_transfer_params": Field(NO_OP, values=({},), note="a text-only model has no encoder cache to transfer"),
    "vllm_xargs": Field(NO_OP, values=({},), note="there are no custom extensions to pass them to"),
    "repetition_detection": Field(REFUSED, note="repetition detection is not supported"),
}
