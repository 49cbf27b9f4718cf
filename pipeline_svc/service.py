"""The pipeline server: ChatService (typed), OpenAIService (OpenAI's JSON), AnthropicService (Anthropic's
Messages), ResponsesService (OpenAI's Responses) and EngineStreamService (the engine's stream for REST clients)
over one set of hops; ResponseStoreService answers its peer replicas for the responses it stored; FleetService
(every engine replica's load and cache reset) over the fleet, and the router faces over both (SGLang's and vLLM's
server routes, pipeline_svc/faces/).

It holds no model, so it loads in no time and scales on its own. The gateway sends grpc.reflection and
grpc.health here too: `grpcurl list` against the gateway lists the whole contract, and a health check naming the
render, engine or derender service is answered by that role (role_health.py).
"""

from __future__ import annotations

import grpc

from pipeline_svc.anthropic_service import AnthropicFrontDoor
from pipeline_svc.chat import ChatPipeline
from pipeline_svc.engine_stream import EngineStreamRelay
from pipeline_svc.faces.sglang_rl import SGLangRl
from pipeline_svc.faces.sglang_server import SGLangServer
from pipeline_svc.faces.vllm_server import VllmServer
from pipeline_svc.fleet import Engines, Fleet
from pipeline_svc.fleet_metrics import FleetMetrics
from pipeline_svc.fleet_service import FleetOperations
from pipeline_svc.hops import Hops
from pipeline_svc.openai_service import OpenAIFrontDoor
from pipeline_svc.response_peers import Peers, ResponseStoreFrontDoor, StoredResponses
from pipeline_svc.response_store import ResponseStore
from pipeline_svc.responses_background import BackgroundRuns
from pipeline_svc.responses_service import ResponsesFrontDoor
from pipeline_svc.role_health import role_health
from scaleout.v1 import (
    anthropic_pb2,
    anthropic_pb2_grpc,
    chat_pb2,
    chat_pb2_grpc,
    engine_stream_pb2,
    engine_stream_pb2_grpc,
    fleet_metrics_pb2,
    fleet_metrics_pb2_grpc,
    fleet_pb2,
    fleet_pb2_grpc,
    openai_pb2,
    openai_pb2_grpc,
    responses_pb2,
    responses_pb2_grpc,
    sglang_rl_pb2,
    sglang_rl_pb2_grpc,
    sglang_server_pb2,
    sglang_server_pb2_grpc,
    vllm_server_pb2,
    vllm_server_pb2_grpc,
)
from scaleout_common.config import server_parser
from scaleout_common.server import contract_service_names, run


class PipelineService:
    service_names = (
        chat_pb2.DESCRIPTOR.services_by_name["ChatService"].full_name,
        openai_pb2.DESCRIPTOR.services_by_name["OpenAIService"].full_name,
        anthropic_pb2.DESCRIPTOR.services_by_name["AnthropicService"].full_name,
        responses_pb2.DESCRIPTOR.services_by_name["ResponsesService"].full_name,
        responses_pb2.DESCRIPTOR.services_by_name["ResponseStoreService"].full_name,
        engine_stream_pb2.DESCRIPTOR.services_by_name["EngineStreamService"].full_name,
        fleet_metrics_pb2.DESCRIPTOR.services_by_name["FleetMetricsService"].full_name,
        fleet_pb2.DESCRIPTOR.services_by_name["FleetService"].full_name,
        sglang_server_pb2.DESCRIPTOR.services_by_name["SGLangServerService"].full_name,
        sglang_rl_pb2.DESCRIPTOR.services_by_name["SGLangRlService"].full_name,
        vllm_server_pb2.DESCRIPTOR.services_by_name["VllmServerService"].full_name,
    )
    reflected_names = contract_service_names()

    def __init__(self, args):
        self.args = args
        self.hops = Hops(args)
        store = ResponseStore(args.response_store_size, args.response_store_mb << 20, args.response_store_ttl_s)
        peers = Peers(args.response_peers, args.max_message_mb)
        runs = BackgroundRuns(store, args.max_background_responses)
        self.stored = StoredResponses(store, peers, runs, args.response_advertise)
        self.fleet = Fleet(Engines.parse(args.engines), args.max_message_mb)

    def register(self, server: grpc.aio.Server) -> None:
        chat_pb2_grpc.add_ChatServiceServicer_to_server(ChatPipeline(self.hops), server)
        args = self.args
        openai = OpenAIFrontDoor(
            self.hops, args.enable_force_include_usage, args.return_tokens_as_token_ids, args.enable_per_request_metrics
        )
        openai_pb2_grpc.add_OpenAIServiceServicer_to_server(openai, server)
        anthropic_pb2_grpc.add_AnthropicServiceServicer_to_server(AnthropicFrontDoor(self.hops), server)
        responses = ResponsesFrontDoor(self.hops, self.stored, args.enable_per_request_metrics)
        responses_pb2_grpc.add_ResponsesServiceServicer_to_server(responses, server)
        store = ResponseStoreFrontDoor(self.stored.store, self.stored.runs)
        responses_pb2_grpc.add_ResponseStoreServiceServicer_to_server(store, server)
        engine_stream_pb2_grpc.add_EngineStreamServiceServicer_to_server(EngineStreamRelay(self.hops), server)
        fleet_metrics_pb2_grpc.add_FleetMetricsServiceServicer_to_server(FleetMetrics(self.fleet), server)
        fleet = FleetOperations(self.fleet)
        fleet_pb2_grpc.add_FleetServiceServicer_to_server(fleet, server)
        sglang_server_pb2_grpc.add_SGLangServerServiceServicer_to_server(SGLangServer(self.hops, fleet), server)
        sglang_rl_pb2_grpc.add_SGLangRlServiceServicer_to_server(SGLangRl(fleet), server)
        vllm_server_pb2_grpc.add_VllmServerServiceServicer_to_server(VllmServer(fleet, openai, self.hops), server)

    def listening(self, port: int) -> None:
        self.stored.listening(self.args.host, port)

    async def load(self) -> None:
        await self.hops.open()

    async def health_elsewhere(self, name: str):
        """Health checks naming another role's service: asked of that role (pipeline_svc/role_health.py)."""
        return await role_health(self.hops.channels, name)

    async def drain(self) -> None:
        pass

    async def close(self) -> None:
        await self.stored.runs.close()
        await self.hops.close()
        await self.stored.peers.close()
        await self.fleet.close()


def parser():
    p = server_parser("chat", 50054, "One-hop OpenAI-compatible routes over render, engine and derender")
    p.add_argument("--render-target", default="127.0.0.1:50051", help="render_svc address (or the gateway)")
    p.add_argument("--engine-target", default="127.0.0.1:50052", help="engine_svc address (or the gateway)")
    p.add_argument("--derender-target", default="127.0.0.1:50053", help="derender_svc address (or the gateway)")
    p.add_argument(
        "--response-store-size", type=int, default=1000, help="stored Responses kept (oldest evicted; 0: store none)"
    )
    p.add_argument("--response-store-mb", type=int, default=64, help="memory the stored Responses' JSON may take")
    p.add_argument("--response-store-ttl-s", type=float, default=3600.0, help="how long a stored Response is kept")
    p.add_argument(
        "--max-background-responses",
        type=int,
        default=64,
        help="`background: true` Responses this replica generates at once (more: 429 TOO_MANY_BACKGROUND_RESPONSES)",
    )
    p.add_argument(
        "--response-peers",
        default="",
        help="every pipeline replica as host:port, comma-separated (a name stands for all its addresses, e.g. a "
        "headless Service): where a stored Response another replica kept is fetched",
    )
    p.add_argument(
        "--response-advertise",
        default="",
        help="this replica's host:port as --response-peers resolves it (default: --host and the bound port)",
    )
    p.add_argument(
        "--enable-force-include-usage",
        action="store_true",
        help="vLLM's flag: every streamed chat or completion carries usage on each chunk and a last usage chunk, "
        "as if it asked for stream_options include_usage and continuous_usage_stats",
    )
    p.add_argument(
        "--return-tokens-as-token-ids",
        action="store_true",
        help="vLLM's flag: logprobs name tokens `token_id:<id>` for requests that do not set "
        "return_tokens_as_token_ids themselves",
    )
    p.add_argument(
        "--enable-per-request-metrics",
        action="store_true",
        help="vLLM's flag: chat and completion answers carry vLLM's `metrics` (time to first token, queue time, "
        "generation time, mean inter-token latency, tokens/s, from the engine's timings); a stream on its usage chunk; "
        "a finished Response too",
    )
    p.add_argument(
        "--engines",
        default="127.0.0.1:50052",
        help="every engine replica, called directly for what concerns each one (loads, cache resets): "
        "host:port[,host:port...]; a host may resolve to many (a Kubernetes headless Service), re-resolved on use",
    )
    return p


def main() -> None:
    args = parser().parse_args()
    run(PipelineService(args), args)


if __name__ == "__main__":
    main()
