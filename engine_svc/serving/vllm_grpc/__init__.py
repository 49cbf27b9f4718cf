"""The engine's vLLM gRPC face (`vllm.grpc.engine.VllmEngine`): mapping.py holds the field table."""
