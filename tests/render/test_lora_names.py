"""LoRA adapters in render (vLLM's --enable-lora --lora-modules): the OpenAI `model` naming an adapter selects it
(GenerateRequest.lora_name, the answer's model), /v1/models lists each adapter with its parent, unknown names keep
MODEL_NOT_FOUND, and pooling refuses adapters."""

from __future__ import annotations

import json

import grpc
import pytest

from scaleout.v1 import common_pb2, render_pb2
from tests.render.calls import chat
from tests.render.conftest import render_server

ADAPTERS = ("--enable-lora", "--lora-modules", "sql=/adapters/sql",
            json.dumps({"name": "chat-lora", "path": "/adapters/chat", "base_model_name": "Parent"}))  # fmt: skip


async def test_a_model_naming_an_adapter_selects_it_and_lists_it_with_its_parent():
    async with render_server("--served-model-name", "smol", *ADAPTERS) as stub:
        base = await stub.RenderChat(chat(model="smol"))
        sql = await stub.RenderChat(chat(model="sql"))
        completion = await stub.RenderCompletion(render_pb2.RenderCompletionRequest(model="chat-lora", prompts=["Hi"]))
        models = await stub.ListModels(render_pb2.ListModelsRequest())
        card = await stub.GetModel(render_pb2.GetModelRequest(model="sql"))
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await stub.RenderChat(chat(model="nope"))
        with pytest.raises(grpc.aio.AioRpcError) as pooled:
            await stub.RenderEmbedding(render_pb2.RenderEmbeddingRequest(model="sql", inputs=["x"]))
    assert base.generate_request.lora_name == "" and base.derender_context.model == "smol"
    assert sql.generate_request.lora_name == "sql" and sql.derender_context.model == "sql"
    assert list(sql.generate_request.token_ids) == list(base.generate_request.token_ids)
    assert completion.prompts[0].generate_request.lora_name == "chat-lora"
    assert completion.prompts[0].derender_context.model == "chat-lora"
    assert [(m.id, m.HasField("parent"), m.parent, m.root) for m in models.data] == [
        ("smol", False, "", models.data[0].root),
        ("sql", True, "smol", "/adapters/sql"),
        ("chat-lora", True, "Parent", "/adapters/chat"),
    ]
    assert card.id == "sql" and card.parent == "smol"
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND and "nope" in (unknown.value.details() or "")
    assert pooled.value.code() == grpc.StatusCode.NOT_FOUND


async def test_without_lora_an_adapter_name_is_an_unknown_model():
    async with render_server("--served-model-name", "smol") as stub:
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await stub.RenderChat(chat(model="sql"))
        models = await stub.ListModels(render_pb2.ListModelsRequest())
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    assert [m.id for m in models.data] == ["smol"] and not models.data[0].HasField("parent")


async def test_adapter_names_load_and_unload_at_run_time():
    async with render_server("--served-model-name", "smol", "--enable-lora") as stub:
        load = common_pb2.LoadLoraAdapterRequest(lora_name="late", lora_path="/adapters/late")
        await stub.LoadLoraAdapter(load)
        rendered = await stub.RenderChat(chat(model="late"))
        listed = [m.id for m in (await stub.ListModels(render_pb2.ListModelsRequest())).data]
        errors = []
        for bad in (load, common_pb2.LoadLoraAdapterRequest(lora_name="smol", lora_path="/x")):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.LoadLoraAdapter(bad)
            errors.append(refused.value)
        await stub.UnloadLoraAdapter(common_pb2.UnloadLoraAdapterRequest(lora_name="late"))
        with pytest.raises(grpc.aio.AioRpcError) as gone:
            await stub.UnloadLoraAdapter(common_pb2.UnloadLoraAdapterRequest(lora_name="late"))
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await stub.RenderChat(chat(model="late"))
    assert rendered.generate_request.lora_name == "late" and listed == ["smol", "late"]
    assert "already been loaded" in (errors[0].details() or "") and "conflicts" in (errors[1].details() or "")
    assert gone.value.code() == unknown.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_render_without_lora_refuses_loads():
    async with render_server("--served-model-name", "smol") as stub:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.LoadLoraAdapter(common_pb2.LoadLoraAdapterRequest(lora_name="a", lora_path="/a"))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "--enable-lora" in (refused.value.details() or "")
