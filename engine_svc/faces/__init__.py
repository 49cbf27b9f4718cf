"""Faces that run beside the engine as processes of their own: clients of its gRPC API that speak another
project's worker protocol (one folder per protocol). They import only the contract and scaleout_common, so a
peer's dependencies stay out of the engine's process."""
