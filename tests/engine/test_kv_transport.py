"""The KV handoff's transport rule and the device path's parts that run without CUDA (no servers: fast): which
transport two engines' devices get, a shared cache refused when its shapes are not the layout's, and blocks
gathered and landed as bytes (fp8 included) round-trip exactly; a P/D role keeps the engine core in the server."""

from __future__ import annotations

import pytest
import torch

from engine_svc.__main__ import make_parser
from engine_svc.serving.kv_transfer import blocks, transport
from engine_svc.serving.loader import core_in_child_process
from engine_svc.serving.service import EngineService
from scaleout.v1 import kv_transfer_pb2

GPU = kv_transfer_pb2.KvDevice(host_id="boot-a", device_uuid="GPU-1", process_id="p1")


def _device(**change) -> kv_transfer_pb2.KvDevice:
    device = kv_transfer_pb2.KvDevice()
    device.CopyFrom(GPU)
    for name, value in change.items():
        setattr(device, name, value)
    return device


@pytest.mark.parametrize(
    "theirs, expected",
    [
        (_device(process_id="p2"), transport.CUDA_IPC),  # same GPU of the same host, another process
        (_device(), transport.STREAM),  # one process: CUDA IPC maps another process's memory only
        (_device(process_id="p2", device_uuid="GPU-2"), transport.STREAM),  # another GPU
        (_device(process_id="p2", host_id="boot-b"), transport.STREAM),  # another host
        (_device(process_id="p2", device_uuid=""), transport.STREAM),  # a CPU engine
    ],
)
def test_the_transport_rule(theirs, expected):
    assert transport.choose(GPU, theirs) == expected == transport.choose(theirs, GPU)


def test_cpu_engines_stream_between_processes_of_one_host():
    mine = transport.device_of(torch.device("cpu"))
    assert mine.host_id and not mine.device_uuid and mine.process_id == transport.PROCESS_ID
    assert transport.choose(mine, _device(host_id=mine.host_id, device_uuid="", process_id="other")) == "grpc_stream"
    assert transport.choose(_device(device_uuid=""), _device(device_uuid="", process_id="p2")) == "grpc_stream"


LAYOUT = kv_transfer_pb2.KvLayout(block_size=4, dtype="bfloat16", num_layers=2, num_kv_heads=2, head_dim=8)


@pytest.mark.parametrize(
    "shape, layers",
    [([32, 2, 2, 8], 1), ([32, 2, 4, 8], 2), ([32, 2, 2, 16], 2), ([30, 2, 2, 8], 2)],  # layers, heads, dim, blocks
)
def test_a_shared_cache_not_of_the_layout_is_refused_before_mapping(shape, layers):
    shared = [kv_transfer_pb2.CudaIpcTensor(shape=shape, stride=[1] * 4, handle=b"x") for _ in range(layers)]
    with pytest.raises(ValueError):
        transport.open_shared(shared, LAYOUT, torch.device("cpu"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn])
def test_blocks_gather_and_land_as_bytes(dtype):
    block_size, heads, dim = 4, 2, 8
    source = [torch.randn(10 * block_size, 2, heads, dim).to(dtype) for _ in range(2)]
    target = [torch.zeros(10 * block_size, 2, heads, dim).to(dtype) for _ in range(2)]
    data = blocks.gather(source, block_size, [3, 7])
    assert data.shape == (2, 2, block_size * 2 * heads * dim * source[0].element_size())
    blocks.land(target, block_size, [1, 5], blocks.Pulled(data, 2 * block_size))
    for mine, theirs in zip(target, source):
        assert torch.equal(mine[4:8].view(torch.uint8), theirs[12:16].view(torch.uint8))
        assert torch.equal(mine[20:24].view(torch.uint8), theirs[28:32].view(torch.uint8))
        assert not mine[:4].view(torch.uint8).any()


@pytest.mark.parametrize(
    "flags, in_child",
    [
        ([], True),  # CUDA's default: the core in a process
        (["--kv-role", "prefill"], False),  # a P/D role: the KV step needs the cache in the server's process
        (["--kv-role", "decode"], False),
        (["--kv-role", "decode", "--engine-core", "thread"], False),
    ],
)
def test_a_pd_role_keeps_the_engine_core_in_the_server(flags, in_child):
    assert core_in_child_process(make_parser().parse_args(["--device", "cuda", *flags])) == in_child


@pytest.mark.parametrize("flags", [["--engine-core", "process"], ["--api-servers", "2"]])
def test_a_pd_role_with_the_core_in_a_process_is_refused_at_start(flags):
    with pytest.raises(SystemExit, match="--kv-role prefill"):
        EngineService(make_parser().parse_args(["--device", "cuda", "--kv-role", "prefill", *flags]))
