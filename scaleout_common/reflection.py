"""gRPC server reflection, v1 and v1alpha, that resolves methods (grpcio-reflection's servicer, on a wider pool).

grpcio-reflection serves `grpc.reflection.v1alpha` only, and finds a symbol's file with the descriptor pool's
FindFileContainingSymbol, which in the upb protobuf runtime knows services and messages but not their members:
grpcurl's `describe scaleout.v1.EngineService.Generate` was answered "not found". So:
- the pool falls back from `pkg.Service.Method` (or a message's field, an enum's value) to its parent's file;
- v1, whose messages are v1alpha's field for field under another package, is the same servicer registered under
  the v1 name with v1alpha's (de)serializers, so clients that ask v1 first (grpcurl, Postman) get it.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf import descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc
from grpc_reflection.v1alpha._async import ReflectionServicer

V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"
SERVICE_NAMES = (V1_SERVICE_NAME, reflection.SERVICE_NAME)


class MemberResolvingPool:
    """A descriptor pool whose FindFileContainingSymbol also finds the file of a service's method, a message's
    field or an enum's value; everything else is the wrapped pool's."""

    def __init__(self, pool: descriptor_pool.DescriptorPool):
        self._pool = pool

    def __getattr__(self, name: str):
        return getattr(self._pool, name)

    def FindFileContainingSymbol(self, symbol: str):
        try:
            return self._pool.FindFileContainingSymbol(symbol)
        except KeyError:
            parent, _, member = symbol.rpartition(".")
            if not parent or member not in self._members(parent):
                raise
            return self._pool.FindFileContainingSymbol(parent)

    def _members(self, parent: str) -> Sequence[str]:
        for find, members in (
            (self._pool.FindServiceByName, "methods_by_name"),
            (self._pool.FindMessageTypeByName, "fields_by_name"),
            (self._pool.FindEnumTypeByName, "values_by_name"),
        ):
            try:
                return list(getattr(find(parent), members))
            except KeyError:
                continue
        return ()


def enable(service_names: Sequence[str], server: grpc.aio.Server) -> None:
    """Serve reflection v1 and v1alpha for `service_names` (and themselves) on `server`."""
    names = list(dict.fromkeys([*service_names, *SERVICE_NAMES]))
    servicer = ReflectionServicer(names, pool=MemberResolvingPool(descriptor_pool.Default()))
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    v1 = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(V1_SERVICE_NAME, {"ServerReflectionInfo": v1}),)
    )
