"""render_svc's command-line flags (each also $SCALEOUT_<FLAG>) and the settings they make."""

from __future__ import annotations

import json

from render_svc.prompt import Limits, Options
from scaleout_common import lora_modules, sampling_rules
from scaleout_common.config import EnvArgumentParser, server_parser

DEFAULT_PORT = 50051


def parser() -> EnvArgumentParser:
    p = server_parser("render", DEFAULT_PORT, "OpenAI-style chat/completion requests -> GenerateRequest (CPU only)")
    p.add_argument("--served-model-name", nargs="+", default=None, help="names clients use (default: the folder name)")
    lora_modules.add_flags(p)  # the adapters a request's `model` may name (the engine loads their weights)
    p.add_argument(
        "--default-chat-template-kwargs",
        type=json.loads,
        default={},
        help="JSON object of template variables; requests' chat_template_kwargs merge over it",
    )
    p.add_argument("--trust-request-chat-template", action="store_true", help="accept a chat_template in requests")
    p.add_argument(
        "--enable-tokenizer-info-endpoint",
        action="store_true",
        help="serve vLLM's GET /tokenizer_info (the tokenizer's config and chat template), as vLLM's flag does",
    )
    p.add_argument("--max-model-len", type=int, default=None, help="context length (default: from config.json)")
    p.add_argument(
        "--chat-template-content-format",
        choices=("auto", "string", "openai"),
        default="auto",
        help="message content as a string or as text parts (auto: detect from the template)",
    )
    p.add_argument("--reasoning-parser", default="", help="reasoning parser name put in the derender context")
    p.add_argument("--tool-parser", default="", help="tool-call parser name put in the derender context")
    p.add_argument("--max-messages", type=int, default=Limits.max_messages, help="messages per conversation")
    p.add_argument("--max-prompt-tokens", type=int, default=0, help="prompt tokens (0: the model length)")
    p.add_argument(
        "--max-template-output-chars",
        type=int,
        default=Limits.max_template_output_chars,
        help="characters a template may build",
    )
    p.add_argument(
        "--template-timeout-s",
        type=float,
        default=Limits.template_timeout_s,
        help="time a request chat_template may run (compile, or one render) before its worker is killed",
    )
    p.add_argument(
        "--template-memory-mb",
        type=int,
        default=Limits.template_memory_mb,
        help="memory a request chat_template's worker process may use beyond its start-up size",
    )
    p.add_argument(
        "--template-workers", type=int, default=Limits.template_workers, help="processes for request chat_templates"
    )
    p.add_argument("--max-request-bytes", type=int, default=Limits.max_request_bytes, help="bytes per conversation")
    p.add_argument(
        "--max-batch-size", type=int, default=Limits.max_batch_size, help="conversations per RenderChatBatch"
    )
    p.add_argument(
        "--max-logprobs",
        type=sampling_rules.logprob_cap,
        default=Limits.max_logprobs,
        help="largest top-logprobs count, -1 the vocabulary (vLLM's)",
    )
    p.add_argument("--render-threads", type=int, default=0, help="threads for large renders (0: one per core)")
    p.add_argument(
        "--max-pending-renders",
        type=int,
        default=256,
        help="large renders waiting for the pool; more are refused (RESOURCE_EXHAUSTED)",
    )
    p.add_argument(
        "--max-pending-templates",
        type=int,
        default=8,
        help="renders with a request chat_template running or waiting for a sandbox worker; more are refused at "
        "once (RESOURCE_EXHAUSTED): each may take --template-timeout-s",
    )
    p.add_argument(
        "--token-cache-mb",
        type=int,
        default=64,
        help="memory for the token ids of long prompt pieces (messages) already tokenized, so a conversation's "
        "history is not tokenized again on every turn; 0 turns it off",
    )
    p.add_argument(
        "--inline-bytes",
        type=int,
        default=4096,
        help="requests smaller than this render on the event loop (a thread hop costs more)",
    )
    p.add_argument(
        "--http-port",
        type=int,
        default=-1,
        help="also serve vLLM's render routes (POST /v1/chat/completions/render, /v1/completions/render) over plain "
        "HTTP on this port, without gRPC or the gateway's transcoding (render_svc/http_face.py); 0 picks a free "
        "one, -1: off. Plaintext only: not with --tls-dir",
    )
    return p


def served_names(args) -> list[str] | None:
    names = args.served_model_name
    return names.split(",") if isinstance(names, str) else names


def limits(args) -> Limits:
    if args.template_workers < 1:
        raise SystemExit("--template-workers must be at least 1")
    return Limits(
        max_messages=args.max_messages,
        max_prompt_tokens=args.max_prompt_tokens or None,
        max_template_output_chars=args.max_template_output_chars,
        template_timeout_s=args.template_timeout_s,
        template_memory_mb=args.template_memory_mb,
        template_workers=args.template_workers,
        max_request_bytes=args.max_request_bytes,
        max_batch_size=args.max_batch_size,
        max_logprobs=args.max_logprobs,
        max_message_bytes=args.max_message_mb << 20,
    )


def options(args) -> Options:
    if not isinstance(args.default_chat_template_kwargs, dict):
        raise SystemExit("--default-chat-template-kwargs must be a JSON object")
    try:
        modules = lora_modules.parse(args.lora_modules, args.enable_lora)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    return Options(
        default_template_kwargs=args.default_chat_template_kwargs,
        lora_modules=tuple(modules),
        trust_request_chat_template=args.trust_request_chat_template,
        reasoning_parser=args.reasoning_parser,
        tool_parser=args.tool_parser,
        content_format=args.chat_template_content_format,
        token_cache_mb=args.token_cache_mb,
    )
