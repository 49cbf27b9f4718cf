"""SGLang's `/generate` answer, one per prompt and sample: `text`, `output_ids` and `meta_info`, as SGLang's
TokenizerManager builds them (0.5.23, its default non-incremental streaming: every event carries the whole text,
ids and logprobs so far).

Where each part comes from: the text, the ids it counts and why it finished from derender's completion chunks
(stop strings matched and trimmed there, `no_stop_trim` kept); logprobs and their ids from the engine's messages,
by position of those ids (the engine's output beyond a matched stop string is not counted, as derender does not).

| meta_info key            | from                                                                           |
|--------------------------|--------------------------------------------------------------------------------|
| id                       | the answer's rid                                                               |
| finish_reason            | null until the end; `length` {length: max_new_tokens}; `stop` {matched: the    |
|                          | stop string, or the stop token / EOS id}; `abort` {message}; prefill-only      |
|                          | (max_new_tokens 0): `length` {length: 0}, no text, ids or output logprobs      |
| prompt_tokens            | the prompt's token count                                                       |
| weight_version           | the engine's (its weight updates), "default" before any                        |
| completion_tokens        | the ids counted so far                                                         |
| cached_tokens            | the engine's prompt tokens served from its prefix cache                        |
| e2e_latency              | seconds from the request's arrival to this answer's end (finished only)        |
| input_token_logprobs     | [logprob, id, text] for prompt positions from logprob_start_len, the first of  |
|                          | them null whatever its position (SGLang's `[None] + logprobs[:-1]`)            |
| output_token_logprobs    | [logprob, id, text] per output id; `output_token_logprobs_length` its length   |
| input/output_top_logprobs| top_logprobs_num > 0: per position, its top [logprob, id, text] (null where    |
|                          | a position has none: the first of them)                                        |
`text` in the logprob triples is null unless `return_text_in_logprobs`, then each id decoded alone with special
tokens kept (SGLang's `tokenizer.batch_decode([[id]])`), asked of render (Detokenize), once per distinct id.
"""

from __future__ import annotations

import asyncio
import time

import grpc

from pipeline_svc.faces.sglang_request import Prompt
from scaleout.v1 import common_pb2, derender_pb2, render_pb2
from scaleout_common.errors import ServiceError

Triple = list  # [logprob | None, token id, text | None]
DETOKENIZE_CALLS = 16  # at once per request: a long prompt's ids must not flood render's queue


class TokenTexts:
    """Each token id's text alone, asked of render once per id (only when return_text_in_logprobs)."""

    def __init__(self, render, wanted: bool, context):
        self._render, self.wanted, self._context = render, wanted, context
        self._texts: dict[int, str] = {}

    async def fetch(self, ids: set[int]) -> None:
        missing = sorted(ids - self._texts.keys())
        calls = asyncio.Semaphore(DETOKENIZE_CALLS)

        async def one(token_id: int) -> None:
            request = render_pb2.DetokenizeRequest(tokens=[token_id], skip_special_tokens=False)
            async with calls:
                try:
                    answer = await self._render.Detokenize(request, timeout=self._context.time_remaining())
                except grpc.aio.AioRpcError as error:
                    raise ServiceError.from_rpc_error(error) from None
            self._texts[token_id] = answer.prompt

        await asyncio.gather(*(one(i) for i in missing))

    def triple(self, logprob: float | None, token_id: int) -> Triple:
        return [logprob, token_id, self._texts.get(token_id) if self.wanted else None]

    def top(self, top: common_pb2.TopLogprobs, num: int) -> list[Triple]:
        return [self.triple(lp, i) for i, lp in list(zip(top.token_ids, top.logprobs))[:num]]


class PromptRun:
    """One rendered prompt's engine messages (read from its LiveGeneration) and its n answers' state."""

    def __init__(self, prompt: Prompt, rendered: render_pb2.RenderedCompletion, started: float):
        self.prompt = prompt
        self.request = rendered.generate_request
        self.prompt_ids = list(self.request.token_ids)
        self.info = common_pb2.Usage()  # cached_tokens, from the engine's first message
        self.prompt_logprobs = common_pb2.TokenLogprobs()
        self.weight_version = ""
        self.read = 0  # engine messages consumed
        self.answers = [Answer(self, rid, started) for rid in prompt.rids]

    def engine(self, outputs: list) -> None:
        """The engine messages not read yet: prompt info, and each choice's logprobs by position."""
        for output in outputs[self.read :]:
            if output.HasField("prompt"):
                self.info.cached_tokens = output.prompt.cached_tokens
                self.prompt_logprobs = output.prompt.logprobs
            if output.weight_version:
                self.weight_version = output.weight_version
            for choice in output.choices:
                if choice.index < len(self.answers):
                    answer = self.answers[choice.index]
                    answer.logprobs.extend(choice.logprobs.logprobs)
                    answer.tops.extend(choice.logprobs.top)
                    answer.engine_ids.extend(choice.token_ids)
        self.read = len(outputs)

    def ids_to_name(self) -> set[int]:
        """Every id a logprob triple of this prompt will name (for TokenTexts)."""
        if not self.prompt.logprob:
            return set()
        ids = set(
            self.prompt_ids[max(self.prompt.logprob_start_len, 0) :] if self.prompt.logprob_start_len >= 0 else ()
        )
        for top in self.prompt_logprobs.top:
            ids.update(top.token_ids[: self.prompt.top_logprobs_num])
        for answer in self.answers:
            ids.update(answer.ids)
            for top in answer.tops[: len(answer.ids)]:
                ids.update(top.token_ids[: self.prompt.top_logprobs_num])
        return ids


class Answer:
    def __init__(self, run: PromptRun, rid: str, started: float):
        self.run, self.rid, self.started = run, rid, started
        self.text = ""
        self.ids: list[int] = []  # the ids derender counted
        self.engine_ids: list[int] = []
        self.logprobs: list[float] = []  # the engine's, by output position
        self.tops: list[common_pb2.TopLogprobs] = []
        self.finish: dict | None = None
        self.e2e: float | None = None

    def feed(self, choice: derender_pb2.CompletionChoice) -> None:
        prefill_only = self.run.prompt.prefill_only  # its one generated token is not shown
        if not prefill_only:
            self.text += choice.text
            self.ids.extend(choice.token_ids)
        if choice.finish_reason:
            self.finish = {"type": "length", "length": 0} if prefill_only else self._finish(choice)
            self.e2e = time.monotonic() - self.started

    def _finish(self, choice: derender_pb2.CompletionChoice) -> dict:
        if choice.finish_reason == "length":
            return {"type": "length", "length": self.run.request.sampling_params.max_tokens}
        if choice.finish_reason == "stop":
            which = choice.WhichOneof("stop_reason")
            matched = (
                getattr(choice, which) if which else choice.end_token_id if choice.HasField("end_token_id") else None
            )
            return {"type": "stop", "matched": matched}
        return {"type": "abort", "message": choice.finish_reason}

    def json(self, texts: TokenTexts, with_prompt_ids: bool) -> dict:
        run = self.run
        meta: dict = {
            "id": self.rid,
            "finish_reason": self.finish,
            "prompt_tokens": len(run.prompt_ids),
            "weight_version": run.weight_version or "default",
        }
        if run.prompt.logprob:
            meta.update(self._logprobs(texts))
        meta["completion_tokens"] = len(self.ids)
        meta["cached_tokens"] = run.info.cached_tokens
        if self.e2e is not None:
            meta["e2e_latency"] = round(self.e2e, 6)
        out = {"text": self.text, "output_ids": list(self.ids), "meta_info": meta}
        if with_prompt_ids:
            out["prompt_token_ids"] = run.prompt_ids
        return out

    def _logprobs(self, texts: TokenTexts) -> dict:
        run, num = self.run, self.run.prompt.top_logprobs_num
        start = run.prompt.logprob_start_len
        positions = range(start, len(run.prompt_ids)) if start >= 0 else range(0)
        prompt_lps = run.prompt_logprobs
        inputs = [texts.triple(prompt_lps.logprobs[p - 1] if p > start else None, run.prompt_ids[p]) for p in positions]
        count = len(self.ids)
        outputs = [texts.triple(lp, i) for lp, i in zip(self.logprobs[:count], self.ids)]
        meta: dict = {"input_token_logprobs": inputs, "output_token_logprobs": outputs}
        meta["output_token_logprobs_length"] = len(outputs)
        if num > 0:
            meta["input_top_logprobs"] = [
                texts.top(prompt_lps.top[p - 1], num) if p > start and p - 1 < len(prompt_lps.top) else None
                for p in positions
            ]
            meta["output_top_logprobs"] = [texts.top(top, num) for top in self.tops[:count]]
        return meta
