"""The step loop: a dedicated thread that schedules, runs the model, samples, and ships results to asyncio.

The asyncio side submits requests and aborts through an inbox; each step's outputs go back with one
`loop.call_soon_threadsafe` into per-request outboxes. Finished and aborted sequences free their KV
blocks in the step that sees them. When every running sequence is decoding, steps are queued on the
device one ahead of the host (`decode_steps` in a row), so reading and shipping a step's tokens overlaps
the next step's compute.

Structured outputs: a request with a constraint is added once its grammar is compiled, and a list's item
vocabulary built with it (the servicer waits for that before admitting it; should the cache have dropped either
since, the request waits off the step loop for a rebuild). Its sequences get a `Guide`. A step that samples
guided rows has their masks filled on a worker thread while the forward pass runs, and applied before sampling;
in a decode run the device stays one step ahead as ever, with only the guides' work between two steps
(`_decode_ahead`), so CUDA graphs and decode runs serve guided batches too. Batches without guided rows are
untouched.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import gc
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine_svc.model.runner import ModelRunner
from engine_svc.model.runner_api import Runner
from engine_svc.model.sampler import LOGPROBS_MODES, Drawn, Sampler
from engine_svc.scheduling.kv_handoffs import KvHandoffs
from engine_svc.scheduling.lora_cards import adapter_names
from engine_svc.scheduling.scheduler import Scheduler
from engine_svc.scheduling.sequence import Chunk, Sequence
from engine_svc.scheduling.speculation import Speculator
from engine_svc.scheduling.stop_strings import StopStrings, StopWatch
from engine_svc.serving.controls import Controls
from engine_svc.serving.controls import refuses as controls_refuses
from engine_svc.serving.engine_api import EngineFront
from engine_svc.serving.kv_hub import KvHub
from engine_svc.serving.kv_transfer import blocks as kv_blocks
from engine_svc.serving.load_figures import StepTokens, TokenRate, utilization
from engine_svc.serving.loras import LoraRegistry
from engine_svc.serving.openmp import release_thread_team
from engine_svc.serving.profiler import StepProfiler
from engine_svc.serving.prompt_scores import score_prompts
from engine_svc.serving.queue_budget import Backlog, Pace, steps_left
from engine_svc.serving.requests import ChoiceDelta, RequestState, StepOutput
from engine_svc.serving.tenancy import public_id
from engine_svc.structured.compiler import GrammarCompiler, wait_compiled
from engine_svc.structured.guide import Guide, Masker, MaskJob
from engine_svc.structured.items import ItemBudget
from engine_svc.structured.spec import Constraint
from scaleout.v1 import common_pb2, engine_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

log = logging.getLogger(__name__)

# Takes each step's outputs, on the step thread.
Sink = Callable[[list[tuple[RequestState, StepOutput]]], object]


@dataclass
class Call:
    """A control call for the step loop: `op` of its Controls with `args`; `future` gets the answer."""

    op: str
    args: tuple
    future: concurrent.futures.Future


@dataclass
class Read:
    """A decode step's tokens and logprobs, on the host."""

    tokens: list[int]
    logprobs: list
    grammar_done: set[Sequence] | None = None  # a set: the guides have these tokens; whose grammar they completed


class Engine(EngineFront):
    """The in-thread engine (an `EngineAPI`)."""

    _sink: Sink  # set by start()

    def __init__(
        self,
        runner: Runner,
        scheduler: Scheduler,
        *,
        max_model_len: int,
        max_waiting: int,
        stall_timeout_s: float = 60.0,
        decode_steps: int = 1,
        grammars: GrammarCompiler | None = None,
        admission_window_s: float = 0.005,
        stop_strings: StopStrings | None = None,
        logprobs_mode: str = LOGPROBS_MODES[0],
    ):
        super().__init__(max_waiting)
        self.runner = runner
        self.scheduler = scheduler
        self.sampler = Sampler(runner.vocab_size, runner.device, logprobs_mode)
        self.max_model_len = max_model_len
        self.stall_timeout_s = stall_timeout_s
        self.decode_steps = decode_steps if runner.chains_decode_steps else 1
        self.admission_window_s = admission_window_s
        self.steps = 0
        # Requests to add; ids of requests to abort; prefix-cache resets, answered with the blocks dropped.
        self._inbox: list[RequestState | list[str] | concurrent.futures.Future | Call] = []
        self._inbox_since = 0.0  # when the inbox last went from empty to not empty
        self._cond = threading.Condition()
        self._stopping = False
        self._last_progress = time.monotonic()
        self._thread: threading.Thread | None = None
        self.grammars = grammars  # None: no tokenizer, no structured outputs
        self.masker = Masker(grammars.backend, runner.device) if grammars is not None else None
        self.guides: dict[Sequence, Guide] = {}  # the live guided sequences (step thread only)
        self.stop_strings = stop_strings  # None: no tokenizer (admission refuses stop strings)
        self.watches: dict[Sequence, StopWatch] = {}  # the live sequences with stop strings (step thread only)
        self.generated = TokenRate()  # tokens sampled (added on the step thread)
        self.step_tokens = StepTokens()  # steps by the tokens each ran
        self._step_work = 0  # tokens the step being run has computed or sampled so far
        self.pace = Pace()  # seconds per step, for the queue-wait estimate (queue_budget.py)
        self.kv_events: KvHub | None = None  # set by the loader when KV events are on: closes a batch per step
        self.controls = Controls(self)  # pause, sleep, weight updates (step thread; controls.py)
        self.refusing = False  # paused in abort or wait mode: new requests are refused (ENGINE_PAUSED)
        self.handoffs = KvHandoffs(scheduler.pool, wake=self._wake)  # prefills' blocks kept for decode engines
        self.prompt_tokens_computed = 0  # prompt tokens run through the model (not cached, not transferred)
        self.prompt_tokens_transferred = 0  # prompt tokens whose K/V came from a prefill engine
        self.speculator: Speculator | None = None  # set by the loader with --speculative-config
        self.loras: LoraRegistry | None = None  # set by the loader with --enable-lora (loras.py)
        self.profiler: StepProfiler | None = None  # set by the loader with --profiler-config (profiler.py)

    # ---- asyncio side -------------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop | None = None, *, sink: Sink | None = None) -> None:
        """Starts the step thread. Each step's [(state, output)] go to the outboxes on `loop`, or to `sink`
        (called on the step thread: the engine core process forwards them to its parent)."""
        # The step thread and the event loop share the GIL; a short switch interval keeps the step thread from
        # waiting up to 5 ms for it after every GIL-releasing call (a large share of a decode step).
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.0005))
        # The model and everything loaded with it stay for good: keep them out of the collector's full passes
        # (~0.2 s each over ~400k objects), which per-token garbage otherwise sets off every few seconds.
        gc.freeze()
        release_thread_team()  # torch's OpenMP team is the step thread's alone (openmp.py says why)
        if sink is None:
            if loop is None:
                raise TypeError("Engine.start needs the outboxes' event loop or a sink")
            sink = functools.partial(loop.call_soon_threadsafe, self._deliver)
        self._sink = sink
        self._stopping = False
        if self.kv_events is not None:
            self.kv_events.flush()  # batch 0: AllBlocksCleared, a fresh engine holds nothing
        self._thread = threading.Thread(target=self._run, name="engine-step-loop", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
        self.controls.close()
        if self.grammars is not None:
            self.grammars.close()
        # start() froze every object then alive, this engine's too: its cycles (engine -> step sink -> its bound
        # _deliver -> engine) hold the runner and KV cache out of the collector's reach until unfrozen. A process
        # that outlives its engine (tests, benches: GBs an engine) gets them back at its next full collection.
        gc.unfreeze()

    def load(self) -> engine_pb2.GetLoadResponse:
        pool, running = self.scheduler.pool, self.num_running
        used, free = pool.num_used, pool.num_free
        return engine_pb2.GetLoadResponse(
            running=running,
            waiting=self.num_waiting,
            kv_blocks_used=used,
            kv_blocks_free=free,
            kv_block_size=pool.block_size,
            max_running=self.scheduler.max_num_seqs,
            max_waiting=self.max_waiting,
            prefix_caching=pool.caching,
            kv_blocks_cached=pool.num_cached,
            prefix_cache_queried_tokens=pool.queried_tokens,
            prefix_cache_hit_tokens=pool.hit_tokens,
            generated_tokens_per_s=self.generated.per_second(),
            pending_prefill_tokens=self.scheduler.pending_prefill_tokens(),
            utilization=utilization(running, self.scheduler.max_num_seqs, used, free),
            prompt_tokens_computed=self.prompt_tokens_computed,
            prompt_tokens_transferred=self.prompt_tokens_transferred,
            preemptions=self.scheduler.num_preemptions,
            **(self.speculator.counters() if self.speculator is not None else {}),
            **self._lora_load(),
        )

    def _lora_load(self) -> dict:
        """GetLoadResponse's LoRA fields (none when LoRA is off)."""
        if not self.scheduler.max_loras:
            return {}
        running, waiting = self.lora_adapters()
        return {
            "max_loras": self.scheduler.max_loras,
            "running_lora_adapters": running,
            "waiting_lora_adapters": waiting,
        }

    def lora_adapters(self) -> tuple[list[str], list[str]]:
        """The adapters of the running and of the waiting sequences, by name (the step thread may change the queues
        meanwhile: read from copies)."""
        scheduler = self.scheduler
        return adapter_names(list(scheduler.running)), adapter_names([entry[2] for entry in list(scheduler.waiting)])

    def _backlog(self) -> Backlog:
        scheduler = self.scheduler
        return Backlog(
            self.num_running,
            scheduler.max_num_seqs,
            self.queued(),
            scheduler.pending_prefill_tokens(),
            steps_left(list(scheduler.running)),
            self.pace.decode_step_s,
            self.pace.prefill_token_s,
        )

    def post_cache_reset(self) -> concurrent.futures.Future:
        """Empty the prefix cache at the step loop's next turn; the future gets the blocks dropped (any thread)."""
        done: concurrent.futures.Future = concurrent.futures.Future()
        self._post(done)
        return done

    async def reset_prefix_cache(self) -> int:
        return await asyncio.wrap_future(self.post_cache_reset())

    async def kv_hub(self) -> KvHub | None:
        return self.kv_events

    def post_control(self, op: str, *args) -> concurrent.futures.Future:
        """Run Controls.`op` at the step loop's next turn; the future gets its answer (any thread)."""
        if op not in Controls.OPS:
            raise ValueError(f"no control op {op!r}")
        if (refuse := controls_refuses(op, args)) is not None:
            self.refusing = refuse
        done: concurrent.futures.Future = concurrent.futures.Future()
        self._post(Call(op, args, done))
        return done

    async def control(self, op: str, *args):
        return await asyncio.wrap_future(self.post_control(op, *args))

    @property
    def weight_version(self) -> str:
        return self.controls.version

    def sleep_state(self) -> tuple[bool, int]:
        return self.controls.sleeping, self.controls.level

    @property
    def num_running(self) -> int:
        return len(self.scheduler.running)

    def queued(self) -> int:
        return self.scheduler.num_waiting + sum(len(p.seqs) for p in self._inbox if isinstance(p, RequestState))

    def submit(self, request_id: str, seqs: list[Sequence], owner: str | None = None) -> RequestState:
        if self.refusing:
            raise fail(Reason.ENGINE_PAUSED, "the engine is paused for a weight update: try again after /resume")
        state = self._register(request_id, seqs)
        self._post(state)
        return state

    def _send_abort(self, request_ids: list[str]) -> None:
        self._post(request_ids)

    async def compile_grammar(self, constraint: Constraint) -> None:
        if self.grammars is None:
            raise fail(Reason.STRUCTURED_OUTPUTS_UNAVAILABLE, "this engine has no tokenizer: no structured outputs")
        await wait_compiled(self.grammars.get(constraint))

    def healthy(self) -> bool:
        """False when work is pending but the step loop has not made progress for stall_timeout_s."""
        if self._thread is None or not self._thread.is_alive():
            return self._thread is None
        busy = ((self.scheduler.running or self.scheduler.waiting) and not self.controls.frozen) or self._inbox
        return not busy or time.monotonic() - self._last_progress < self.stall_timeout_s

    def _post(self, item: RequestState | list[str] | concurrent.futures.Future | Call) -> None:
        with self._cond:
            if not self._inbox:
                self._inbox_since = time.monotonic()
            self._inbox.append(item)
            self._cond.notify()

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def _deliver(self, outputs: list[tuple[RequestState, StepOutput]]) -> None:
        for state, output in outputs:
            state.outbox.put(output)

    # ---- step thread --------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            handoffs = self.handoffs
            with self._cond:
                while not (
                    self._stopping
                    or self._inbox
                    or ((self.scheduler.running or self.scheduler.waiting) and not self.controls.frozen)
                    or handoffs.due(time.monotonic())
                ):
                    self._cond.wait(handoffs.next_wait(time.monotonic()))
                if self._stopping:
                    return
                inbox, self._inbox = self._inbox, []
                self._last_progress = time.monotonic()
            handoffs.settle(self._last_progress)
            outputs: dict[RequestState, StepOutput] = {}
            try:
                self._take(inbox, outputs)
                if not self.controls.frozen:
                    self._step(outputs)
                self.controls.after_step()
            except Exception as error:  # a bug in a step: fail what was in flight, keep serving
                log.exception("engine step failed")
                self._fail_all(outputs, error)
            self._ship(outputs)

    def _ship(self, outputs: dict[RequestState, StepOutput]) -> None:
        self.steps += 1
        if self._step_work:  # the model ran (not a turn that only took the inbox)
            self.step_tokens.add(self._step_work)
            self._step_work = 0
            if self.profiler is not None:
                self.profiler.step()
        version = self.controls.version
        for out in outputs.values():
            out.weight_version = version
        if self.speculator is not None and self.speculator.per_request != "none":
            for state, out in outputs.items():
                for delta in out.deltas:
                    if delta.finish_reason:
                        delta.speculation = self.speculator.report(state.seqs[delta.index])
        if self.kv_events is not None:
            self.kv_events.flush()
        self._last_progress = time.monotonic()
        if outputs:
            self._sink(list(outputs.items()))

    def _take(self, inbox: list[RequestState | list[str] | concurrent.futures.Future | Call], outputs) -> None:
        for item in inbox:
            if isinstance(item, RequestState):
                if item.done or not self._guide(item, outputs):
                    continue
                if item.seqs[0].pulled is not None and not self._land(item, outputs):
                    continue
                if item.seqs[0].config.stop and self.stop_strings is not None:
                    self.watches.update((seq, self.stop_strings.watch(seq.prompt_ids, seq.config)) for seq in item.seqs)
                for seq in item.seqs:
                    self.scheduler.add(seq)
            elif isinstance(item, Call):
                self._call(item, outputs)
            elif isinstance(item, concurrent.futures.Future):
                item.set_result(self.scheduler.pool.reset_prefix_cache())
            else:
                for rid in item:
                    state = self.requests.get(rid)
                    if state is not None:
                        self._finish_request(state, outputs, common_pb2.FINISH_REASON_ABORT)

    def _call(self, call: Call, outputs) -> None:
        try:
            answer = getattr(self.controls, call.op)(outputs, *call.args)
        except Exception as error:  # a refusal (ServiceError) or a failed transfer: the caller's answer
            call.future.set_exception(error)
            return
        if isinstance(answer, concurrent.futures.Future):  # answered later (a pause that waits for requests)
            answer.add_done_callback(lambda done: call.future.set_result(done.result()))
        else:
            call.future.set_result(answer)

    def abort_all(self, outputs, request_ids: frozenset[str] = frozenset()) -> int:
        """End every live request (of these public ids, when any) with FINISH_REASON_ABORT; how many."""
        live = [
            state
            for key, state in self.requests.items()
            if not state.done and (not request_ids or public_id(key) in request_ids)
        ]
        for state in live:
            self._finish_request(state, outputs, common_pb2.FINISH_REASON_ABORT)
        return len(live)

    def _land(self, state: RequestState, outputs) -> bool:
        """A decode step's pulled prompt K/V, written into blocks of its own: only the last prompt token runs (its
        logits sample the first token). False (the request failed: that request alone, typed) when too few blocks
        are free or the device has no memory for the landing's copy."""
        (seq,) = state.seqs
        pulled, seq.pulled = seq.pulled, None
        assert isinstance(pulled, kv_blocks.Pulled)
        error = None
        if not self.scheduler.pool.grow(seq, pulled.num_tokens):
            error = fail(Reason.KV_HANDOFF_NO_ROOM, f"too few free KV blocks for {pulled.num_tokens} pulled tokens")
        else:
            runner = self.runner
            assert isinstance(runner, ModelRunner)  # KvPeer takes KV steps only then
            try:
                kv_blocks.land(runner.kv_caches, runner.block_size, seq.block_ids, pulled)
            except torch.OutOfMemoryError as oom:
                error = fail(Reason.KV_PULL_NO_MEMORY, f"no device memory to land {pulled.num_tokens} tokens: {oom}")
        if error is not None:
            outputs[state] = StepOutput(error=error)
            self._retire({seq})
            self._close(state)
            return False
        seq.num_computed = min(pulled.num_tokens, len(seq.prompt_ids) - 1)
        seq.num_transferred = pulled.num_tokens
        seq.num_cached_tokens = seq.num_computed  # its usage's cached tokens; not a prefix-cache hit
        self.prompt_tokens_transferred += pulled.num_tokens
        return True

    def _guide(self, state: RequestState, outputs) -> bool:
        """Give a constrained request's sequences (or one with a thinking budget) their guides; False while its
        grammar is still compiling (the request comes back through the inbox when it is done) or when it failed
        to compile."""
        constraint, budget = state.seqs[0].config.constraint, state.seqs[0].config.thinking_budget
        if constraint is None:
            if budget is not None:
                self.guides.update((seq, Guide(None, budget=budget)) for seq in state.seqs)
            return True
        error: BaseException | None
        if self.grammars is None:
            error = fail(Reason.STRUCTURED_OUTPUTS_UNAVAILABLE, "this engine has no tokenizer: no structured outputs")
        else:
            # the grammar, and a list's vocabulary (built with it off this thread; rebuilt there if dropped since)
            needed = [self.grammars.get(constraint)]
            if constraint.items is not None:
                needed.append(self.grammars.item_vocab(constraint.items))
            pending = next((future for future in needed if not future.done()), None)
            if pending is not None:
                pending.add_done_callback(lambda _: self._post(state))
                return False
            error = next((e for future in needed if (e := future.exception()) is not None), None)
            if error is None:
                grammar, vocab = needed[0].result(), needed[1].result() if len(needed) > 1 else None
                for seq in state.seqs:
                    matcher = self.grammars.backend.matcher(grammar, seq.config.stop_token_ids)
                    config = seq.config
                    items = None if vocab is None else ItemBudget(vocab, config.max_tokens, config.stop_token_ids)
                    self.guides[seq] = Guide(matcher, seq.config.gate, budget, items)
                return True
        if not isinstance(error, ServiceError):
            error = fail(Reason.INVALID_GRAMMAR, f"the grammar failed to compile: {error}")
        outputs[state] = StepOutput(error=error)
        self._retire(set(state.seqs))
        self._close(state)
        return False

    def _finish_request(self, state: RequestState, outputs, reason: common_pb2.FinishReason) -> None:
        live = {seq for seq in state.seqs if not seq.finished}
        self._retire(live)
        out = outputs.setdefault(state, StepOutput())
        out.deltas += [ChoiceDelta(seq.index, finish_reason=reason) for seq in sorted(live, key=lambda s: s.index)]
        self._close(state)

    def _retire(self, seqs: set[Sequence]) -> None:
        for seq in seqs:
            seq.finished = True
            self.runner.forget(seq)
            if self.guides:
                self.guides.pop(seq, None)
            if self.watches:
                self.watches.pop(seq, None)
            if self.speculator is not None:
                self.speculator.forget(seq)
        self.scheduler.remove(seqs)

    def _close(self, state: RequestState) -> None:
        state.done = True
        self.requests.pop(state.request_id, None)

    def _fail_all(self, outputs, error: Exception) -> None:
        failure = fail(Reason.ENGINE_STEP_FAILED, f"engine step failed: {error}")
        for state in list(self.requests.values()):
            self._retire({seq for seq in state.seqs if not seq.finished})
            outputs[state] = StepOutput(error=failure)
            self._close(state)

    @torch.inference_mode()
    def _step(self, outputs: dict[RequestState, StepOutput]) -> None:
        chunks = self.scheduler.schedule()
        if not chunks:
            time.sleep(0.001)  # waiting work that cannot fit yet; let the inbox fill
            return
        now = time.perf_counter()
        for c in chunks:
            if self.requests[c.seq.request_id].scheduled_at is None:  # its first chunk (which may start cached)
                self.requests[c.seq.request_id].scheduled_at = now
        drafted = self.speculator.draft(chunks, self.scheduler, self.guides) if self.speculator is not None else []
        steps = self._lookahead(chunks)
        if steps > 1:
            shipped = self.steps
            self._decode_ahead(chunks, steps, outputs)
            self.pace.add(time.perf_counter() - now, self.steps - shipped + 1, 0)  # the loop ships the last
            return
        sampling = [c for c in chunks if c.samples]
        masks = self._masks([c.seq for c in sampling]) if self.guides else None  # filled during the forward pass
        logits = self.runner.execute(chunks)
        tokens, logprobs = (
            self.sampler.sample(logits[: len(sampling)], [c.seq for c in sampling], masks) if sampling else ([], [])
        )
        drafts = sum(c.num_draft for c in drafted)
        score_prompts(chunks, logits[len(sampling) : len(logits) - drafts], self.requests, self.sampler.as_logits)
        for c in chunks:
            computed = max(0, min(c.start + c.num_tokens, len(c.seq.prompt_ids)) - max(c.start, c.seq.num_transferred))
            self.prompt_tokens_computed += computed
            self._step_work += computed
            self.scheduler.computed(c.seq, c.num_tokens - c.num_draft)
        if drafted:
            runs = {c.seq: ([t], [lp]) for c, t, lp in zip(sampling, tokens, logprobs)}
            assert self.speculator is not None
            self.speculator.verify(self.sampler, drafted, logits[len(logits) - drafts :], runs)
            self._accept_runs(runs, outputs)
        else:
            self._accept([c.seq for c in sampling], tokens, logprobs, outputs)
        prefilled = sum(c.num_tokens for c in chunks if c.num_tokens > 1 and not c.num_draft)
        self.pace.add(time.perf_counter() - now, 1, prefilled)

    def _accept_runs(self, runs: dict[Sequence, tuple[list, list]], outputs) -> None:
        """A speculative step's tokens, one position at a time (each one's stop checks as ever): before each
        token after the first, its predecessor (an accepted draft) counts computed. Then the blocks grown for the
        rejected drafts go back."""
        for j in range(max(len(tokens) for tokens, _ in runs.values())):
            live = [seq for seq, (tokens, _) in runs.items() if len(tokens) > j and not seq.finished]
            for seq in live if j else ():
                self.scheduler.computed(seq, 1)
            self._accept(live, [runs[s][0][j] for s in live], [runs[s][1][j] for s in live], outputs)
        for seq in runs:
            if not seq.finished:
                self.scheduler.pool.shrink(seq, seq.num_tokens)

    def _masks(self, seqs: list[Sequence], now: bool = False) -> MaskJob | None:
        """Start filling the token masks of the guided rows among `seqs` (the logits rows, in order) on the
        worker thread, or fill them `now` in this one (when nothing would run beside it)."""
        guides = self.guides
        guided = [
            (row, guide)
            for row, seq in enumerate(seqs)
            if (guide := guides.get(seq)) and guide.masked and not guide.done
        ]
        if not guided:
            return None
        assert self.masker is not None
        return self.masker.fill(guided, now)

    def _lookahead(self, chunks: list[Chunk]) -> int:
        """Decode steps to queue back to back: more than one only when every chunk is a plain decode whose
        sampling needs no host-side logits processing, and blocks for every step are free (grammars' masks are
        applied inside the run)."""
        if self.decode_steps == 1 or any(
            c.num_tokens != 1 or not c.samples or c.seq.want_prompt_logprobs or c.seq.config.needs_processing
            for c in chunks
        ):
            return 1
        seqs = [c.seq for c in chunks]
        steps = min(
            self.decode_steps,
            max(s.config.max_tokens - len(s.output_ids) for s in seqs),
            min(self.max_model_len - s.num_tokens for s in seqs) + 1,
        )
        return steps if steps > 1 and self.scheduler.reserve(seqs, steps) else 1

    def _decode_ahead(self, chunks: list[Chunk], steps: int, outputs) -> None:
        """Up to `steps` decode steps with the device one step ahead of the host: step k+1 is queued (its input
        is step k's tokens, still on the device) before step k's tokens are read, checked and shipped. Stops
        queueing when every sequence finished, or when new requests or aborts have waited `admission_window_s`
        (requests that arrive together, as closed-loop clients' do, then share one prefill step instead of
        breaking the run once each).

        With guided rows, step k's masks need step k-1's tokens in the guides. Only that sits between the two
        steps: once step k is queued, step k-1's tokens are read (their sampling ran before this forward
        pass), fed to the guides, and the masks filled and applied while the device computes step k; step
        k-1's other bookkeeping and shipping wait until step k+1 is queued, so they overlap the device too."""
        seqs = [c.seq for c in chunks]
        guided = bool(self.guides) and any(seq in self.guides for seq in seqs)
        forward = self.runner.decode_loop(chunks)
        batch = self.sampler.prepare(seqs, steps)
        queued: deque[Drawn] = deque()  # sampled, not read yet
        read: deque[Read] = deque()  # read and fed to the guides, not shipped yet (guided runs)
        tokens = None
        for step in range(steps):
            logits, greedy = forward(tokens)
            if guided:
                while read:
                    self._ship(self._settle(seqs, read.popleft(), {}))
                if queued:
                    read.append(self._read_guided(seqs, queued.popleft()))
                masks = self._masks(seqs, now=True)
                if masks is not None:
                    masks.apply(logits)
                    greedy = None  # each row's argmax again, over what its grammar allows
            drawn = self.sampler.draw(logits, batch, step, greedy)
            tokens = drawn.tokens
            queued.append(drawn)
            if len(queued) > 1:
                self._ship(self._settle(seqs, Read(*queued.popleft().result()), {}))
            if all(seq.finished for seq in seqs) or (
                self._inbox and time.monotonic() - self._inbox_since >= self.admission_window_s
            ):
                break
        pending = [*read, *(Read(*drawn.result()) for drawn in queued)]
        for item in pending[:-1]:
            self._ship(self._settle(seqs, item, {}))
        self._settle(seqs, pending[-1], outputs)  # the step loop ships the last one

    def _read_guided(self, seqs: list[Sequence], drawn: Drawn) -> Read:
        """A guided run's step, read: its tokens go to the guides at once (the next step's masks need them)."""
        item = Read(*drawn.result())
        live = [row for row, seq in enumerate(seqs) if not seq.finished]
        item.grammar_done = self._advance_guides([seqs[r] for r in live], [item.tokens[r] for r in live])
        return item

    def _settle(self, seqs: list[Sequence], item: Read, outputs):
        live = [row for row, seq in enumerate(seqs) if not seq.finished]
        for row in live:
            self.scheduler.computed(seqs[row], 1)
        tokens, logprobs = [item.tokens[r] for r in live], [item.logprobs[r] for r in live]
        self._accept([seqs[r] for r in live], tokens, logprobs, outputs, item.grammar_done)
        return outputs

    def _advance_guides(self, seqs: list[Sequence], tokens: list[int]) -> set[Sequence]:
        """Feed each guided sequence its new token; the sequences whose grammar is done with it (complete and
        closed, or broken: nothing more may follow)."""
        done = set()
        for seq, token in zip(seqs, tokens):
            guide = self.guides.get(seq)
            if guide is not None and not guide.done:
                guide.accept(token)
                if guide.done:
                    done.add(seq)
        return done

    def _accept(self, seqs: list[Sequence], tokens: list[int], logprobs: list, outputs, grammar_done=None) -> None:
        """Append each sequence's sampled token, detect stops and lengths, and retire what finished.
        `grammar_done`: the guides were fed these tokens already, and these sequences' grammars are done."""
        finished: set[Sequence] = set()
        if grammar_done is None:
            grammar_done = self._advance_guides(seqs, tokens) if self.guides else ()
        now = time.perf_counter()
        self.generated.add(len(tokens), now)
        self._step_work += len(tokens)
        watches = self.watches
        for seq, token, lp in zip(seqs, tokens, logprobs):
            state = self.requests[seq.request_id]
            seq.append(token)
            first = state.first_token_at is None
            state.last_token_at = now
            if first:
                state.first_token_at = now
            delta = ChoiceDelta(seq.index, [token], [lp] if lp is not None else [])
            if token in seq.config.stop_token_ids and len(seq.output_ids) > seq.config.min_tokens:
                delta.finish_reason = common_pb2.FINISH_REASON_STOP
                delta.stop = token if token in seq.config.requested_stop_ids else None
            elif watches and seq in watches and (matched := watches[seq].feed(token)) is not None:
                delta.finish_reason, delta.stop = common_pb2.FINISH_REASON_STOP, matched
            elif len(seq.output_ids) >= seq.config.max_tokens or seq.num_tokens >= self.max_model_len:
                delta.finish_reason = common_pb2.FINISH_REASON_LENGTH
            elif seq in grammar_done:  # the grammar is complete (it needs no stop token) or broke
                if self.guides[seq].rejected:
                    log.warning("request %s: the grammar refused token %d (none was allowed)", seq.request_id, token)
                delta.finish_reason = common_pb2.FINISH_REASON_STOP
            out = outputs.get(state) or outputs.setdefault(state, StepOutput())
            if first:  # the request's first token: prompt info goes with it
                out.cached_tokens = seq.num_cached_tokens or 0
            if seq.index == 0 and len(seq.output_ids) == 1:
                out.prompt_logprobs = state.prompt_logprobs or None
                out.prompt_token_id_logprobs = state.prompt_token_id_logprobs or None
            out.deltas.append(delta)
            if delta.finish_reason:
                finished.add(seq)
                if seq.hand_off:  # a prefill step: its prompt's blocks wait for the decode engine
                    out.kv_handoff = self.handoffs.keep(seq)
        self._retire(finished)
        for state in {self.requests[s.request_id] for s in finished}:
            if all(s.finished for s in state.seqs):
                self._close(state)
