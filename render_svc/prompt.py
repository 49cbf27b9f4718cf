"""Steps every prompt takes after tokenization: truncation, length limits, GenerateRequest assembly."""

from __future__ import annotations

from dataclasses import dataclass, field

from scaleout.v1 import engine_pb2, render_pb2
from scaleout_common.lora_modules import LoraModule
from scaleout_common.reasons import Reason, fail


@dataclass(frozen=True)
class Limits:
    """Server-side limits (flags), each refused with its own reason."""

    max_messages: int = 4096
    max_prompt_tokens: int | None = None  # None: the model length
    max_template_output_chars: int = 4_000_000
    template_timeout_s: float = 5.0  # a request template's call, then its worker is killed
    template_memory_mb: int = 256  # a request template's worker: memory above its start-up size
    template_workers: int = 2  # processes that render request templates
    max_request_bytes: int = 16 * 1024 * 1024
    max_batch_size: int = 4096
    max_logprobs: int = 20
    max_message_bytes: int = 64 << 20  # --max-message-mb: derender's answer must carry prompt_logprobs


@dataclass(frozen=True)
class Options:
    """Server behaviour (flags)."""

    default_template_kwargs: dict = field(default_factory=dict)
    trust_request_chat_template: bool = False
    reasoning_parser: str = ""
    tool_parser: str = ""
    # "auto": detect from the template (does it loop over message content?), "string" or "openai" to force.
    content_format: str = "auto"
    token_cache_mb: int = 64  # long prompt pieces' token ids kept (render_svc/piece_cache.py); 0: none
    lora_modules: tuple[LoraModule, ...] = ()  # LoRA adapters served by name (--lora-modules)


TRUNCATION_SIDES = ("left", "right")


def check_truncation(request, max_model_len: int) -> int | None:
    """How many prompt tokens to keep (None: no truncation asked), validated."""
    if request.truncation_side not in ("", *TRUNCATION_SIDES):
        raise fail(Reason.INVALID_TRUNCATION_SIDE, "truncation_side is 'left' or 'right'", "truncation_side")
    if not request.HasField("truncate_prompt_tokens"):
        return None
    keep = request.truncate_prompt_tokens
    if keep == -1:
        return max_model_len
    if keep > max_model_len:  # vLLM's words
        raise fail(
            Reason.TRUNCATE_PROMPT_TOKENS_INVALID,
            "truncate_prompt_tokens value is greater than max_model_len. Please request a smaller truncation size.",
            "truncate_prompt_tokens",
        )
    if keep < 1:
        raise fail(
            Reason.TRUNCATE_PROMPT_TOKENS_INVALID,
            f"truncate_prompt_tokens must be -1 or in [1, {max_model_len}] (got {keep})",
            "truncate_prompt_tokens",
        )
    return keep


def truncate(ids: list[int], offsets, keep: int | None, side: str):
    """Keep `keep` tokens: the last ones ("left", the default) or the first ones ("right")."""
    if keep is None or len(ids) <= keep:
        return ids, offsets
    cut = slice(None, keep) if side == "right" else slice(len(ids) - keep, None)
    return ids[cut], (offsets[cut] if offsets is not None else None)


def check_length(ids: list[int], max_prompt_tokens: int, field_path: str) -> None:
    if not ids:
        raise fail(Reason.EMPTY_PROMPT, "the prompt has no tokens", field_path)
    if len(ids) > max_prompt_tokens:
        raise fail(
            Reason.PROMPT_TOO_LONG,
            # OpenAI's and vLLM's wording, which clients match to trim a conversation
            f"This model's maximum context length is {max_prompt_tokens} tokens for a prompt. However, your request "
            f"has {len(ids)} input tokens. Please reduce the length of the input prompt.",
            field_path,
        )


def check_size(request, limit: int) -> None:
    size = request.ByteSize()
    if size > limit:
        raise fail(Reason.REQUEST_TOO_LARGE, f"the request is {size} bytes, more than the limit of {limit}")


def fill_generate_request(
    out: engine_pb2.GenerateRequest,
    request,
    request_id: str,
    ids,
    sampling,
    n: int,
    model: str,
    fingerprint: str,
    lora_name: str = "",
) -> None:
    """Fill `out` (a field of the response, so nothing is copied twice); `lora_name`: the adapter the request's
    `model` names ("": the base model)."""
    out.request_id = request_id
    out.token_ids.extend(ids)
    out.sampling_params.CopyFrom(sampling)
    out.n = n
    out.model = model
    out.tokenizer_fingerprint = fingerprint
    out.lora_name = lora_name
    out.cache_salt = request.cache_salt
    out.priority = request.priority
    if request.HasField("kv_transfer_params"):
        out.kv_transfer_params.CopyFrom(request.kv_transfer_params)
    if request.HasField("stream_interval"):
        out.stream_interval = request.stream_interval


def offsets_proto(offsets) -> list[render_pb2.TokenOffset]:
    return [render_pb2.TokenOffset(start=start, end=end) for start, end in offsets]
