"""LoRA adapters (PEFT folders) on the paged fast path: logits and greedy tokens equal transformers' over the
adapter merged into the weights (W + scale * B @ A), base and two adapters' rows in one batch, prefix-cache
entries never shared across adapters, --max-loras, and the refusals by field and flag."""

from __future__ import annotations

import asyncio
import copy
import json
import math
from pathlib import Path

import grpc
import pytest
import torch
from safetensors.torch import save_file

from engine_svc.model.lora import TARGETS, LoraRefused, read_adapter
from engine_svc.model.runner import ModelRunner
from engine_svc.scheduling.block_pool import BlockPool
from engine_svc.scheduling.sampling import SamplingConfig
from engine_svc.scheduling.scheduler import Scheduler
from engine_svc.scheduling.sequence import Chunk, Sequence
from engine_svc.serving.loader import build_engine
from engine_svc.serving.loras import LoraRegistry
from scaleout.v1 import common_pb2, control_pb2_grpc
from tests.engine.conftest import engine_args, engine_stub, generate, request, tiny_llama
from tests.engine.families import greedy, logits_of

ATTENTION = ["q_proj", "k_proj", "v_proj", "o_proj"]
PROMPT = [1] + [(7 * j) % 200 + 5 for j in range(21)]


def write_adapter(folder: Path, model, targets, rank=4, alpha=8.0, seed=1, **config) -> Path:
    """A PEFT-shaped LoRA folder for `model` with random A and B (PEFT starts B at zero: nothing would show)."""
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for index, layer in enumerate(model.model.layers):
        for name in targets:
            part = "mlp" if name in ("gate_proj", "up_proj", "down_proj") else "self_attn"
            linear = getattr(getattr(layer, part), name)
            prefix = f"base_model.model.model.layers.{index}.{part}.{name}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(rank, linear.in_features, generator=generator) * 0.3
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(linear.out_features, rank, generator=generator) * 0.3
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    settings = {"peft_type": "LORA", "r": rank, "lora_alpha": alpha, "target_modules": list(targets), "bias": "none"}
    (folder / "adapter_config.json").write_text(json.dumps(settings | config))
    return folder


def merged(model, folder: Path):
    """transformers' model with the adapter merged into its weights: W + scale * B @ A."""
    config = json.loads((folder / "adapter_config.json").read_text())
    rank = config["r"]
    scale = config["lora_alpha"] / (math.sqrt(rank) if config.get("use_rslora") else rank)
    adapter = read_adapter("x", folder, 64)
    out = copy.deepcopy(model)
    with torch.no_grad():
        for (index, name), (a, b) in adapter.weights.items():
            layer = out.model.layers[index]
            part = "mlp" if name in ("gate_proj", "up_proj", "down_proj") else "self_attn"
            getattr(getattr(layer, part), name).weight += scale * b @ a
    return out


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    root = tmp_path_factory.mktemp("loras")
    model = tiny_llama()
    return {
        "attn": write_adapter(root / "attn", model, ATTENTION, rank=4, seed=1),
        "all": write_adapter(root / "all", model, list(TARGETS), rank=8, alpha=4.0, seed=2, use_rslora=True),
    }


def _runner(model, folders: dict[str, Path], attention: str = "sdpa"):
    runner = ModelRunner(
        model,
        block_size=4,
        num_blocks=64,
        max_num_seqs=4,
        max_model_len=128,
        cuda_graphs=True,
        attention=attention,
        lora=True,
    )  # fmt: skip (graphs asked for: LoRA runs eagerly anyway)
    assert runner.loras is not None
    registry = LoraRegistry(runner.loras, engine_args("--enable-lora", "--max-loras", "3", "--max-cpu-loras", "4"))
    cards = {name: registry.load(name, str(path)) for name, path in folders.items()}
    return runner, cards


DEVICES = [("cpu", "sdpa")] + ([("cuda", "sdpa"), ("cuda", "triton")] if torch.cuda.is_available() else [])


@pytest.mark.parametrize(("device", "attention"), DEVICES)
def test_mixed_batch_logits_equal_the_merged_models(adapters, device, attention):
    """Base, 'attn' and 'all' prefills in one step (every prompt position scored), then their decodes in one (on
    CUDA too, float32, where there is one)."""
    model = tiny_llama().to(device)
    runner, cards = _runner(model, adapters, attention)
    prompts = {"": PROMPT, "attn": PROMPT[:15] + [9, 8], "all": [1, 4, 6] + PROMPT[3:12]}
    seqs, block = {}, 1
    for name, prompt in prompts.items():
        seq = Sequence(name or "base", 0, list(prompt), SamplingConfig(), lora_id=cards[name].id if name else 0)
        seq.want_prompt_logprobs = True
        seq.block_ids, block = list(range(block, block + 10)), block + 10
        seqs[name] = seq
    with torch.inference_mode():
        logits = runner.execute([Chunk(s, 0, s.num_tokens) for s in seqs.values()])
        for seq, row in zip(seqs.values(), logits[:3]):
            seq.append(int(row.argmax()))
        decoded = runner.execute([Chunk(s, s.num_tokens - 1, 1) for s in seqs.values()])
    model = model.cpu()
    references = {name: merged(model, adapters[name]) if name else model for name in prompts}
    logits, decoded = logits.cpu(), decoded.cpu()
    offset = 3  # the sampled rows, then each sequence's prompt rows in order
    for i, (name, seq) in enumerate(seqs.items()):
        expected = logits_of(references[name], seq.prompt_ids + seq.output_ids)
        n = len(seq.prompt_ids)
        torch.testing.assert_close(logits[offset : offset + n - 1], expected[: n - 1], atol=2e-4, rtol=2e-4)
        torch.testing.assert_close(logits[i], expected[n - 1], atol=2e-4, rtol=2e-4)
        torch.testing.assert_close(decoded[i], expected[n], atol=2e-4, rtol=2e-4)
        offset += n - 1
    assert not torch.allclose(logits[0], logits[1]) and not torch.allclose(logits[1], logits[2])


@pytest.mark.parametrize("max_loras", ["2", "1"])
async def test_served_greedy_tokens_mix_adapters_and_keep_their_prefixes_apart(adapters, max_loras):
    """Through the real engine server (decode runs of 4 steps): three streams at once (base, 'attn', 'all'; one
    batch, or with --max-loras 1 'all' after 'attn') give the merged models' greedy tokens; a prompt cached under
    one adapter is never a hit for another, or for the base model."""
    model = tiny_llama()
    modules = [f"{name}={path}" for name, path in adapters.items()]
    flags = ("--enable-lora", "--lora-modules", *modules, "--max-loras", max_loras, "--block-size", "4",
             "--max-num-batched-tokens", "32", "--decode-steps", "4", "--engine-core", "thread")  # fmt: skip

    def message(name, prompt=PROMPT):
        m = request(prompt, temperature=0, max_tokens=8, ignore_eos=True)
        m.lora_name = name
        return m

    async with engine_stub(model, *flags) as (stub, _):
        results = await asyncio.gather(*[generate(stub, message(n)) for n in ("", "attn", "all")])
        again = {n: (await generate(stub, message(n, PROMPT + [3, 3])))[0][0].prompt.cached_tokens for n in ("all",)}
        fresh = PROMPT[:2] + [77] * 12
        first = (await generate(stub, message("attn", fresh)))[0][0].prompt.cached_tokens
        other = (await generate(stub, message("all", fresh)))[0][0].prompt.cached_tokens
        base = (await generate(stub, message("", fresh)))[0][0].prompt.cached_tokens
        same = (await generate(stub, message("attn", fresh)))[0][0].prompt.cached_tokens
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await generate(stub, message("nope"))
    for name, (_, tokens) in zip(("", "attn", "all"), results):
        reference = merged(model, adapters[name]) if name else model
        assert tokens[0] == greedy(reference, PROMPT, 8), name
    assert results[0][1][0] != results[1][1][0] != results[2][1][0]
    assert again["all"] > 0 and first == other == base == 0 and same == 12
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND and "nope" in (refused.value.details() or "")


def test_max_loras_holds_a_third_adapter_back():
    pool = BlockPool(64, 4, caching=True)
    scheduler = Scheduler(pool, 8, 256)
    scheduler.max_loras = 2
    for i, adapter in enumerate([1, 2, 3, 0, 1]):
        scheduler.add(Sequence(f"r{i}", 0, [1, 2, 3], SamplingConfig(), lora_id=adapter))
    running = [c.seq.lora_id for c in scheduler.schedule()]
    assert running == [1, 2, 0, 1] and [e[2].lora_id for e in scheduler.waiting] == [3]


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"use_dora": True}, "use_dora"),
        ({"bias": "lora_only"}, "bias"),
        ({"modules_to_save": ["lm_head"]}, "modules_to_save"),
        ({"r": 32}, "--max-lora-rank"),
        ({"target_modules": ["q_proj", "embed_tokens"]}, "embed_tokens"),
        ({"peft_type": "IA3"}, "peft_type"),
        ({"rank_pattern": {"q_proj": 8}}, "rank_pattern"),
    ],
)
def test_adapters_the_engine_cannot_serve_are_refused_by_field(tmp_path, config, named):
    folder = write_adapter(tmp_path / "a", tiny_llama(), ["q_proj"], rank=4)
    settings = json.loads((folder / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(json.dumps(settings | config))
    with pytest.raises(LoraRefused, match=named):
        read_adapter("a", folder, 16)


def test_embedding_weights_and_missing_files_are_refused(tmp_path):
    folder = write_adapter(tmp_path / "a", tiny_llama(), ["q_proj"], rank=4)
    save_file({"base_model.model.model.embed_tokens.lora_embedding_A": torch.zeros(4, 256)},
              str(folder / "adapter_model.safetensors"))  # fmt: skip
    with pytest.raises(LoraRefused, match="embed_tokens"):
        read_adapter("a", folder, 16)
    with pytest.raises(LoraRefused, match=r"adapter_config\.json"):
        read_adapter("a", tmp_path / "nothing", 16)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (("--lora-modules", "a=/x"), "--enable-lora"),
        (("--enable-lora", "--backend", "transformers"), "transformers"),
        (("--enable-lora", "--lora-modules", "no-path"), "name=path"),
        (("--enable-lora", "--max-loras", "2", "--max-cpu-loras", "1"), "--max-cpu-loras"),
    ],
)
def test_flags_that_cannot_serve_lora_are_refused_at_start(flags, named):
    with pytest.raises(LoraRefused, match=named):
        build_engine(tiny_llama(), engine_args(*flags), model_name="t")


def test_the_json_form_of_lora_modules_names_the_parent(adapters):
    module = json.dumps({"name": "j", "path": str(adapters["attn"]), "base_model_name": "parent-model"})
    loaded = build_engine(tiny_llama(), engine_args("--enable-lora", "--lora-modules", module), model_name="t")
    assert loaded.limits.loras is not None and loaded.limits.loras["j"].base_model_name == "parent-model"
    loaded.engine.stop()


async def test_adapters_load_and_unload_at_run_time(adapters):
    """EngineControlService.LoadLoraAdapter / UnloadLoraAdapter (vLLM's runtime routes reach every replica so): a
    loaded adapter serves at once, a name taken or past --max-cpu-loras is refused, an unloaded one is not found."""
    model = tiny_llama()
    flags = ("--enable-lora", "--max-cpu-loras", "1", "--block-size", "4", "--engine-core", "thread")

    def message(name):
        m = request(PROMPT, temperature=0, max_tokens=6, ignore_eos=True)
        m.lora_name = name
        return m

    async with engine_stub(model, *flags) as (stub, _):
        control = control_pb2_grpc.EngineControlServiceStub(stub.channel)
        load = common_pb2.LoadLoraAdapterRequest(lora_name="attn", lora_path=str(adapters["attn"]))
        loaded = await control.LoadLoraAdapter(load)
        _, tokens = await generate(stub, message("attn"))
        refusals = []
        for again in (load, common_pb2.LoadLoraAdapterRequest(lora_name="all", lora_path=str(adapters["all"]))):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await control.LoadLoraAdapter(again)
            refusals.append(refused.value)
        await control.UnloadLoraAdapter(common_pb2.UnloadLoraAdapterRequest(lora_name="attn"))
        with pytest.raises(grpc.aio.AioRpcError) as gone:
            await generate(stub, message("attn"))
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await control.UnloadLoraAdapter(common_pb2.UnloadLoraAdapterRequest(lora_name="attn"))
        reloaded = await control.LoadLoraAdapter(load)  # a fresh id: no prefix entry of the old one is reused
        _, again_tokens = await generate(stub, message("attn"))
    assert loaded.lora_id == 1 and reloaded.lora_id == 2
    assert tokens[0] == again_tokens[0] == greedy(merged(model, adapters["attn"]), PROMPT, 6)
    assert all(r.code() == grpc.StatusCode.INVALID_ARGUMENT for r in refusals)
    assert "already loaded" in (refusals[0].details() or "") and "--max-cpu-loras" in (refusals[1].details() or "")
    assert gone.value.code() == unknown.value.code() == grpc.StatusCode.NOT_FOUND
    assert "cannot be found" in (unknown.value.details() or "")


async def test_an_engine_without_lora_refuses_adapters_by_name(tiny_model, adapters):
    async with engine_stub(tiny_model, "--engine-core", "thread") as (stub, _):
        control = control_pb2_grpc.EngineControlServiceStub(stub.channel)
        with pytest.raises(grpc.aio.AioRpcError) as load:
            await control.LoadLoraAdapter(common_pb2.LoadLoraAdapterRequest(lora_name="a", lora_path="/x"))
        message = request(PROMPT, max_tokens=2)
        message.lora_name = "a"
        with pytest.raises(grpc.aio.AioRpcError) as run:
            await generate(stub, message)
    assert load.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "--enable-lora" in (load.value.details() or "")
    assert run.value.code() == grpc.StatusCode.NOT_FOUND and "--enable-lora" in (run.value.details() or "")


async def test_an_engine_core_process_serves_adapters_given_and_loaded(adapters):
    """The step loop in a child process (CUDA's default): the adapter named at start and one loaded at run time cross
    the pipes (the sequences' adapter ids, the control ops' cards)."""
    flags = ("--enable-lora", "--lora-modules", f"attn={adapters['attn']}", "--max-cpu-loras", "2",
             "--engine-core", "process")  # fmt: skip

    def message(name):
        m = request(PROMPT, temperature=0, max_tokens=5, ignore_eos=True)
        m.lora_name = name
        return m

    async with engine_stub(None, *flags) as (stub, _):  # the tiny model, built in the child (conftest.build_tiny)
        control = control_pb2_grpc.EngineControlServiceStub(stub.channel)
        await control.LoadLoraAdapter(
            common_pb2.LoadLoraAdapterRequest(lora_name="all", lora_path=str(adapters["all"]))
        )
        results = await asyncio.gather(*[generate(stub, message(n)) for n in ("attn", "all", "")])
    model = tiny_llama()
    for name, (_, tokens) in zip(("attn", "all", ""), results):
        assert tokens[0] == greedy(merged(model, adapters[name]) if name else model, PROMPT, 5), name
