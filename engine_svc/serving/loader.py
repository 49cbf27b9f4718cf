"""Builds an Engine from flags: model folder (or an in-memory model), device, dtype, KV cache size, backend."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch

from engine_svc.model.attention import pick_attention
from engine_svc.model.decoder import head_dim
from engine_svc.model.family import Family, fast_path_problem
from engine_svc.model.fp8_config import fp8_scheme
from engine_svc.model.fp8_linear import fp8_device_problem, fp8_problem
from engine_svc.model.fp8_load import load_fp8
from engine_svc.model.head_dtype import apply_head_dtype
from engine_svc.model.hf_config import hf_config
from engine_svc.model.hf_runner import TransformersRunner
from engine_svc.model.kv_groups import KvGroups
from engine_svc.model.mxfp4 import checkpoint_quantization, mxfp4_problem
from engine_svc.model.mxfp4_load import load_packed
from engine_svc.model.runner import ModelRunner, kv_cache_torch_dtype
from engine_svc.model.sampler import LOGPROBS_MODES
from engine_svc.model.weights import Memory
from engine_svc.scheduling.admission import EngineLimits
from engine_svc.scheduling.block_pool import BlockPool
from engine_svc.scheduling.draft_model import DraftModel
from engine_svc.scheduling.scheduler import Scheduler, prompt_logprob_rows
from engine_svc.scheduling.speculation import Speculator, parse_speculative_config
from engine_svc.scheduling.stop_strings import StopStrings
from engine_svc.scheduling.window_pool import WindowedBlockPool
from engine_svc.serving import profiler
from engine_svc.serving.draft_loader import load_draft
from engine_svc.serving.engine import Engine
from engine_svc.serving.engine_api import EngineAPI
from engine_svc.serving.kv_hub import KvHub
from engine_svc.serving.loras import LoraRegistry, check_flags, parse_modules
from engine_svc.serving.model_facts import ModelFacts
from engine_svc.serving.openmp import release_thread_team
from engine_svc.serving.pooling import Pooler, pooling_runner, settings
from engine_svc.serving.vllm_kv_events import config as vllm_kv_config
from engine_svc.structured.compiler import GrammarCompiler
from scaleout_common import sampling_rules

log = logging.getLogger(__name__)

CPU_KV_CACHE_BYTES = 1 << 30


@dataclass
class LoadedEngine:
    engine: EngineAPI
    limits: EngineLimits
    model_name: str
    architecture: str
    dtype: str
    device: str
    backend: str
    quantization: str = ""  # "" (weights in `dtype`), "fp8" or "mxfp4" (the experts)
    kv_cache_dtype: str = ""  # "" (the cache in `dtype`) or "fp8"
    facts: ModelFacts = field(default_factory=ModelFacts)
    logprobs_mode: str = LOGPROBS_MODES[0]  # what logprobs carry (--logprobs-mode)
    head_dtype: str = ""  # the dtype the vocabulary head computes in (--head-dtype)
    pooler: Pooler | None = None  # --runner pooling: Embed is served, Generate refused (pooling.py)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def pick_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def load_hf_model(folder: Path, device, dtype, trust_remote_code: bool, packed_experts: bool = False):
    """The folder's model on `device` in `dtype`. An MXFP4 checkpoint (gpt-oss) keeps its experts 4-bit where
    `packed_experts` (the paged backend will serve it) and the fast path runs it: mxfp4_load.py. An fp8 one
    (block-wise or per-tensor) is dequantized to `dtype` as it loads (fp8_load.py); a quantization_config the
    engine cannot honour is refused (UnsupportedQuantization, naming the field)."""
    from transformers import AutoModelForCausalLM
    from transformers.utils.quantization_config import Mxfp4Config

    config = hf_config(folder, trust_remote_code)
    if fp8_scheme(config) is not None:
        return load_fp8(folder, config, dtype).to(device).eval()
    if checkpoint_quantization(config) != "mxfp4":
        model = AutoModelForCausalLM.from_pretrained(
            folder, config=config, dtype=dtype, trust_remote_code=trust_remote_code
        )
        return model.to(device).eval()
    if packed_experts and not mxfp4_problem(config) and not fast_path_problem(config):
        return load_packed(folder, device, dtype)
    # transformers widens the experts to `dtype` (never its own kernels' swizzled tensors, which the fast path
    # cannot read) and drops the declaration; kept, the engine packs them again, exactly (mxfp4.py)
    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=dtype, trust_remote_code=trust_remote_code, quantization_config=Mxfp4Config(dequantize=True)
    )
    model.config.quantization_config = config.quantization_config
    return model.to(device).eval()


def _eos_ids(model) -> list[int]:
    ids = getattr(model.generation_config, "eos_token_id", None) or model.config.eos_token_id
    if ids is None:
        return []
    return [ids] if isinstance(ids, int) else list(ids)


def _max_model_len(flag: int, model_len: int) -> int:
    """--max-model-len (0: the model's own, max_position_embeddings); longer than the model's is refused, as vLLM
    refuses it: positions past it were never trained (RoPE) or have no embedding at all."""
    if flag > model_len:
        raise ValueError(
            f"--max-model-len {flag} is longer than the model's context ({model_len}, max_position_embeddings "
            "in its config.json): pass at most that"
        )
    return flag or model_len


def _fit_to_cache(max_model_len: int, asked: bool, capacity: int) -> int:
    """The context the KV cache can hold one sequence of (`capacity` tokens): a --max-model-len it cannot hold is
    refused (as vLLM refuses it); the model's own length is lowered to it, loudly (a render service in front needs
    the same --max-model-len, or requests that leave max_tokens to it are refused on sampling_params.max_tokens)."""
    if max_model_len <= capacity:
        return max_model_len
    if asked:
        raise ValueError(
            f"--max-model-len {max_model_len}: the KV cache holds {capacity} tokens of one sequence; pass at most "
            "that, or give the cache more blocks (--num-kv-blocks, --kv-cache-memory-fraction)"
        )
    log.warning("max_model_len %d -> %d: what the KV cache holds of one sequence", max_model_len, capacity)
    return capacity


def _num_blocks(
    args, config, device, dtype, max_model_len: int, step_bytes: int, draft_bytes: int = 0, groups=None
) -> tuple[int, int]:
    """KV blocks (the main group's, the sliding-window layers' own: 0 with one group, kv_groups.py): as many as
    the flags ask, else (CUDA) the given share of the memory left once the model is loaded and the largest step's
    `step_bytes` are set aside, all of it: more blocks than max_num_seqs full sequences need keep more prefixes
    cached (as vLLM sizes its cache by memory); else (CPU) a fixed budget, at most what max_num_seqs full
    sequences need. `draft_bytes`: a draft model's cache bytes per block (its cache has as many main blocks)."""
    groups = groups or KvGroups(full_layers=config.num_hidden_layers)
    if args.num_kv_blocks:
        return groups.given(args.num_kv_blocks)
    layer_bytes = (
        ModelRunner.kv_bytes_per_block(config, args.block_size, kv_cache_torch_dtype(args.kv_cache_dtype, dtype))
        // config.num_hidden_layers
    )
    wanted = args.max_num_seqs * -(-max_model_len // args.block_size) + 1
    if device.type == "cuda":
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info(device)
        budget = int(max(0, free - step_bytes) * args.kv_cache_memory_fraction)
        return groups.split(budget, layer_bytes, extra_bytes=draft_bytes, wanted=wanted, cap=False)
    return groups.split(CPU_KV_CACHE_BYTES, layer_bytes, extra_bytes=draft_bytes, wanted=wanted, cap=True)


def build_engine(
    hf_model,
    args,
    *,
    model_name: str,
    tokenizer_fingerprint: str = "",
    grammar_backend=None,
    owns_model=False,
    stop_strings: StopStrings | None = None,
    model_path: str = "",
) -> LoadedEngine:
    """Wrap a loaded transformers model in an engine according to the flags; `grammar_backend` (it needs the
    tokenizer's vocabulary) enables structured outputs, `stop_strings` (the tokenizer's) stop strings; `model_path`
    is where the model was loaded from (GetModelInfo, GetTokenizer). `owns_model`: nothing else uses `hf_model`,
    so the fast path takes its decoder layers away one by one as it fuses them: loading peaks one layer above the
    model, and the unfused weights (under --quantization fp8, every bf16 projection) leave memory to the KV cache."""
    config = hf_model.config
    facts = ModelFacts.of(hf_model, model_path)  # before the fast path consumes the model
    device = next(hf_model.parameters()).device
    dtype = next(hf_model.parameters()).dtype
    head_dtype = apply_head_dtype(hf_model, args.head_dtype)
    max_model_len = _max_model_len(args.max_model_len, config.max_position_embeddings)
    backend = args.backend
    pooler = settings(args, config)
    if pooler is not None:  # its decoder runs without the paged cache (pooling.py)
        if backend == "paged":
            raise ValueError("--backend paged: a pooling engine (--runner pooling) runs the transformers backend")
        backend = "transformers"
    if backend == "auto":
        backend = "transformers" if fast_path_problem(config) else "paged"
    elif backend == "paged" and (problem := fast_path_problem(config)):
        raise ValueError(f"--backend paged: {problem}")
    max_batched_tokens = args.max_num_batched_tokens or (8192 if device.type == "cuda" else 2048)
    speculative = parse_speculative_config(args.speculative_config)  # refused before anything loads
    profiling = profiler.parse(getattr(args, "profiler_config", ""))
    if args.per_request_spec_decode_metrics != "none" and speculative is None:
        raise ValueError(  # vLLM's words
            "--per-request-spec-decode-metrics requires speculative decoding to be enabled (via --speculative-config)."
        )
    quantization = _check_quantization_flags(args, backend, config, device, dtype)
    lora_modules = parse_modules(args)  # refused before the model is fused
    lora = check_flags(args, backend, quantization)
    decode_steps = args.decode_steps or (32 if device.type == "cuda" else 1)
    runner: ModelRunner | TransformersRunner
    if backend == "paged":
        runner = ModelRunner(
            hf_model,
            block_size=args.block_size,
            num_blocks=0,  # sized below, once the model's own memory is known
            max_num_seqs=args.max_num_seqs,
            max_model_len=max_model_len,
            cuda_graphs=not args.no_cuda_graphs,
            compile_kernels=device.type == "cuda" and not args.no_compile,
            attention=pick_attention(args.attention, device, head_dim(config)),
            mixed_step_graphs_up_to=0 if args.no_mixed_step_graphs else max_batched_tokens,
            quantization=quantization,
            kv_cache_dtype=args.kv_cache_dtype,
            consume_model=owns_model,
            lora=lora,
        )
        log.info("engine: decode attention %s", runner.attention)
        try:
            step_bytes = 0 if args.num_kv_blocks else runner.step_peak_bytes(max_batched_tokens, args.max_num_seqs)
        except torch.cuda.OutOfMemoryError as error:
            raise RuntimeError(
                f"a step of {max_batched_tokens} tokens does not fit beside the model: "
                "lower --max-num-batched-tokens or --max-num-seqs"
            ) from error
        if not (args.no_cuda_graphs or args.no_mixed_step_graphs):
            step_bytes *= 2  # the captured steps' own pool holds the largest bucket's activations besides
        draft, draft_bytes = _draft(speculative, args, config, device, dtype, max_model_len, model_path)
        groups = KvGroups(full_layers=config.num_hidden_layers)
        if not args.disable_hybrid_kv_cache_manager:
            groups = KvGroups.of(
                Family.of(config).windows,
                block_size=args.block_size,
                max_model_len=max_model_len,
                max_num_seqs=args.max_num_seqs,
                step_tokens=max_batched_tokens,
                lookahead=decode_steps + (speculative.num_speculative_tokens if speculative else 0),
            )
        num_blocks, window_blocks = _num_blocks(
            args, config, device, dtype, max_model_len, step_bytes, draft_bytes, groups
        )
        runner.allocate_kv(num_blocks, window_blocks)
        runner.warm_up()
    else:
        runner = TransformersRunner(hf_model)
        draft, draft_bytes = _draft(speculative, args, config, device, dtype, max_model_len, model_path)
        num_blocks, window_blocks = _num_blocks(args, config, device, dtype, max_model_len, 0, draft_bytes)
    if isinstance(draft, ModelRunner):
        draft.allocate_kv(num_blocks)
        draft.warm_up()
    max_model_len = _fit_to_cache(max_model_len, bool(args.max_model_len), (num_blocks - 1) * args.block_size)
    caching = runner.kv_in_pool_blocks and not args.no_prefix_caching
    pool = (
        WindowedBlockPool(num_blocks, args.block_size, runner.window_group, window_blocks, caching=caching)
        if isinstance(runner, ModelRunner) and runner.window_group
        else BlockPool(num_blocks, args.block_size, caching=caching)
    )
    if isinstance(pool, WindowedBlockPool) and getattr(args, "kv_role", "both") != "both":
        raise ValueError(
            f"--kv-role {args.kv_role}: this model's sliding-window layers keep a KV pool of their own, which P/D "
            "handoffs do not carry (add --disable-hybrid-kv-cache-manager)"
        )
    scheduler = Scheduler(pool, args.max_num_seqs, max_batched_tokens, prompt_logprob_rows(config.vocab_size))
    registry = None
    if isinstance(runner, ModelRunner) and runner.loras is not None:
        registry = LoraRegistry(runner.loras, args, at_start=len(lora_modules))
        for module in lora_modules:
            registry.load(module.name, module.path, module.base_model_name)
        scheduler.max_loras = args.max_loras
    grammars = None
    if grammar_backend is not None:
        grammars = GrammarCompiler(
            grammar_backend,
            tokenizer_fingerprint or f"vocab-{grammar_backend.vocab_size}",
            timeout_s=args.grammar_compile_timeout_s,
            max_grammar_bytes=args.max_grammar_bytes,
            cache_bytes=args.grammar_cache_mb << 20,
            threads=args.grammar_compile_threads,
            cache=not args.no_grammar_cache,
        )
        grammar_backend.warm_up(device)
    engine = Engine(
        runner,
        scheduler,
        max_model_len=max_model_len,
        max_waiting=args.max_waiting,
        stall_timeout_s=args.stall_timeout_s,
        decode_steps=decode_steps,
        grammars=grammars,
        admission_window_s=args.admission_window_ms / 1e3,
        stop_strings=stop_strings,
        logprobs_mode=args.logprobs_mode,
    )
    engine.kv_events = kv_hub(pool, args)
    engine.loras = registry
    if profiling is not None:
        engine.profiler = profiler.StepProfiler(profiling, cuda=device.type == "cuda")
    if speculative:
        drafter = DraftModel(draft) if draft is not None else None
        engine.speculator = Speculator(speculative, max_model_len, drafter, args.per_request_spec_decode_metrics)
        if draft is not None:
            engine.controls.draft_memory = Memory(draft)
    temperature = getattr(hf_model.generation_config, "temperature", None)
    do_sample = getattr(hf_model.generation_config, "do_sample", False)
    limits = EngineLimits(
        vocab_size=config.vocab_size,
        max_model_len=max_model_len,
        eos_token_ids=_eos_ids(hf_model),
        tokenizer_fingerprint=tokenizer_fingerprint,
        default_temperature=float(temperature) if do_sample and temperature is not None else 1.0,
        max_n=args.max_num_seqs,
        max_logprobs=sampling_rules.whole_vocab_cap(args.max_logprobs, config.vocab_size),
        default_stream_interval=args.stream_interval,
        structured_outputs=grammars is not None,
        stop_strings=stop_strings is not None,
        max_grammar_bytes=args.max_grammar_bytes,
        grammar_timeout_s=args.grammar_compile_timeout_s,
        max_message_bytes=args.max_message_mb << 20,
        loras=dict(registry.cards) if registry is not None else None,
    )
    log.info(
        "engine: %s backend=%s device=%s dtype=%s quantization=%s kv_cache_dtype=%s kv_blocks=%d x %d "
        "window_kv_blocks=%d max_model_len=%d decode_steps=%d prefix_caching=%s",
        model_name,
        backend,
        device,
        dtype,
        quantization,
        args.kv_cache_dtype,
        num_blocks,
        args.block_size,
        window_blocks,
        max_model_len,
        decode_steps,
        pool.caching,
    )
    if pooler is not None:
        pooler = Pooler(hf_model, pooler, model_name=model_name, limits=limits, args=args)
    release_thread_team()  # this thread is done with torch's parallel ops; the step thread runs them (openmp.py)
    return LoadedEngine(
        engine,
        limits,
        model_name,
        (config.architectures or [config.model_type])[0],
        str(dtype).removeprefix("torch."),
        str(device),
        backend,
        "" if quantization == "none" else quantization,
        "" if args.kv_cache_dtype == "auto" else args.kv_cache_dtype,
        facts,
        args.logprobs_mode,
        head_dtype,
        pooler,
    )


def _draft(speculative, args, config, device, dtype, max_model_len: int, model_path: str):
    """The draft model's runner and its cache's bytes per block, with method "draft_model"; else (None, 0)."""
    if speculative is None or speculative.method != "draft_model":
        return None, 0
    return load_draft(speculative, args, config, device, dtype, max_model_len, model_path, load_hf_model)


def kv_hub(pool: BlockPool, args) -> KvHub | None:
    """The KV-event hub of this pool when --kv-events or --kv-events-config asks for one (with vLLM's ZMQ
    publisher when that config enables it), started here, in the process that owns the pool."""
    config = vllm_kv_config.parse(getattr(args, "kv_events_config", ""))
    if not (getattr(args, "kv_events", False) or config.enable_kv_cache_events):
        return None
    hub = KvHub(pool.block_size, config.buffer_steps)
    pool.events = hub
    if config.zmq:
        from engine_svc.serving.vllm_kv_events.publisher import ZmqPublisher

        ZmqPublisher(hub, config)
    return hub


def _check_quantization_flags(args, backend: str, config, device: torch.device, dtype: torch.dtype) -> str:
    """The weights' quantization the model runs with: --quantization's, else (none, or the checkpoint's own method
    named) the checkpoint's where the fast path runs it (mxfp4: gpt-oss's experts; fp8, compressed-tensors' fp8
    included: the projections, else the dequantized weights in `dtype`, said in the log), as vLLM takes it from
    quantization_config and refuses another method. --quantization fp8 and --kv-cache-dtype fp8: the paged backend
    only, and only where e4m3 runs; mxfp4: the paged backend, a gpt-oss."""
    method = checkpoint_quantization(config)  # the checkpoint's quant_method: fp8, compressed-tensors, mxfp4 or ""
    if (method or args.quantization == "compressed-tensors") and args.quantization not in ("none", method):
        raise ValueError(
            f"--quantization {args.quantization}: the checkpoint's quantization_config declares {method or 'none'} "
            "(vLLM refuses a quantization method unlike the checkpoint's too)"
        )
    requested = "none" if args.quantization == "compressed-tensors" else args.quantization  # the checkpoint's
    quantized, fp8_cache = requested != "none", args.kv_cache_dtype != "auto"
    for flag, value, on in (("--quantization", requested, quantized),
                            ("--kv-cache-dtype", args.kv_cache_dtype, fp8_cache)):  # fmt: skip
        if on and backend != "paged":
            raise ValueError(f"{flag} {value} needs the paged backend (the fast-path families)")
    problem = mxfp4_problem if requested == "mxfp4" else lambda config: fp8_problem(config, device, dtype)
    if quantized and (reason := problem(config)):
        raise ValueError(f"--quantization {requested}: {reason}")
    if fp8_cache and (reason := fp8_device_problem(device)):
        raise ValueError(f"--kv-cache-dtype {args.kv_cache_dtype}: float8 caches {reason}")
    if method == "mxfp4" and backend == "paged" and not mxfp4_problem(config):
        return "mxfp4"
    if requested == "none" and fp8_scheme(config) is not None:
        if why := "the transformers backend" if backend != "paged" else fp8_problem(config, device, dtype):
            log.warning("the checkpoint's fp8 weights serve dequantized to %s (%s)", dtype, why)
            return "none"
        return "fp8"
    return requested


def load_engine(args) -> LoadedEngine:
    from scaleout_common.models import load_tokenizer, model_name, resolve_model, tokenizer_fingerprint

    folder = resolve_model(args.model)
    device = pick_device(args.device)
    packed = args.backend != "transformers" and not pooling_runner(args) and args.quantization in ("none", "mxfp4")
    hf_model = load_hf_model(folder, device, pick_dtype(args.dtype, device), args.trust_remote_code, packed)
    fingerprint, grammar_backend, stop_strings = "", None, None
    if (folder / "tokenizer.json").is_file() or (folder / "tokenizer_config.json").is_file():
        tokenizer = load_tokenizer(folder, args.trust_remote_code, args.chat_template)
        fingerprint = tokenizer_fingerprint(tokenizer)
        grammar_backend = make_grammar_backend(tokenizer, hf_model.config.vocab_size, args)
        stop_strings = StopStrings.of(tokenizer)
    return build_engine(
        hf_model,
        args,
        model_name=model_name(folder),
        tokenizer_fingerprint=fingerprint,
        grammar_backend=grammar_backend,
        owns_model=True,
        stop_strings=stop_strings,
        model_path=str(folder),
    )


def make_grammar_backend(tokenizer, vocab_size: int, args):
    """Structured outputs' backend for this tokenizer (None when turned off)."""
    if args.structured_outputs_backend == "none":
        return None
    from engine_svc.structured.xgrammar_backend import XGrammarBackend

    if args.structured_outputs_backend == "xgrammar":
        return XGrammarBackend.from_hf(tokenizer, vocab_size, threads=args.grammar_compile_threads)
    from engine_svc.structured.dual_backend import DualBackend

    return DualBackend.from_hf(tokenizer, vocab_size, threads=args.grammar_compile_threads)


def core_in_child_process(args) -> bool:
    """Whether the step loop runs in a child process (auto: on CUDA, where the GIL would set the pace; not for a
    P/D role, whose KV steps need the cache in the server's process: kv_transfer/peer.py)."""
    if args.engine_core != "auto" or args.api_servers > 1:
        return args.engine_core != "thread"
    if getattr(args, "kv_role", "both") != "both" or pooling_runner(args):
        return False  # the pooler runs in the server's process, beside the model it holds
    return args.device.startswith("cuda") or (args.device == "auto" and torch.cuda.is_available())
