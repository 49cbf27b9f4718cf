"""scaleout-engine: token-in/token-out generation with continuous batching.

Three rooms, each importing only the ones before it: `scheduling` (what runs each step: sequences, sampling
configs, admission, KV blocks, the scheduler), `model` (how a step runs: the fused decoder, its runners,
attention and kernels, the sampler) and `serving` (the step loop, in a thread or a child process, and its
gRPC face). Beside them, `faces` holds processes of their own that drive a running engine over its gRPC API in
another project's worker protocol (Dynamo's): they import none of the rooms.
"""
