"""Envoy gateway (REST transcoding + gRPC pass-through), the stack launcher and the one-hop chat pipeline."""
