"""The Envoy edge: the gateway config template and its renderer (REST transcoding, gRPC pass-through, balancing)."""
