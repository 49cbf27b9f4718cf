"""The engine's control state (EngineControlService's RL operations), changed on the step thread between steps.

The policy:
- Pause ABORT: every live request ends with FINISH_REASON_ABORT. WAIT: answered once no request is left. Both
  refuse new requests (ENGINE_PAUSED) from the moment the call is posted (`refuses`, on the caller's thread, so
  none slips in behind it) until Resume. KEEP: live requests stay, running ones with their KV blocks; new ones
  queue. While paused no step runs.
- Weight update: from StartWeightUpdate to FinishWeightUpdate no step runs, so no token comes from half-loaded
  weights. Finish empties the prefix cache (an AllBlocksCleared event) and sends every running sequence back to
  recompute its prompt and output so far: no K/V computed by the old weights is read again, and every token
  sampled after Finish is the new weights' continuation of what came before. Then the version changes; each
  step's outputs carry the version they were sampled under.
- Sleep: a pause in its mode, then level 1 frees the KV cache (running sequences recompute after) and moves the
  weights to host memory (on CPU they are there already and stay); level 2 frees the cache and drops the weights
  (WakeUp reallocates them uninitialised: a weight update must follow). Level 0 only pauses. WakeUp restores the
  tags named (all by default); once nothing is asleep any pause ends (vLLM's: a /pause too). ReleaseKvCache frees
  the KV cache of a paused engine (running sequences recompute after WakeUp). A draft model (speculation) sleeps
  with the target: its cache freed, its weights moved to host memory at either level (no update reloads them).
- LoRA adapters (loras.py) load and unload between steps; an unloaded adapter's weights stay until no sequence runs
  with it.
- StartProfile / StopProfile run the torch profiler over the steps (profiler.py).
- AbortRequests ends live requests (by public id, or all) without pausing. ZeroWeights (vLLM's weight_checker
  reset) drops the prefix cache and recomputes running sequences, as a weight update does.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable

from engine_svc.model import weights
from engine_svc.model.lora import LoraRefused
from engine_svc.scheduling.lora_cards import LoraCard
from engine_svc.serving.loras import LoraRegistry
from engine_svc.serving.weight_transfer import WeightTransfer
from scaleout.v1 import control_pb2
from scaleout_common.errors import quote
from scaleout_common.reasons import Reason, fail

ABORT, WAIT, KEEP = control_pb2.PAUSE_MODE_ABORT, control_pb2.PAUSE_MODE_WAIT, control_pb2.PAUSE_MODE_KEEP
WEIGHTS, KV_CACHE = control_pb2.SLEEP_TAG_WEIGHTS, control_pb2.SLEEP_TAG_KV_CACHE
INITIAL_VERSION = "default"  # vLLM's, until a trainer names one


def refuses(op: str, args: tuple) -> bool | None:
    """Whether posting `op` turns new requests away (True), lets them in again (False), or leaves that (None)."""
    if op in ("pause", "sleep"):
        return (args[-1] or ABORT) != KEEP
    return False if op == "resume" else None


class Controls:
    """`engine`'s control state. Every op but `refuses` runs on the step thread, taking the step's outputs."""

    OPS = frozenset(
        {"pause", "resume", "pause_state", "abort", "sleep", "wake_up", "sleep_state", "release_kv"}
        | {"init_transfer", "start_update", "update_weights", "finish_update", "set_version", "weight_info"}
        | {"shutdown_transfer", "checksums", "zero_weights", "load_lora", "unload_lora"}
        | {"start_profile", "stop_profile"}
    )

    def __init__(self, engine):
        self.engine = engine
        self.paused: int | None = None  # the PauseMode in force
        self.draining: list[tuple[concurrent.futures.Future, Callable[[], object]]] = []  # WAIT: answered when idle
        self.updating = False
        self.sleeping, self.level = False, 0
        self.asleep: set[int] = set()  # SleepTags released
        self.version = INITIAL_VERSION
        self.transfer: WeightTransfer | None = None
        self.memory = weights.Memory(engine.runner)
        self.draft_memory: weights.Memory | None = None  # a draft model's (set by the loader)
        self._slots: dict | None = None

    @property
    def frozen(self) -> bool:
        """No step may run."""
        return self.paused is not None or self.updating or bool(self.asleep)

    # ---- pause -------------------------------------------------------------------------------------------------

    def pause(self, outputs, mode: int, then: Callable[[], object] = lambda: 0):
        mode = mode or ABORT
        if mode == WAIT:
            future: concurrent.futures.Future = concurrent.futures.Future()
            self.draining.append((future, then))
            self.after_step()
            return future
        aborted = self.engine.abort_all(outputs) if mode == ABORT else 0
        self.paused = mode
        return then() or aborted

    def after_step(self) -> None:
        """Answer the WAIT pauses once no request is left."""
        if self.draining and not self.engine.requests:
            self.paused = self.paused or WAIT
            draining, self.draining = self.draining, []
            for future, then in draining:
                future.set_result(then())

    def resume(self, outputs) -> None:
        if self.updating:
            raise fail(Reason.WEIGHT_TRANSFER_STATE, "a weight update is in progress: FinishWeightUpdate first")
        self.paused = None
        self.engine.refusing = False
        draining, self.draining = self.draining, []
        for future, _ in draining:  # a wait pause (or sleep) overtaken by this resume: answered, nothing held
            future.set_result(0)

    def pause_state(self, outputs) -> tuple[bool, int]:
        return self.paused is not None, self.paused or 0

    def abort(self, outputs, request_ids: list[str]) -> int:
        """End the live requests of these ids (all when none), paused or not; how many."""
        return self.engine.abort_all(outputs, frozenset(request_ids))

    # ---- sleep -------------------------------------------------------------------------------------------------

    def sleep(self, outputs, level: int, mode: int):
        if self.updating:
            raise fail(Reason.WEIGHT_TRANSFER_STATE, "a weight update is in progress: FinishWeightUpdate first")
        return self.pause(outputs, mode, lambda: self._release(level))

    def _release(self, level: int) -> None:
        self.sleeping, self.level = True, max(self.level, level)
        if level == 0:
            return
        self._recompute_all()
        for memory in self._memories():
            memory.free_kv()
        self.asleep.add(KV_CACHE)
        device = self.engine.runner.device
        if level == 2 or device.type == "cuda":  # level 1 on CPU: the weights are in host memory already
            self.memory.park_weights(keep=level == 1)
            if self.draft_memory is not None and device.type == "cuda":
                self.draft_memory.park_weights(keep=True)
            self.asleep.add(WEIGHTS)

    def wake_up(self, outputs, tags: list[int]) -> bool:
        """Restore `tags` (all when empty; SCHEDULING restores nothing); True once nothing is asleep (then any pause
        has ended)."""
        restored = False
        for tag in tags or (WEIGHTS, KV_CACHE):
            if tag in self.asleep:
                for memory in self._memories():
                    if tag == WEIGHTS:
                        memory.restore_weights()
                    else:
                        memory.restore_kv()
                if tag == WEIGHTS:
                    self._slots = None  # views of the data the weights had before
                self.asleep.discard(tag)
                restored = True
        if self.asleep:
            return False
        if restored:  # nothing holds a block now (_release sent every sequence back): warm-up may write them
            for memory in self._memories():
                memory.recapture()
        self.sleeping, self.level = False, 0
        if not self.updating:  # awake ends any pause, as vLLM's EngineCore.wake_up resumes its scheduler
            self.resume(outputs)
        return True

    def sleep_state(self, outputs) -> tuple[bool, int, list[int]]:
        return self.sleeping, self.level, sorted(self.asleep)

    def release_kv(self, outputs) -> None:
        """Free the KV cache of a paused engine (vLLM's release_kv_cache_memory); WakeUp (kv_cache) restores it."""
        if self.paused is None:
            raise fail(Reason.WEIGHT_TRANSFER_STATE, "the KV cache is released only while paused: /pause first")
        if WEIGHTS in self.asleep:
            raise fail(Reason.WEIGHT_TRANSFER_STATE, "the weights are asleep: WakeUp (weights) first")
        if KV_CACHE not in self.asleep:
            self._recompute_all()
            for memory in self._memories():
                memory.free_kv()
            self.asleep.add(KV_CACHE)

    def _memories(self) -> list[weights.Memory]:
        return [self.memory] if self.draft_memory is None else [self.memory, self.draft_memory]

    # ---- weights -----------------------------------------------------------------------------------------------

    def init_transfer(self, outputs, request: control_pb2.InitWeightTransferRequest, backend: str) -> str:
        """Join the trainer through `backend` (--weight-transfer-backend)."""
        if self.updating:
            raise fail(Reason.WEIGHT_TRANSFER_STATE, "a weight update is in progress: FinishWeightUpdate first")
        if self.transfer is None or self.transfer.backend != backend:
            self.close()
            self.transfer = WeightTransfer(backend, self.engine.runner.device)
        return self.transfer.init(request)

    def start_update(self, outputs) -> None:
        if self.transfer is None or not self.transfer.joined:
            raise fail(Reason.WEIGHT_TRANSFER_STATE, "StartWeightUpdate before InitWeightTransfer")
        self._weights()
        self.updating = True

    def update_weights(self, outputs, request: control_pb2.UpdateWeightsRequest) -> int:
        if not self.updating or self.transfer is None or self._slots is None:
            raise fail(Reason.WEIGHT_TRANSFER_STATE, "UpdateWeights before StartWeightUpdate")
        return self.transfer.receive(self._slots, request)

    def finish_update(self, outputs, version: str | None) -> tuple[str, int]:
        if not self.updating:
            raise fail(Reason.WEIGHT_TRANSFER_STATE, "FinishWeightUpdate before StartWeightUpdate")
        self.updating = False
        if self.transfer is not None:
            self.transfer.finish()
        dropped = self._recompute_all()
        self.version = version or self.version
        return self.version, dropped

    def set_version(self, outputs, version: str) -> None:
        self.version = version

    def weight_info(self, outputs) -> tuple[str, str]:
        """The weights' version, and the name of the trainer's group joined (SGLang's), if any."""
        return self.version, self.transfer.group_name if self.transfer is not None else ""

    def shutdown_transfer(self, outputs) -> None:
        if self.updating:
            raise fail(Reason.WEIGHT_TRANSFER_STATE, "a weight update is in progress: FinishWeightUpdate first")
        self.close()
        self.transfer = None

    def checksums(self, outputs) -> dict[str, str]:
        return weights.digests(self._weights())

    def zero_weights(self, outputs) -> None:
        """Every weight zeroed; as after an update, nothing computed by the old weights is read again."""
        if self.updating:
            raise fail(Reason.WEIGHT_TRANSFER_STATE, "a weight update is in progress: FinishWeightUpdate first")
        weights.zero(self._weights())
        self._recompute_all()

    def _weights(self) -> dict:
        if WEIGHTS in self.asleep:
            raise fail(Reason.WEIGHT_TRANSFER_STATE, "the weights are asleep: WakeUp (weights) first")
        if self._slots is None:
            self._slots = weights.slots(self.engine.runner)
        return self._slots

    def load_lora(self, outputs, name: str, path: str, base_model_name: str) -> LoraCard:
        try:
            return self._loras().load(name, path, base_model_name)
        except LoraRefused as error:
            raise fail(Reason.LORA_REFUSED, str(error)) from None

    def unload_lora(self, outputs, name: str) -> LoraCard:
        scheduler = self.engine.scheduler
        in_use = {s.lora_id for s in scheduler.running} | {entry[2].lora_id for entry in scheduler.waiting}
        card = self._loras().unload(name, in_use)
        if card is None:  # vLLM's words
            raise fail(Reason.LORA_NOT_FOUND, f"The lora adapter {quote(name)} cannot be found.", "lora_name")
        return card

    def _loras(self) -> LoraRegistry:
        if self.engine.loras is None:
            raise fail(Reason.LORA_REFUSED, "this engine serves no LoRA adapters: start it with --enable-lora")
        return self.engine.loras

    # ---- profiling (profiler.py) --------------------------------------------------------------------------

    def start_profile(self, outputs, request: control_pb2.StartProfileRequest) -> str:
        return self._profiler().start(request)

    def stop_profile(self, outputs) -> tuple[str, int]:
        return self._profiler().stop()

    def _profiler(self):
        if self.engine.profiler is None:
            raise fail(Reason.PROFILER_OFF, "this engine was started without --profiler-config")
        return self.engine.profiler

    def _recompute_all(self) -> int:
        """Every running sequence back to the queue to recompute, and the prefix cache emptied; blocks dropped."""
        self.engine.scheduler.preempt_all()
        return self.engine.scheduler.pool.reset_prefix_cache()

    def close(self) -> None:
        if self.transfer is not None:
            self.transfer.close()
