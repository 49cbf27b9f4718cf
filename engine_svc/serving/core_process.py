"""The engine's step loop in a child process, so it never waits for the gRPC server's GIL.

In one process the step thread and the asyncio thread that writes gRPC messages take turns on the GIL,
and on a fast GPU that turn-taking, not the GPU, sets the pace. `EngineProcess` keeps the asyncio half of
the Engine interface (submit, abort, outboxes, load figures, health) in the server process; a spawned child
builds the engine with a picklable builder, runs the step loop and sends each step's outputs back over a
pipe, where they fill the same per-request outboxes that the in-thread engine fills.

Each step's outputs cross the pipe as marshalled plain tuples (one per request: its deltas, timings and
whether it is done) with the load figures as a tuple of numbers: pickling dataclasses and protobuf messages
per token cost the core and the server more host time than the decode step on the GPU at 256 streams. The two
figures that cost a pass over the running sequences or the rate's buckets (pending prefill tokens, tokens per
second) are recomputed every LOAD_EVERY_S, not every step.
Anything else (the engine's description, in-band errors) is pickled.

Structured outputs' grammars are compiled and cached in the core, where the step loop uses them: the
servicer's `compile_grammar` sends the constraint, the core compiles it on its compile workers and answers
(`REPLY` messages); the request that follows finds it in the core's cache.
A prefix-cache reset runs at the step loop's next turn; every API server hears the load figures after it
before the one that asked gets its answer, so a GetLoad right after the reset sees the cache empty.

Several API servers (api_servers.py) may share one core, each over its own pair of pipes: the core sends each
request's outputs to the server that submitted it and the load figures to all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import marshal
import multiprocessing
import multiprocessing.connection
import pickle
import signal
import threading
import time
from dataclasses import replace

from engine_svc.model.sampler import RowLogprobs
from engine_svc.scheduling.sequence import Sequence, next_arrival
from engine_svc.serving import kv_relay
from engine_svc.serving.controls import INITIAL_VERSION, refuses
from engine_svc.serving.engine import Engine
from engine_svc.serving.engine_api import EngineFront
from engine_svc.serving.kv_hub import KvHub
from engine_svc.serving.load_figures import StepTokens, utilization
from engine_svc.serving.loader import LoadedEngine
from engine_svc.serving.queue_budget import Backlog, steps_left
from engine_svc.serving.requests import ChoiceDelta, RequestState, StepOutput
from engine_svc.serving.tenancy import public_id, reaches
from engine_svc.structured.spec import Constraint
from scaleout.v1 import engine_pb2
from scaleout_common import structured_output_rules
from scaleout_common.errors import ServiceError, quote
from scaleout_common.reasons import Reason, fail

log = logging.getLogger(__name__)


class _Front:
    """One API server's pipes, as the core sees them: its commands, and its results under a lock (the step
    thread and the command loop both send)."""

    def __init__(self, commands, results) -> None:
        self.commands, self.results = commands, results
        self.sending = threading.Lock()
        self.told_at = 0.0  # when it last heard the load (monotonic)

    def send(self, message: bytes) -> None:
        # OSError: the API server is gone; the command loop drops it when its commands pipe closes.
        with self.sending, contextlib.suppress(OSError):
            self.results.send_bytes(message)


def _child(builder, pipes: list[tuple]) -> None:
    """The engine core: build, report ready to every API server, then apply their commands until told to stop
    (or until every API server is gone). `pipes`: one (commands, results) pair per API server."""
    # Shutdown is the parent's call (it drains first); a Ctrl-C or SIGTERM sent to the whole process group must
    # not end in-flight streams early. An API server that dies closes its command pipe: its requests are
    # aborted, and the loop below ends with the last of them.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    fronts = [_Front(commands, results) for commands, results in pipes]
    loaded = builder()
    engine = loaded.engine
    if not isinstance(engine, Engine):
        raise TypeError(f"the engine core runs an in-thread Engine; the builder made a {type(engine).__name__}")
    ready = PICKLED + pickle.dumps((replace(loaded, engine=None), engine.load()))
    for front in fronts:
        front.send(ready)
    owners: dict[str, tuple[_Front, str | None]] = {}  # live request id -> its API server and its client
    kv_listeners: dict[_Front, kv_relay.Listener] = {}  # the API servers that hear KV-event batches
    figures = _Figures()

    def forward(outputs: list[tuple[RequestState, StepOutput]]) -> None:
        load = figures.of(engine)
        # An API server with nothing in this step hears the load too (its GetLoad, its waiting bound, its stall
        # check): every LOAD_EVERY_S at most, and whenever the engine is left idle.
        now, idle = time.monotonic(), load[0] == load[1] == 0
        rows: dict[_Front, list] = {f: [] for f in fronts if idle or now - f.told_at >= LOAD_EVERY_S}
        failed: dict[_Front, list] = {}
        for state, out in outputs:
            front = owners[state.request_id][0] if state.request_id in owners else fronts[0]
            if state.done:
                owners.pop(state.request_id, None)
            if out.error is None:
                rows.setdefault(front, []).append(_pack(state, out))
            else:
                failed.setdefault(front, []).append((state.request_id, out.error))
        healthy = engine.healthy()
        for front, packed in rows.items():
            front.told_at = now
            front.send(MARSHALLED + marshal.dumps((packed, load, healthy)))
        for front, errors in failed.items():
            front.send(PICKLED + pickle.dumps(errors))

    engine.start(sink=forward)
    try:
        while fronts:
            for ready in multiprocessing.connection.wait([front.commands for front in fronts]):
                front = next(f for f in fronts if f.commands is ready)
                try:
                    kind, payload = front.commands.recv()
                except EOFError:  # that API server is gone: its requests have no reader
                    fronts.remove(front)
                    if front in kv_listeners and engine.kv_events is not None:
                        engine.kv_events.close(kv_listeners.pop(front))
                    engine.abort([rid for rid, (f, _) in owners.items() if f is front])
                    continue
                if kind == "stop":
                    return
                if kind == "reset_prefix_cache":
                    _reset(engine, front, list(fronts), figures, payload[0])
                    continue
                if kind == "control":
                    _control(engine, front, *payload)
                    continue
                if kind == "kv_subscribe":
                    reply = REPLY + pickle.dumps((payload[0], None))
                    if (listener := kv_relay.subscribe(engine.kv_events, front.send, reply)) is not None:
                        kv_listeners[front] = listener
                    continue
                _apply(engine, front, owners, kind, payload)
    finally:
        engine.stop()


def _apply(engine: Engine, front: _Front, owners: dict, kind: str, payload) -> None:
    """One command from an API server."""
    if kind == "abort":
        engine.abort(payload)
    elif kind == "abort_any":  # requests other API servers hold that the asking one's Abort reaches (tenancy.py)
        token, wanted, client = payload
        wanted = frozenset(wanted)
        mine = [key for key, (holder, _) in owners.items() if holder is not front and reaches(key, wanted, client)]
        aborted, _ = engine.abort(mine) if mine else ([], [])
        front.send(REPLY + pickle.dumps((token, aborted)))
    elif kind == "compile":
        token, constraint = payload
        _compile(engine, token, constraint, lambda reply: front.send(REPLY + reply))
    else:
        request_id, seqs, client = payload
        try:
            if request_id in owners:  # held by another API server
                raise fail(Reason.DUPLICATE_REQUEST_ID, f"request {quote(public_id(request_id))} is already running")
            owners[request_id] = front, client
            for seq in seqs:  # each API server counts its own arrivals: the core's count orders them all
                seq.arrival = next_arrival()
            engine.submit(request_id, seqs)
        except ServiceError as error:  # raced past the API server's checks: refuse in-band
            if owners.get(request_id, (None,))[0] is front:
                del owners[request_id]
            front.send(PICKLED + pickle.dumps([(request_id, error)]))
            front.send(MARSHALLED + marshal.dumps(([], _Figures().of(engine), engine.healthy())))  # never queued


def _control(engine: Engine, front: _Front, token: int, op: str, args: tuple) -> None:
    """A control op (controls.py) at the step loop's next turn; the asker gets its answer or its error."""

    def done(future) -> None:
        error = future.exception()
        front.send(REPLY + pickle.dumps((token, error if error is not None else future.result())))

    engine.post_control(op, *args).add_done_callback(done)


def _reset(engine: Engine, front: _Front, fronts: list[_Front], figures: _Figures, token: int) -> None:
    """Empty the prefix cache at the step loop's next turn; then every API server hears the load, then the asker
    gets the blocks dropped."""

    def done(future) -> None:
        load = MARSHALLED + marshal.dumps(([], figures.of(engine, fresh=True), engine.healthy()))
        for each in fronts:
            each.send(load)
        front.send(REPLY + pickle.dumps((token, future.result())))

    engine.post_cache_reset().add_done_callback(done)


class _Figures:
    """The load figures an API server keeps (EngineProcess._receive reads them in this order: GetLoad's, then
    the queue-wait estimate's, the preemptions, the prompt tokens computed and transferred, the steps by their
    tokens, the sleep state, the LoRA adapters running and waiting, then speculation's counters when it is on);
    the four that cost a pass are recomputed every LOAD_EVERY_S."""

    def __init__(self) -> None:
        self._at, self._pending, self._rate, self._steps_left = float("-inf"), 0, 0.0, ()
        self._loras: tuple[list[str], list[str]] = ([], [])

    def of(self, engine: Engine, fresh: bool = False) -> tuple:
        pool, now = engine.scheduler.pool, time.monotonic()
        if fresh or now - self._at >= LOAD_EVERY_S:
            self._at = now
            self._pending, self._rate = engine.scheduler.pending_prefill_tokens(), engine.generated.per_second()
            self._steps_left = steps_left(list(engine.scheduler.running))
            self._loras = engine.lora_adapters() if engine.scheduler.max_loras else ([], [])
        return (
            engine.num_running,
            engine.queued(),  # the API servers take their own aborts off it
            pool.num_used,
            pool.num_free,
            pool.num_cached,
            pool.queried_tokens,
            pool.hit_tokens,
            self._pending,
            self._rate,
            self._steps_left,
            engine.pace.decode_step_s,
            engine.pace.prefill_token_s,
            engine.scheduler.num_preemptions,
            engine.prompt_tokens_computed,
            engine.prompt_tokens_transferred,
            engine.step_tokens.figures(),
            engine.sleep_state(),
            self._loras,
            *(tuple(engine.speculator.counters().values()) if engine.speculator is not None else ()),
        )


def _compile(engine: Engine, token: int, constraint, send) -> None:
    """Compile (or find) a grammar on the core's compile workers; answer (token, error or None) when done."""

    def reply(future) -> None:
        error = future.exception()
        if error is not None and not isinstance(error, ServiceError):
            error = fail(Reason.INVALID_GRAMMAR, f"the grammar failed to compile: {error}")
        send(pickle.dumps((token, error)))

    if engine.grammars is None:
        send(pickle.dumps((token, fail(Reason.STRUCTURED_OUTPUTS_UNAVAILABLE, "this engine has no tokenizer"))))
        return
    engine.grammars.get(constraint).add_done_callback(reply)


MARSHALLED, PICKLED, REPLY = b"M", b"P", b"R"  # the first byte of every message from the core
LOAD_EVERY_S = 0.05


def _logprob_rows(rows: list[RowLogprobs]) -> list[tuple]:
    return [(r.logprob, r.rank, r.top_ids, r.top_logprobs) for r in rows]


def _pack(state: RequestState, out: StepOutput) -> tuple:
    deltas = [
        (
            d.index,
            d.token_ids,
            _logprob_rows(d.logprobs) if d.logprobs else None,
            d.finish_reason,
            d.stop,
            d.speculation,
        )
        for d in out.deltas
    ]
    rows = _logprob_rows(out.prompt_logprobs) if out.prompt_logprobs else None
    prompt = (rows, out.prompt_token_id_logprobs) if rows or out.prompt_token_id_logprobs else None
    stamps = state.scheduled_at, state.first_token_at, state.last_token_at
    preempted = sum(seq.num_preemptions for seq in state.seqs)
    return state.request_id, deltas, prompt, out.cached_tokens, state.done, stamps, out.weight_version, preempted


def _unpack_output(deltas: list[tuple], prompt: tuple | None, cached_tokens: int | None, version: str) -> StepOutput:
    """`prompt`: (prompt logprob rows or None, prompt token id logprobs or None), or None."""
    rows, named = prompt or (None, None)
    output = StepOutput(
        [
            ChoiceDelta(index, tokens, [RowLogprobs(*r) for r in logprobs] if logprobs else [], reason, stop, counts)
            for index, tokens, logprobs, reason, stop, counts in deltas
        ],
        [RowLogprobs(*r) for r in rows] if rows else None,
        named,
        cached_tokens=cached_tokens,
    )
    output.weight_version = version
    return output


class EngineProcess(EngineFront):
    """The engine's interface to the server (an `EngineAPI`), backed by an engine core in a child process."""

    def __init__(
        self, process, commands, results, load: engine_pb2.GetLoadResponse, stall_timeout_s: float, shared: bool
    ):
        """`process`: the core, when this API server started it; None for the other API servers of a core.
        `shared`: other API servers use the core too."""
        super().__init__(load.max_waiting)
        self._process, self._commands, self._results = process, commands, results
        self._shared = shared
        self._gone = False  # the core's results pipe closed
        self._load = load
        self._healthy = True
        self._submitted = 0  # sequences sent since the child last reported its load
        self._pace: tuple = ((), 0.0, 0.0)  # the core's steps_left, decode_step_s, prefill_token_s
        self.step_tokens = StepTokens()  # the core's
        self._sleep: tuple[bool, int] = (False, 0)  # the core's sleep state (Controls.sleeping, level)
        self.stall_timeout_s = stall_timeout_s
        self._last_heard = time.monotonic()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._replies: dict[int, asyncio.Future] = {}  # compiles and aborts the core has not answered yet
        self._next_token = 0
        self.grammar_timeout_s = structured_output_rules.COMPILE_TIMEOUT_S
        self.kv_events: KvHub | None = None  # this server's copy of the core's KV-event hub (kv_relay.py)
        self._kv_asked: asyncio.Future | None = None
        self.refusing = False  # the core is paused in abort or wait mode (controls.refuses)
        self.weight_version = INITIAL_VERSION  # the core's, as its last control answer or output had it

    @classmethod
    def launch(cls, builder, stall_timeout_s: float, api_servers: int = 1) -> tuple[LoadedEngine, list[tuple]]:
        """Start the child, wait until its engine is built, and return its description with this as the engine,
        and the (commands, results) pipes to hand the other `api_servers - 1` API servers."""
        try:
            pickle.dumps(builder)
        except (pickle.PicklingError, AttributeError, TypeError) as error:
            raise TypeError(
                "--engine-core process builds the engine in a child process from a pickled builder: pass "
                f"a module-level function or a functools.partial of one ({error})"
            ) from None
        context = multiprocessing.get_context("spawn")
        core_ends, ours = [], []
        for _ in range(api_servers):
            commands_read, commands_write = context.Pipe(duplex=False)
            results_read, results_write = context.Pipe(duplex=False)
            core_ends.append((commands_read, results_write))
            ours.append((commands_write, results_read))
        process = context.Process(target=_child, args=(builder, core_ends), daemon=True, name="engine-core")
        process.start()
        for commands_read, results_write in core_ends:
            commands_read.close()
            results_write.close()
        try:
            commands, results = ours[0]
            loaded = cls.attach(commands, results, stall_timeout_s, process, shared=api_servers > 1)
        except EOFError:
            process.join()
            raise RuntimeError(f"the engine core exited while loading (exit code {process.exitcode})") from None
        return loaded, ours[1:]

    @classmethod
    def attach(cls, commands, results, stall_timeout_s: float, process=None, shared: bool = True) -> LoadedEngine:
        """This API server's face of a core: waits for the core's description on `results`."""
        described, load = pickle.loads(results.recv_bytes()[1:])
        engine = cls(process, commands, results, load, stall_timeout_s, shared)
        engine.grammar_timeout_s = described.limits.grammar_timeout_s
        return replace(described, engine=engine)

    # ---- the EngineAPI ----------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        loop.add_reader(self._results.fileno(), self._receive, loop)

    def stop(self) -> None:
        if self._loop is not None and not self._gone:
            self._loop.remove_reader(self._results.fileno())
        if self._process is None:  # the core is the first API server's to stop
            self._commands.close()
            return
        self._send("stop", None)
        self._process.join(30)
        if self._process.is_alive():
            self._process.kill()

    def _alive(self) -> bool:
        return not self._gone and (self._process is None or self._process.is_alive())

    def sleep_state(self) -> tuple[bool, int]:
        return self._sleep

    def load(self) -> engine_pb2.GetLoadResponse:
        load = engine_pb2.GetLoadResponse()
        load.CopyFrom(self._load)
        load.waiting = self.num_waiting
        load.utilization = utilization(load.running, load.max_running, load.kv_blocks_used, load.kv_blocks_free)
        return load

    @property
    def num_running(self) -> int:
        return self._load.running

    def queued(self) -> int:
        return self._load.waiting + self._submitted

    def _backlog(self) -> Backlog:
        load = self._load
        return Backlog(load.running, load.max_running, self.queued(), load.pending_prefill_tokens, *self._pace)

    def submit(self, request_id: str, seqs: list[Sequence], owner: str | None = None) -> RequestState:
        if not self._alive():
            raise fail(Reason.ENGINE_CORE_EXITED, "the engine core process exited")
        if self.refusing:
            raise fail(Reason.ENGINE_PAUSED, "the engine is paused for a weight update: try again after /resume")
        state = self._register(request_id, seqs)
        if not self._send("add", (request_id, seqs, owner)):
            del self.requests[request_id]
            raise fail(Reason.ENGINE_CORE_EXITED, "the engine core process exited")
        self._submitted += len(seqs)
        return state

    def _send_abort(self, request_ids: list[str]) -> None:
        self._send("abort", request_ids)  # a core that is gone runs nothing

    async def abort_elsewhere(self, request_ids: list[str], owner: str | None) -> list[str]:
        """The requests other API servers of the core hold that an Abort naming `request_ids` for `owner` (None: a
        trusted caller) reaches (tenancy.reaches), aborted: their engine keys."""
        if not self._shared or not request_ids or not self._alive():
            return []
        return await self._ask("abort_any", request_ids, owner)

    async def reset_prefix_cache(self) -> int:
        return await self._ask("reset_prefix_cache")

    async def control(self, op: str, *args):
        """A control op (controls.py), run where the step loop runs."""
        if (refuse := refuses(op, args)) is not None:
            self.refusing = refuse
        answer = await self._ask("control", op, args)
        if op in ("finish_update", "weight_info"):
            self.weight_version = answer[0]  # both answer (version, ...)
        elif op == "set_version":
            self.weight_version = args[0]
        if op == "wake_up" and answer:  # awake: the pause that sleep began has ended in the core
            self.refusing = False
        return answer

    async def kv_hub(self) -> KvHub | None:
        """The copy of the core's hub, which the first call asks the core to fill (None: the core has none)."""
        if self._kv_asked is None:
            self._kv_asked = asyncio.ensure_future(self._ask("kv_subscribe"))
        await asyncio.shield(self._kv_asked)
        return self.kv_events

    async def compile_grammar(self, constraint: Constraint) -> None:
        """The grammar is compiled and cached in the core, where the step loop uses it; the core answers at the
        latest once the compile has run its own time bound (queueing behind other compiles does not count)."""
        await self._ask("compile", constraint)

    async def _ask(self, kind: str, *payload):
        """Send a command the core answers (REPLY with this call's token) and wait for the answer."""
        token, self._next_token = self._next_token, self._next_token + 1
        answer = self._replies[token] = asyncio.get_running_loop().create_future()
        try:
            if not self._send(kind, (token, *payload)):
                raise fail(Reason.ENGINE_CORE_EXITED, "the engine core process exited")
            return await asyncio.shield(answer)
        finally:
            self._replies.pop(token, None)

    def _send(self, kind: str, payload) -> bool:
        """False when the child is gone (stopped, or exited on its own)."""
        try:
            self._commands.send((kind, payload))
            return True
        except OSError:
            return False

    def healthy(self) -> bool:
        """False when the child died, reports a stalled step loop, or has gone silent with work pending."""
        if not self._alive():
            return False
        silent = time.monotonic() - self._last_heard
        return self._healthy and (not self.requests or silent < self.stall_timeout_s)

    # ---- outputs from the child -------------------------------------------------------------------

    def _receive(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            while self._results.poll():
                message = self._results.recv_bytes()
                self._last_heard = time.monotonic()
                if message[:1] == PICKLED:
                    for request_id, error in pickle.loads(message[1:]):
                        self._deliver(request_id, StepOutput(error=error), True)
                    continue
                if message[:1] == kv_relay.KV_BATCH:
                    self.kv_events = kv_relay.take(self.kv_events, message)
                    continue
                if message[:1] == REPLY:
                    token, answered = pickle.loads(message[1:])
                    answer = self._replies.get(token)
                    if answer is not None and not answer.done():
                        if isinstance(answered, BaseException):
                            answer.set_exception(answered)
                        else:
                            answer.set_result(answered)
                    continue
                rows, load, self._healthy = marshal.loads(memoryview(message)[1:])
                (
                    self._load.running,
                    self._load.waiting,
                    self._load.kv_blocks_used,
                    self._load.kv_blocks_free,
                    self._load.kv_blocks_cached,
                    self._load.prefix_cache_queried_tokens,
                    self._load.prefix_cache_hit_tokens,
                    self._load.pending_prefill_tokens,
                    self._load.generated_tokens_per_s,
                ) = load[:9]
                self._pace, spec = load[9:12], load[18:]
                figures = self._load
                figures.preemptions, figures.prompt_tokens_computed, figures.prompt_tokens_transferred = load[12:15]
                self.step_tokens.take(load[15])
                self._sleep = load[16]
                figures.running_lora_adapters[:], figures.waiting_lora_adapters[:] = load[17]
                if spec:  # speculation's counters (Speculator.counters, in its order)
                    drafts, draft_tokens, accepted, per_pos = spec
                    figures.spec_decode_num_drafts, figures.spec_decode_num_draft_tokens = drafts, draft_tokens
                    figures.spec_decode_num_accepted_tokens = accepted
                    figures.spec_decode_num_accepted_tokens_per_pos[:] = per_pos
                self._submitted = 0
                for request_id, deltas, prompt, cached, done, stamps, version, preempted in rows:
                    self.weight_version = version
                    if request_id in self.requests:
                        self.requests[request_id].preempted = preempted
                        self._deliver(request_id, _unpack_output(deltas, prompt, cached, version), done, stamps)
        except (EOFError, OSError):
            self._gone = True
            loop.remove_reader(self._results.fileno())
            log.error("engine core process exited (code %s)", self._process.exitcode if self._process else "?")
            failure = fail(Reason.ENGINE_CORE_EXITED, "the engine core process exited")
            for request_id in list(self.requests):
                self._deliver(request_id, StepOutput(error=failure), True)
            for answer in self._replies.values():
                if not answer.done():
                    answer.set_exception(failure)

    def _deliver(self, request_id: str, output: StepOutput, done: bool, stamps: tuple = (None, None, None)) -> None:
        """`stamps`: the core's scheduled, first and latest token perf_counter() stamps (one clock per host)."""
        state = self.requests.get(request_id)
        if state is None:
            return
        state.scheduled_at, state.first_token_at, state.last_token_at = stamps
        state.outbox.put(output)
        if done:
            state.done = True
            del self.requests[request_id]
