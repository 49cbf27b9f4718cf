"""FleetMetricsService: the engine replicas' `vllm:` series in one exposition, the gateway's `GET /metrics`.

Each replica's EngineService.GetMetrics comes over the fleet (fleet.py: every replica directly, the caller's
identity with each call), and the texts are merged with prometheus_client's own parser and writer: each family is
written once (one HELP and TYPE line) with every replica's samples, which its `engine` label keeps apart. A family
that another replica types differently (engines of two versions) keeps the first type and that replica's samples
are left out of it; a replica that does not answer is left out, unless none answers (then its failure is the
call's, so a scraper sees the status rather than an empty page).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from google.api import httpbody_pb2
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from pipeline_svc.fleet import Fleet
from scaleout.v1 import engine_pb2, engine_pb2_grpc, fleet_metrics_pb2_grpc
from scaleout_common.identity import caller, require_trusted


class _Families:
    """A collector of families already made (what generate_latest writes)."""

    def __init__(self, families: list[Metric]):
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def merge(texts: Iterable[str]) -> bytes:
    """Prometheus texts as one: each family once, with the samples of every text that types it alike."""
    families: dict[str, Metric] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            first = families.setdefault(family.name, family)
            if first is not family and first.type == family.type:
                first.samples += family.samples
    registry = CollectorRegistry()
    registry.register(_Families(list(families.values())))
    return generate_latest(registry)


class FleetMetrics(fleet_metrics_pb2_grpc.FleetMetricsServiceServicer):
    def __init__(self, fleet: Fleet):
        self.fleet = fleet

    async def GetMetrics(self, request, context):
        who = caller(context)
        require_trusted(who, "GetMetrics")
        answers = await self.fleet.call(
            engine_pb2_grpc.EngineServiceStub,
            "GetMetrics",
            engine_pb2.GetMetricsRequest(),
            time_left=context.time_remaining(),
            metadata=who.metadata(),
        )
        answered = [a.response.data.decode() for a in answers if a.error is None]
        failed = [a for a in answers if a.error is not None]
        if failed and not answered:
            error = failed[0].error
            assert error is not None
            raise dataclasses.replace(error, message=f"engine {failed[0].replica.address}: {error.message}")
        return httpbody_pb2.HttpBody(content_type=CONTENT_TYPE_PLAIN_0_0_4, data=merge(answered))
