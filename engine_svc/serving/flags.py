"""The engine's command-line flags (vLLM's names where vLLM has the knob); loader.py builds the engine from them."""

from __future__ import annotations

from engine_svc.model.head_dtype import HEAD_DTYPES
from engine_svc.model.sampler import LOGPROBS_MODES
from engine_svc.scheduling.speculation import PER_REQUEST
from engine_svc.serving import loras, pooling, profiler, queue_budget
from engine_svc.serving.kv_transfer import peer as kv_peer
from engine_svc.serving.vllm_kv_events import config as vllm_kv_config
from scaleout_common import sampling_rules, structured_output_rules


def add_engine_flags(parser) -> None:
    pooling.add_flags(parser)  # --runner, --convert, --pooler-config
    loras.add_flags(parser)  # --enable-lora, --lora-modules, --max-loras, --max-lora-rank, --max-cpu-loras
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument(
        "--dtype", default="auto", help="auto (bf16 on CUDA, float32 on CPU) | float32 | bfloat16 | float16"
    )
    parser.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "paged", "transformers"],
        help="model runner: paged (fast path: Llama, Mistral, Qwen2/3, Qwen3 MoE, Gemma 2/3, gpt-oss) or "
        "transformers (any causal LM)",
    )
    parser.add_argument(
        "--quantization",
        "-q",
        default="none",
        choices=["none", "fp8", "mxfp4", "compressed-tensors"],
        help="fp8: the layers' projections in float8 e4m3, per-row scales (CUDA: Ada or Hopper; the paged backend); "
        "mxfp4: a gpt-oss's experts in MXFP4, widened to bf16 inside the grouped GEMM (the paged backend); none: "
        "the checkpoint's (its quantization_config's fp8, compressed-tensors fp8 or mxfp4, as vLLM takes it; a "
        "method unlike the checkpoint's is refused); compressed-tensors: only the checkpoint's own, as none",
    )
    parser.add_argument(
        "--kv-cache-dtype",
        default="auto",
        choices=["auto", "fp8"],
        help="fp8: keys and values cached as float8 e4m3, unscaled (half the bytes a token: twice the tokens, "
        "half the attention's reads; the paged backend); auto: the model's dtype",
    )
    parser.add_argument(
        "--logprobs-mode",
        default=LOGPROBS_MODES[0],
        choices=LOGPROBS_MODES,
        help="what logprobs carry (vLLM's flag): raw_* the model's, before any logits processor; processed_* "
        "what each token was drawn from (after penalties, temperature, top-k/top-p, min_p); *_logits the values "
        "before the log-softmax",
    )
    parser.add_argument(
        "--head-dtype",
        default="model",
        choices=HEAD_DTYPES,
        help="float32: the vocabulary head in float32 (vLLM's head_dtype override; RL trainers' logprobs); "
        "model: the model's dtype",
    )
    parser.add_argument("--max-num-seqs", type=int, default=256, help="most sequences running at once")
    parser.add_argument(
        "--max-logprobs",
        type=sampling_rules.logprob_cap,
        default=sampling_rules.MAX_LOGPROBS,
        help="most top alternatives a request's logprobs or prompt_logprobs may ask for, -1 the vocabulary "
        "(vLLM's flag and default; "
        "render's --max-logprobs and derender's --max-top-logprobs bound the same counts)",
    )
    parser.add_argument(
        "--max-waiting", type=int, default=1024, help="most sequences waiting; beyond: RESOURCE_EXHAUSTED"
    )
    queue_budget.add_flag(parser)
    parser.add_argument(
        "--max-num-batched-tokens",
        type=int,
        default=0,
        help="tokens per step (prefill chunk budget); 0: 8192 on CUDA, 2048 on CPU",
    )
    parser.add_argument("--block-size", type=int, default=16, help="tokens per KV cache block")
    vllm_kv_config.add_flags(parser)
    profiler.add_flags(parser)
    kv_peer.add_flags(parser)
    parser.add_argument(
        "--num-kv-blocks",
        type=int,
        default=0,
        help="KV cache blocks (0: size from free memory); of a model whose sliding-window layers have their own "
        "pool, the full-attention layers' (the windowed ones get what max-num-seqs windows need)",
    )
    parser.add_argument(
        "--disable-hybrid-kv-cache-manager",
        action="store_true",
        help="vLLM's flag: sliding-window layers keep every block in the one pool, as full-attention ones do "
        "(default: a pool of their own that frees what leaves the window, engine_svc/model/kv_groups.py)",
    )
    parser.add_argument(
        "--kv-cache-memory-fraction",
        type=float,
        default=0.8,
        help="CUDA: share of free memory after loading given to the KV cache",
    )
    parser.add_argument("--max-model-len", type=int, default=0, help="tokens per sequence (0: the model's)")
    parser.add_argument(
        "--stream-interval", type=int, default=1, help="tokens per streamed message when the request says none"
    )
    parser.add_argument(
        "--decode-steps",
        type=int,
        default=0,
        choices=range(33),
        metavar="0..32",
        help="decode steps queued back to back while no request is prefilling (the device runs one "
        "step ahead of the host; a run also ends once new requests have waited --admission-window-ms); "
        "0: 32 on CUDA, 1 on CPU",
    )
    parser.add_argument(
        "--speculative-config",
        default="",
        help='vLLM\'s speculative decoding config (JSON): n-gram lookup {"method": "ngram", '
        '"num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}, or a draft model of the '
        'same tokenizer {"method": "draft_model", "model": "<folder>", "num_speculative_tokens": 4} '
        "(docs/speculative.md)",
    )
    parser.add_argument(
        "--per-request-spec-decode-metrics",
        default="none",
        choices=PER_REQUEST,
        help="vLLM's flag: each choice's final message reports its verify steps (engine.proto SpeculationCounts: "
        "steps by drafts accepted, drafts proposed; `detailed` also each step's), served as vLLM's "
        "metrics.speculative_decoding; needs --speculative-config",
    )
    parser.add_argument(
        "--admission-window-ms",
        type=float,
        default=5.0,
        help="how long new requests may wait for a decode run to end: requests that arrive within it share "
        "one prefill step (fewer broken runs) at the cost of up to this much TTFT",
    )
    parser.add_argument(
        "--engine-core",
        default="auto",
        choices=["auto", "thread", "process"],
        help="where the step loop runs: a thread of the server, or a child process that never waits "
        "for the server's GIL; auto: process on CUDA, thread on CPU and for a P/D --kv-role",
    )
    parser.add_argument(
        "--api-servers",
        type=int,
        default=1,
        help="gRPC server processes on the one port over the one engine core (the core runs in a process): "
        "more take bursts of new calls faster (engine_svc/serving/api_servers.py)",
    )
    parser.add_argument(
        "--engine-id",
        default="",
        help="this replica's `engine` label on its vllm: series (default: host:port it serves, the machine's name "
        "for a wildcard host)",
    )
    parser.add_argument(
        "--attention",
        default="auto",
        choices=["auto", "sdpa", "triton"],
        help="decode attention of the paged backend: triton (paged kernel, CUDA) or sdpa; auto: "
        "triton on CUDA when available",
    )
    parser.add_argument(
        "--no-prefix-caching",
        action="store_true",
        help="turn automatic prefix caching off (it is on for the paged backend: full KV blocks are kept "
        "and shared by prompts that start with the same tokens and cache_salt)",
    )
    parser.add_argument(
        "--structured-outputs-backend",
        default="auto",
        choices=["auto", "xgrammar", "none"],
        help="grammar engine for structured outputs (JSON schema, regex, choice, grammar); auto: xgrammar, and "
        "llguidance for the JSON schemas xgrammar cannot enforce in full (engine_svc/structured/dual_backend.py); "
        "none: refuse them",
    )
    parser.add_argument(
        "--grammar-compile-timeout-s",
        type=float,
        default=structured_output_rules.COMPILE_TIMEOUT_S,
        help="longest a request waits for its grammar to compile; longer is GRAMMAR_TOO_COMPLEX",
    )
    parser.add_argument(
        "--max-grammar-bytes",
        type=int,
        default=structured_output_rules.MAX_GRAMMAR_BYTES,
        help="largest schema, regex or grammar a request may send (GRAMMAR_TOO_COMPLEX beyond)",
    )
    parser.add_argument("--grammar-cache-mb", type=int, default=512, help="compiled grammars kept (LRU), in MiB")
    parser.add_argument("--grammar-compile-threads", type=int, default=2, help="threads compiling grammars")
    parser.add_argument(
        "--no-grammar-cache", action="store_true", help="compile every constrained request's grammar anew (benches)"
    )
    parser.add_argument("--no-cuda-graphs", action="store_true", help="run every step eagerly on CUDA")
    parser.add_argument(
        "--no-mixed-step-graphs",
        action="store_true",
        help="run mixed and prefill steps eagerly on CUDA (default: piecewise graphs up to the step budget, 16,384 tokens at most)",
    )
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="CUDA: skip torch.compile of the fused elementwise kernels (faster start, slower steps)",
    )
    parser.add_argument(
        "--stall-timeout-s",
        type=float,
        default=60.0,
        help="readiness turns NOT_SERVING when work is pending and no step finished for this long",
    )
