"""RenderChat / RenderCompletion / Tokenize / Detokenize / ListModels over real gRPC: what the responses carry."""

from __future__ import annotations

import json
import shutil

import pytest
from google.protobuf import json_format

from render_svc.model import load_model
from render_svc.prompt import Limits
from render_svc.renderer import Renderer
from scaleout.v1 import derender_pb2, render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.models import resolve_model
from scaleout_common.reasons import Reason as r
from tests.render.calls import chat
from tests.render.conftest import render_server

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


async def test_chat_passes_everything_through(stub, reference_tokenizer):
    request = chat(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}],
        model="smol",
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        parallel_tool_calls=False,
        chat_template_kwargs={"flavor": "request"},
        stop=["\n\n"],
        stop_token_ids=[7],
        include_stop_str_in_output=True,
        skip_special_tokens=False,
        seed=11,
        n=2,
        logprobs=True,
        top_logprobs=3,
        cache_salt="salt",
        priority=-2,
        kv_transfer_params={"do_remote_prefill": True},
        request_id="rid-1",
        stream_options={"include_usage": True},
        stream_interval=4,
    )
    response = await stub.RenderChat(request)
    generate, context = response.generate_request, response.derender_context
    assert generate.request_id == "rid-1" and generate.model == "smol" and generate.n == 2
    assert (generate.cache_salt, generate.priority, generate.stream_interval) == ("salt", -2, 4)
    assert json_format.MessageToDict(generate.kv_transfer_params) == {"do_remote_prefill": True}
    assert generate.sampling_params.seed == 11 and generate.sampling_params.logprobs == 3
    assert list(generate.sampling_params.stop_token_ids) == [7]
    assert generate.tokenizer_fingerprint == context.tokenizer_fingerprint != ""
    assert context.endpoint == derender_pb2.ENDPOINT_CHAT and context.id == "chatcmpl-rid-1" and context.created > 0
    assert context.tool_choice == derender_pb2.TOOL_CHOICE_MODE_NAMED and context.tool_choice_function == "get_weather"
    assert [t.function.name for t in context.tools] == ["get_weather"]
    assert not context.parallel_tool_calls and not context.skip_special_tokens and context.spaces_between_special_tokens
    assert list(context.stop) == ["\n\n"] and context.include_stop_str_in_output
    assert list(context.prompt_tail_token_ids) == list(generate.token_ids[-8:])
    assert context.num_prompt_tokens == len(generate.token_ids) and context.n == 2 and context.include_usage
    assert context.top_logprobs == 3
    # request kwargs merge over the server's --default-chat-template-kwargs
    assert json_format.MessageToDict(context.chat_template_kwargs) == {"enable_thinking": True, "flavor": "request"}


async def test_chat_defaults(stub):
    response = await stub.RenderChat(chat())
    context, generate = response.derender_context, response.generate_request
    assert context.id.startswith("chatcmpl-") and generate.request_id == context.id
    assert context.tool_choice == derender_pb2.TOOL_CHOICE_MODE_NONE and context.parallel_tool_calls
    assert context.skip_special_tokens and not context.HasField("top_logprobs") and generate.n == 1
    assert json_format.MessageToDict(context.chat_template_kwargs) == {"enable_thinking": True, "flavor": "server"}
    auto = await stub.RenderChat(chat(tools=[WEATHER], logprobs=True))
    assert auto.derender_context.tool_choice == derender_pb2.TOOL_CHOICE_MODE_AUTO
    assert auto.derender_context.top_logprobs == 0


async def test_prompt_text_offsets_and_truncation(stub):
    full = await stub.RenderChat(chat(return_prompt_text=True, return_token_offsets=True))
    ids, text = list(full.generate_request.token_ids), full.prompt_text
    assert text.endswith("<|im_start|>assistant\n") and len(full.token_offsets) == len(ids)
    assert text[full.token_offsets[0].start : full.token_offsets[0].end] == "<|im_start|>"
    left = await stub.RenderChat(chat(truncate_prompt_tokens=5, return_token_offsets=True))
    assert list(left.generate_request.token_ids) == ids[-5:] and len(left.token_offsets) == 5
    assert left.token_offsets[-1] == full.token_offsets[-1]
    right = await stub.RenderChat(chat(truncate_prompt_tokens=5, truncation_side="right"))
    assert list(right.generate_request.token_ids) == ids[:5]
    whole = await stub.RenderChat(chat(truncate_prompt_tokens=-1))
    assert list(whole.generate_request.token_ids) == ids


async def test_add_special_tokens_and_continue_final_message(stub):
    messages = [{"role": "user", "content": "Finish:"}, {"role": "assistant", "content": "<think>\nSo the answer"}]
    response = await stub.RenderChat(
        chat(messages, add_generation_prompt=False, continue_final_message=True, echo=True, return_prompt_text=True)
    )
    assert response.prompt_text.endswith("<think>\nSo the answer")
    assert response.derender_context.reasoning_started
    assert response.derender_context.echo and response.derender_context.prompt_text == "<think>\nSo the answer"
    special = await stub.RenderChat(chat(add_special_tokens=True))
    assert (
        special.generate_request.token_ids == (await stub.RenderChat(chat())).generate_request.token_ids
    )  # no BOS added by this tokenizer


async def test_request_template_when_trusted(trusting_stub):
    response = await trusting_stub.RenderChat(
        chat(chat_template="{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}", return_prompt_text=True)
    )
    assert response.prompt_text == "[user]hi"


async def test_completion_forms(stub, reference_tokenizer):
    texts = await stub.RenderCompletion(
        render_pb2.RenderCompletionRequest(
            prompts=["Hello world", "Bonjour"],
            echo=True,
            n=3,
            logprobs=2,
            return_prompt_text=True,
            return_token_offsets=True,
            request_id="c",
        )
    )
    assert len(texts.prompts) == 2
    for index, (prompt, item) in enumerate(zip(["Hello world", "Bonjour"], texts.prompts)):
        assert list(item.generate_request.token_ids) == reference_tokenizer(prompt)["input_ids"]
        assert item.generate_request.request_id == f"c-{index}" and item.generate_request.n == 3
        context = item.derender_context
        assert context.endpoint == derender_pb2.ENDPOINT_COMPLETION and context.id == "cmpl-c"
        assert context.prompt_index == index and context.echo and context.prompt_text == prompt
        assert (
            context.top_logprobs == 2
            and item.prompt_text == prompt
            and len(item.token_offsets) == len(item.generate_request.token_ids)
        )
    ids = await stub.RenderCompletion(
        render_pb2.RenderCompletionRequest(
            prompt_token_ids=[render_pb2.TokenIds(token_ids=[1, 2, 3]), render_pb2.TokenIds(token_ids=[9])],
            echo=True,
            max_tokens=4,
        )
    )
    assert [list(p.generate_request.token_ids) for p in ids.prompts] == [[1, 2, 3], [9]]
    assert ids.prompts[0].derender_context.prompt_text == reference_tokenizer.decode([1, 2, 3])
    assert ids.prompts[0].generate_request.sampling_params.max_tokens == 4
    assert ids.prompts[0].generate_request.request_id != ids.prompts[1].generate_request.request_id


async def test_tokenize_detokenize_models(stub, reference_tokenizer):
    prompt = await stub.Tokenize(
        render_pb2.TokenizeRequest(prompt="Hello world", return_token_strs=True, return_token_offsets=True)
    )
    assert list(prompt.tokens) == reference_tokenizer("Hello world")["input_ids"] and prompt.count == len(prompt.tokens)
    assert list(prompt.token_strs) == reference_tokenizer.convert_ids_to_tokens(list(prompt.tokens))
    assert prompt.max_model_len == 8192 and len(prompt.token_offsets) == prompt.count
    messages = [{"role": "user", "content": "hi"}]
    chat_form = await stub.Tokenize(json_format.ParseDict({"messages": messages}, render_pb2.TokenizeRequest()))
    assert list(chat_form.tokens) == reference_tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_dict=False
    )
    text = await stub.Detokenize(render_pb2.DetokenizeRequest(tokens=chat_form.tokens))
    assert text.prompt == reference_tokenizer.decode(list(chat_form.tokens), skip_special_tokens=True)
    raw = await stub.Detokenize(render_pb2.DetokenizeRequest(tokens=chat_form.tokens, skip_special_tokens=False))
    assert raw.prompt.startswith("<|im_start|>")
    models = await stub.ListModels(render_pb2.ListModelsRequest())
    assert models.object == "list" and [m.id for m in models.data] == ["smol", "other-name"]
    assert models.data[0].max_model_len == 8192 and models.data[0].tokenizer_fingerprint


@pytest.fixture(scope="module")
def tuned_model(tmp_path_factory):
    """The default model's tokenizer files with a generation_config that sets sampling defaults, and no chat template."""
    folder = tmp_path_factory.mktemp("tuned")
    source = resolve_model(None)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source / name, folder / name)
    (folder / "generation_config.json").write_text(
        json.dumps({"temperature": 0.6, "top_p": 0.9, "top_k": 20, "max_new_tokens": 64})
    )
    return folder


async def test_generation_config_defaults_through_the_server(tuned_model):
    template = str(resolve_model(None) / "chat_template.jinja")
    async with render_server(
        "--model", str(tuned_model), "--chat-template", template, "--max-model-len", "512"
    ) as stub:
        unset = (await stub.RenderChat(chat())).generate_request.sampling_params
        explicit = (
            await stub.RenderChat(chat(temperature=0, top_k=0, max_tokens=100))
        ).generate_request.sampling_params
    assert unset.temperature == pytest.approx(0.6) and unset.top_p == pytest.approx(0.9) and unset.top_k == 20
    assert unset.max_tokens == 64
    assert (explicit.temperature, explicit.top_k, explicit.max_tokens) == (0.0, 0, 100)


def test_a_max_model_len_longer_than_the_models_is_refused_at_start():
    with pytest.raises(ValueError, match=r"--max-model-len 8193 is longer than the model's context \(8192\)"):
        load_model(None, max_model_len=8193)  # the default model's max_position_embeddings: 8192
    assert load_model(None, max_model_len=512).max_model_len == 512


def test_max_logprobs_minus_one_is_the_whole_vocabulary():
    model = load_model(None)
    renderer = Renderer(model, Limits(max_logprobs=-1))
    assert renderer.model_limits.max_logprobs == model.tokens.vocab_size == 49152


def test_model_without_chat_template(tuned_model):
    renderer = Renderer(load_model(str(tuned_model)))
    with pytest.raises(ServiceError) as caught:
        renderer.render_chat(chat())
    assert caught.value.reason == r.NO_CHAT_TEMPLATE and caught.value.code.name == "FAILED_PRECONDITION"


async def test_documents_reach_the_template(trusting_stub, reference_tokenizer):
    template = "{% for d in documents %}[{{ d.title }}] {{ d.text }}\n{% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}"
    documents = [{"title": "Paris", "text": "Capital of France."}, {"text": "No title.", "title": "Misc"}]
    response = await trusting_stub.RenderChat(
        chat(documents=documents, chat_template=template, return_prompt_text=True)
    )
    want = reference_tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}],
        documents=documents,
        chat_template=template,
        tokenize=True,
        add_generation_prompt=True,
        return_dict=False,
    )
    assert list(response.generate_request.token_ids) == want
    assert response.prompt_text == "[Paris] Capital of France.\n[Misc] No title.\nhi"


async def test_batch_with_mixed_options_matches_single_calls(stub):
    requests = [
        chat([{"role": "user", "content": "one"}]),
        chat([{"role": "user", "content": "two"}], return_token_offsets=True, return_prompt_text=True),
        chat([{"role": "user", "content": "three"}], add_special_tokens=True, truncate_prompt_tokens=6),
        chat([{"role": "user", "content": "four"}], max_tokens=3, temperature=0),
    ]
    batch = await stub.RenderChatBatch(render_pb2.RenderChatBatchRequest(requests=requests))
    for request, response in zip(requests, batch.responses):
        single = await stub.RenderChat(request)
        assert response.generate_request.token_ids == single.generate_request.token_ids
        assert response.generate_request.sampling_params == single.generate_request.sampling_params
        assert list(response.token_offsets) == list(single.token_offsets) and response.prompt_text == single.prompt_text
    assert len(batch.responses[1].token_offsets) == len(batch.responses[1].generate_request.token_ids)
    assert len(batch.responses[2].generate_request.token_ids) == 6
    assert len({r.derender_context.id for r in batch.responses}) == 4
