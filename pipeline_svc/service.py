"""The pipeline server: ChatService (typed), OpenAIService (OpenAI's JSON), AnthropicService (Anthropic's
Messages), ResponsesService (OpenAI's Responses) and EngineStreamService (the engine's stream for REST clients)
over one set of hops.

It holds no model, so it loads in no time and scales on its own. The gateway sends grpc.reflection and
grpc.health here too: `grpcurl list` against the gateway lists the whole contract.
"""

from __future__ import annotations

import grpc

from pipeline_svc.anthropic_service import AnthropicFrontDoor
from pipeline_svc.chat import ChatPipeline
from pipeline_svc.engine_stream import EngineStreamRelay
from pipeline_svc.fleet import Engines, Fleet
from pipeline_svc.hops import Hops
from pipeline_svc.openai_service import OpenAIFrontDoor
from pipeline_svc.responses_service import ResponsesFrontDoor
from scaleout.v1 import (
    anthropic_pb2,
    anthropic_pb2_grpc,
    chat_pb2,
    chat_pb2_grpc,
    engine_stream_pb2,
    engine_stream_pb2_grpc,
    openai_pb2,
    openai_pb2_grpc,
    responses_pb2,
    responses_pb2_grpc,
)
from scaleout_common.config import server_parser
from scaleout_common.server import contract_service_names, run


class PipelineService:
    service_names = (
        chat_pb2.DESCRIPTOR.services_by_name["ChatService"].full_name,
        openai_pb2.DESCRIPTOR.services_by_name["OpenAIService"].full_name,
        anthropic_pb2.DESCRIPTOR.services_by_name["AnthropicService"].full_name,
        responses_pb2.DESCRIPTOR.services_by_name["ResponsesService"].full_name,
        engine_stream_pb2.DESCRIPTOR.services_by_name["EngineStreamService"].full_name,
    )
    reflected_names = contract_service_names()

    def __init__(self, args):
        self.hops = Hops(args)
        self.fleet = Fleet(Engines.parse(args.engines), args.max_message_mb)

    def register(self, server: grpc.aio.Server) -> None:
        chat_pb2_grpc.add_ChatServiceServicer_to_server(ChatPipeline(self.hops), server)
        openai_pb2_grpc.add_OpenAIServiceServicer_to_server(OpenAIFrontDoor(self.hops), server)
        anthropic_pb2_grpc.add_AnthropicServiceServicer_to_server(AnthropicFrontDoor(self.hops), server)
        responses_pb2_grpc.add_ResponsesServiceServicer_to_server(ResponsesFrontDoor(self.hops), server)
        engine_stream_pb2_grpc.add_EngineStreamServiceServicer_to_server(EngineStreamRelay(self.hops), server)

    async def load(self) -> None:
        await self.hops.open()

    async def drain(self) -> None:
        pass

    async def close(self) -> None:
        await self.hops.close()
        await self.fleet.close()


def parser():
    p = server_parser("chat", 50054, "One-hop OpenAI-compatible routes over render, engine and derender")
    p.add_argument("--render-target", default="127.0.0.1:50051", help="render_svc address (or the gateway)")
    p.add_argument("--engine-target", default="127.0.0.1:50052", help="engine_svc address (or the gateway)")
    p.add_argument("--derender-target", default="127.0.0.1:50053", help="derender_svc address (or the gateway)")
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
