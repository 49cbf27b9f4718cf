"""Background Responses (`background: true`): generated on after the create call answered, in the replica that
took them, their progress kept in the response store.

A run is stored `queued` when it starts, `in_progress` at its first event, and its last Response when it ends:
`completed` / `incomplete`, `failed` (the hop's typed error, as a stream reports it), or `cancelled` (the output
so far, the item cut short `incomplete`). It always runs as a stream (shaped_route.events), whose events a
`stream: true` create call keeps (response_events.EventLog) and reads, as `GET ?stream=true` does later: a client
that leaves stops reading, never the run; the log is stored with the last Response. Cancelling a run
cancels its task, which cancels the engine and derender calls (hops.LiveGeneration: the engine aborts the
sequence and frees its cache) before the cancel is answered. A run's deadline is the store's TTL: a response
that outlives its stored copy is of no use. At most `limit` run at once (TOO_MANY_BACKGROUND_RESPONSES past it);
`close` cancels them all.
"""

from __future__ import annotations

import asyncio
import logging
import time

from pipeline_svc import shaped_route
from pipeline_svc.hops import Hops
from pipeline_svc.response_events import EventLog
from pipeline_svc.response_store import ResponseStore
from pipeline_svc.responses_response import ResponseStream
from pipeline_svc.shaped_route import Event
from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.reasons import Reason, fail

log = logging.getLogger(__name__)


class _Deadline:
    """What LiveGeneration asks of a call's context: the time left, here from the run's own deadline."""

    def __init__(self, seconds: float):
        self.until = time.monotonic() + seconds

    def time_remaining(self) -> float:
        return max(self.until - time.monotonic(), 0.0)


class Run:
    """One background response: its task, its last stored Response, and a streamed one's events."""

    def __init__(self, runs: BackgroundRuns, shape: ResponseStream, items: list, owner: str | None, stream: bool):
        self.runs, self.shape, self.items, self.owner = runs, shape, items, owner
        self.response = shape.snapshot("queued")  # the last Response stored
        self.id: str = self.response["id"]
        self.events = EventLog() if stream else None
        self.task: asyncio.Task | None = None

    def _keep(self, response: dict, events: EventLog | None = None) -> None:
        """Store `response`, with its ended `events` if they fit (else without them); one larger than the store is
        kept `failed` without its output (the last one stored would otherwise stay, `in_progress` until it
        expires)."""
        store, self.response = self.runs.store, response
        if store.put(response, self.items, self.owner, events):
            return
        if events is not None and store.put(response, self.items, self.owner):
            log.warning("background response %s stored without its events (%d bytes)", self.id, events.bytes)
            return
        message = "the response is larger than the response store (--response-store-mb)"
        self.response = response | {
            "status": "failed",
            "output": [],
            "error": {"code": "server_error", "message": message},
        }
        store.put(self.response, self.items, self.owner)

    def _send(self, events: list[Event]) -> None:
        if self.events is not None:
            self.events.add(events)

    def _end(self, response: dict) -> None:
        """The run's last Response, stored with its events."""
        if self.events is not None:
            self.events.end()
        self._keep(response, self.events)

    async def generate(self, hops: Hops, rendered: render_pb2.RenderChatResponse) -> None:
        deadline = _Deadline(self.runs.store.ttl_s)
        last: list[Event] = []
        try:
            async for event in shaped_route.events(hops, rendered, self.shape, deadline):
                if self.response["status"] == "queued":
                    self._keep(self.shape.snapshot("in_progress"))
                last = [event]
                self._send(last)
        except asyncio.CancelledError:
            self._send(self.shape.notice(fail(Reason.RESPONSE_CANCELLED, f"Response {self.id} was cancelled.")))
            self._end(self.shape.snapshot("cancelled"))
            raise
        except ServiceError as failure:  # before the first event: the stream's opening, then its failure
            last = self.shape.start() + self.shape.error(failure)
            self._send(last)
        except Exception:  # a bug here must still end the response, as `failed`
            log.exception("background response %s failed", self.id)
            last = self.shape.start() + self.shape.error(fail(Reason.UPSTREAM_LOST, "the generation failed"))
            self._send(last)
        finally:
            if self.events is not None:
                self.events.end()  # whatever happened, no reader waits on
        _, payload = last[-1]  # response.completed / .incomplete / .failed: the Response as it ended
        self._end(payload["response"])

    async def cancel(self) -> dict:
        """Stop the generation (if it still runs) and answer the Response as it ended."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.wait({self.task})
        return self.response


class BackgroundRuns:
    """This replica's running background responses, by id."""

    def __init__(self, store: ResponseStore, limit: int):
        self.store, self.limit = store, limit
        self._runs: dict[str, Run] = {}

    def start(
        self,
        hops: Hops,
        rendered: render_pb2.RenderChatResponse,
        echo: dict,
        items: list,
        owner: str | None,
        stream: bool,
        metrics: bool = False,
    ) -> Run:
        """Store the response `queued` and run its generation on; the run (its `response`, its `relay`); with
        `metrics` (vLLM's --enable-per-request-metrics) its finished Response has vLLM's `metrics`."""
        if len(self._runs) >= self.limit:
            raise fail(
                Reason.TOO_MANY_BACKGROUND_RESPONSES,
                f"this replica runs {self.limit} background responses already (--max-background-responses)",
                "background",
            )
        run = Run(self, ResponseStream(rendered, echo, metrics=metrics), items, owner, stream)
        if not self.store.put(run.response, items, owner):
            raise fail(
                Reason.UNSUPPORTED_FIELD,
                "`background` = true needs the response stored, and this one is larger than the store",
                "background",
            )
        run.task = asyncio.create_task(run.generate(hops, rendered), name=f"background {run.id}")
        self._runs[run.id] = run
        run.task.add_done_callback(lambda _: self._runs.pop(run.id, None))
        return run

    def running(self, response_id: str) -> Run | None:
        return self._runs.get(response_id)

    async def close(self) -> None:
        await asyncio.gather(*(run.cancel() for run in list(self._runs.values())))
