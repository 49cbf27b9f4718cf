"""Pooling: an engine started with `--runner pooling` embeds (EngineService.Embed) instead of generating.

The flags are vLLM 0.33's, each value honoured or refused at start naming it:
- `--runner auto|generate|pooling`: auto is generate, unless `--convert embed` asks for pooling (vLLM's rule for a
  causal LM; it also reads a Sentence Transformers folder's pooling config, which this engine does not: pass
  `--runner pooling`). A generate engine answers Embed NOT_FOUND (ROUTE_NOT_ENABLED), as a vLLM server that
  generates serves no `/v1/embeddings`; a pooling engine refuses Generate the same way (service.py).
- `--convert auto|none|embed`: a pooling runner over a causal LM converts it into an embedding model (auto: embed);
  `classify` is refused, as is `embed` on a generate runner (vLLM's runner/convert table).
- `--pooler-config` JSON: `pooling_type` or `seq_pooling_type` LAST (the default: vLLM's decoder-LM conversion),
  MEAN or CLS; `use_activation` (default true: L2-normalize); `dimensions` (the default width of a Matryoshka
  model's vectors); `task` "embed"; `normalize` refused as vLLM refuses it. Token-wise pooling, chunked processing,
  `max_embed_len` and the classifier's and reward models' keys are refused by name.

The work: a request's inputs run through the transformers model's decoder (its base model, final norm applied, no
vocabulary head) on one worker thread, in right-padded batches of at most --max-num-batched-tokens padded tokens
(shortest first: a causal model's real tokens never attend to the padding after them, so a padded row computes
what it computes alone). Requests wait in priority order (lower first, then arrival), at most --max-waiting of
them (QUEUE_FULL beyond); one whose caller left is dropped before it runs. The inputs waiting and being pooled
count as the engine's sequences waiting and running (counted_load: GetLoad, the vllm: gauges, /get_load).
Pooling, the Matryoshka cut and the norm are computed in float32. The paged fast path is not used: its attention
needs KV blocks from the scheduler's pool, and a pooling engine keeps no KV cache (loader.py serves it with the
transformers backend).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
from dataclasses import dataclass

import torch

from scaleout.v1 import engine_pb2
from scaleout_common import sampling_rules
from scaleout_common.errors import QUOTE_CHARS, clip
from scaleout_common.reasons import Reason, fail

RUNNERS = ("auto", "generate", "pooling")
CONVERTS = ("auto", "none", "embed", "classify")
SEQ_POOLING_TYPES = ("LAST", "MEAN", "CLS")
# --pooler-config keys at the value that changes nothing for sequence embeddings (vLLM's defaults).
NO_OP_KEYS = {"enable_chunked_processing": (False,), "enable_flash_late_interaction": (True,)}


def add_flags(parser) -> None:
    parser.add_argument(
        "--runner",
        default="auto",
        choices=RUNNERS,
        help="vLLM's runner: generate, or pooling (EngineService.Embed, OpenAI's /v1/embeddings; Generate refused); "
        "auto: generate unless --convert embed",
    )
    parser.add_argument(
        "--convert",
        default="auto",
        choices=CONVERTS,
        help="vLLM's model conversion: embed (a causal LM pooled into embeddings; auto with --runner pooling), "
        "none; classify is refused",
    )
    parser.add_argument(
        "--pooler-config",
        default="",
        help='vLLM\'s pooler config as JSON, e.g. {"pooling_type": "MEAN", "use_activation": false}: pooling_type '
        "(or seq_pooling_type) LAST (default), MEAN or CLS; use_activation (default true: L2-normalized); "
        "dimensions (a Matryoshka model's default width); task embed",
    )


@dataclass(frozen=True)
class PoolerSettings:
    seq_pooling_type: str = "LAST"
    use_activation: bool = True
    dimensions: int | None = None  # the default Matryoshka width (None: the whole vector)


def _runner(args) -> str:
    runner, convert = getattr(args, "runner", "auto"), getattr(args, "convert", "auto")
    if convert == "classify":
        raise ValueError("--convert classify: this engine pools embeddings only (--convert embed)")
    if runner == "auto":
        runner = "pooling" if convert == "embed" else "generate"
    if runner == "generate" and convert == "embed":
        raise ValueError("--convert embed needs --runner pooling (vLLM's table: a generate runner converts nothing)")
    return runner


def pooling_runner(args) -> bool:
    """Whether the flags ask for a pooling engine (refusing a runner/convert pair vLLM refuses)."""
    return _runner(args) == "pooling"


def settings(args, config) -> PoolerSettings | None:
    """The pooler the flags ask for (None: a generate engine); a value it cannot honour is refused, named."""
    text = getattr(args, "pooler_config", "")
    if not pooling_runner(args):
        if text:
            raise ValueError("--pooler-config needs --runner pooling")
        return None
    try:
        given = json.loads(text) if text else {}
    except json.JSONDecodeError as error:
        raise ValueError(f"--pooler-config is not JSON: {error}") from None
    if not isinstance(given, dict):
        raise ValueError("--pooler-config must be a JSON object")
    given = {key: value for key, value in given.items() if value is not None}
    if "normalize" in given:  # vLLM's words
        raise ValueError("--pooler-config: Parameter `normalize` was removed; use `use_activation` instead.")
    if given.pop("task", "embed") != "embed":
        raise ValueError("--pooler-config task: this engine pools for the embed task only")
    if "pooling_type" in given and "seq_pooling_type" in given:
        raise ValueError("--pooler-config: Cannot set both `pooling_type` and `seq_pooling_type`")
    kind = given.pop("pooling_type", None) or given.pop("seq_pooling_type", "LAST")
    if kind not in SEQ_POOLING_TYPES:
        raise ValueError(
            f"--pooler-config pooling_type {clip(str(kind), QUOTE_CHARS)}: not supported (sequence pooling only: "
            "LAST, MEAN or CLS)"
        )
    activation = given.pop("use_activation", True)
    if not isinstance(activation, bool):
        raise ValueError("--pooler-config use_activation must be a boolean")
    dimensions = given.pop("dimensions", None)
    for key, values in NO_OP_KEYS.items():
        if key in given and given.pop(key) not in values:
            raise ValueError(f"--pooler-config {key}: only {json.dumps(values[0])} is supported")
    if given:
        raise ValueError(f"--pooler-config {', '.join(sorted(given))}: not supported by this engine's pooler")
    if dimensions is not None:
        try:
            check_dimensions(dimensions, config, "the model", "dimensions")
        except Exception as error:
            raise ValueError(f"--pooler-config dimensions: {error}") from None
    return PoolerSettings(kind, activation, dimensions)


def check_dimensions(dimensions, config, model: str, field: str) -> None:
    """vLLM's rule for `dimensions`: a Matryoshka model only (its config's matryoshka_dimensions or is_matryoshka),
    in [1, hidden_size] and, where the config lists them, one of its dimensions; vLLM's words."""
    named = getattr(config, "matryoshka_dimensions", None)
    if not (named or getattr(config, "is_matryoshka", False)):
        raise fail(
            Reason.UNSUPPORTED_FIELD,
            f"Model {model!r} does not support Matryoshka embeddings; dimensions must be unset "
            f"(received dimensions={dimensions}).",
            field,
        )
    size = config.hidden_size
    if not isinstance(dimensions, int) or not 1 <= dimensions <= size:
        raise fail(
            Reason.INVALID_REQUEST,
            f"Model {model!r} only supports dimensions in range [1, {size}], got {dimensions}.",
            field,
        )
    if named and dimensions not in named:
        raise fail(
            Reason.INVALID_REQUEST,
            f"Model {model!r} only supports Matryoshka dimensions {named}, got {dimensions}.",
            field,
        )


@dataclass
class _Job:
    inputs: list[list[int]]
    dimensions: int | None
    activation: bool
    done: asyncio.Future


class Pooler:
    """Embeds token sequences with a transformers causal LM's decoder (see the module docstring)."""

    def __init__(self, hf_model, settings: PoolerSettings, *, model_name: str, limits, args):
        self.decoder = hf_model.get_decoder()  # the base model: its output is after the final norm
        self.device = next(hf_model.parameters()).device
        self.config = hf_model.config
        self.settings = settings
        self.model_name = model_name
        self.limits = limits  # EngineLimits: vocabulary, context, tokenizer fingerprint
        self.max_model_len = limits.max_model_len
        self.max_waiting = args.max_waiting
        self.batch_tokens = args.max_num_batched_tokens or (8192 if self.device.type == "cuda" else 2048)
        self._heap: list[tuple[int, int, _Job]] = []
        self._order = itertools.count()
        self.waiting = 0  # inputs queued (a request's inputs each count, as vLLM counts its pooling requests)
        self.running = 0  # inputs of the request being pooled
        self._ready = asyncio.Event()
        self._worker: asyncio.Task | None = None

    def _check(self, request: engine_pb2.EmbedRequest) -> list[list[int]]:
        fingerprint = self.limits.tokenizer_fingerprint
        if fingerprint and request.tokenizer_fingerprint and request.tokenizer_fingerprint != fingerprint:
            raise fail(
                Reason.TOKENIZER_MISMATCH,
                f"request rendered for tokenizer {request.tokenizer_fingerprint}, this engine serves {fingerprint}",
            )
        if not request.inputs:
            raise fail(Reason.EMPTY_PROMPT, "inputs must hold at least one token sequence", "inputs")
        inputs = []
        for i, sequence in enumerate(request.inputs):
            ids, field = list(sequence.token_ids), f"inputs[{i}].token_ids"
            if not ids:
                raise fail(Reason.EMPTY_PROMPT, f"{field} must not be empty", field)
            sampling_rules.check_token_ids(ids, self.limits.vocab_size, field)
            if len(ids) > self.max_model_len:
                raise fail(
                    Reason.PROMPT_TOO_LONG,  # vLLM's words for a pooling request
                    f"This model's maximum context length is {self.max_model_len} tokens. However, your prompt "
                    f"contains {len(ids)} input tokens, which exceeds this limit even without any output tokens. "
                    "Please reduce the length of the input prompt.",
                    field,
                )
            inputs.append(ids)
        return inputs

    async def embed(self, request: engine_pb2.EmbedRequest, request_id: str) -> engine_pb2.EmbedResponse:
        inputs = self._check(request)
        dimensions = request.dimensions if request.HasField("dimensions") else self.settings.dimensions
        if dimensions is not None:
            check_dimensions(dimensions, self.config, self.model_name, "dimensions")
        activation = request.use_activation if request.HasField("use_activation") else self.settings.use_activation
        if len(self._heap) >= self.max_waiting:
            raise fail(Reason.QUEUE_FULL, f"{len(self._heap)} embedding requests are waiting already")
        job = _Job(inputs, dimensions, activation, asyncio.get_running_loop().create_future())
        heapq.heappush(self._heap, (request.priority, next(self._order), job))
        self.waiting += len(inputs)
        if self._worker is None:
            self._worker = asyncio.create_task(self._work())
        self._ready.set()
        vectors = await job.done  # the caller's cancellation cancels the future: the worker skips the job
        response = engine_pb2.EmbedResponse(request_id=request_id, prompt_tokens=sum(map(len, inputs)))
        for row in vectors.tolist():
            response.embeddings.add().values.extend(row)
        return response

    async def _work(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            while self._heap:
                job = heapq.heappop(self._heap)[2]
                self.waiting -= len(job.inputs)
                if job.done.done():
                    continue
                self.running = len(job.inputs)
                try:
                    vectors = await asyncio.to_thread(self.vectors, job.inputs, job.dimensions, job.activation)
                except Exception as error:  # handed to the caller, whose servicer reports it
                    if not job.done.done():
                        job.done.set_exception(error)
                    continue
                finally:
                    self.running = 0
                if not job.done.done():
                    job.done.set_result(vectors)

    def _batches(self, order: list[int], lengths: list[int]) -> list[list[int]]:
        """`order` (shortest first) cut into batches of at most `batch_tokens` padded tokens (one row at least)."""
        batches: list[list[int]] = []
        for i in order:
            if batches and (len(batches[-1]) + 1) * lengths[i] <= self.batch_tokens:
                batches[-1].append(i)
            else:
                batches.append([i])
        return batches

    @torch.inference_mode()
    def vectors(self, inputs: list[list[int]], dimensions: int | None, activation: bool) -> torch.Tensor:
        """One float32 vector per input, in order, on the CPU."""
        lengths = [len(ids) for ids in inputs]
        out: list[torch.Tensor] = [torch.empty(0)] * len(inputs)
        for batch in self._batches(sorted(range(len(inputs)), key=lengths.__getitem__), lengths):
            width = max(lengths[i] for i in batch)
            ids = torch.zeros(len(batch), width, dtype=torch.long)
            mask = torch.zeros(len(batch), width, dtype=torch.long)
            for row, i in enumerate(batch):
                ids[row, : lengths[i]] = torch.tensor(inputs[i])
                mask[row, : lengths[i]] = 1
            hidden = self.decoder(
                input_ids=ids.to(self.device), attention_mask=mask.to(self.device), use_cache=False
            ).last_hidden_state.float()
            pooled = self._pool(hidden, mask.to(self.device))
            if dimensions is not None:
                pooled = pooled[:, :dimensions]
            if activation:
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
            for row, i in enumerate(batch):
                out[i] = pooled[row].cpu()
        return torch.stack(out)

    def _pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        kind = self.settings.seq_pooling_type
        if kind == "CLS":
            return hidden[:, 0]
        if kind == "MEAN":
            weights = mask.unsqueeze(-1).float()
            return (hidden * weights).sum(1) / weights.sum(1)
        last = mask.sum(1) - 1  # right padding: each row's last real token
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


def counted_load(engine, pooler: Pooler | None) -> engine_pb2.GetLoadResponse:
    """The engine's load figures (EngineAPI.load), a pooler's inputs counted as sequences waiting and running: what
    GetLoad, the vllm: gauges and the routers' /get_load read."""
    load = engine.load()
    if pooler is not None:
        load.waiting += pooler.waiting
        load.running += pooler.running
    return load
