"""BridgeChat: next prompt = previous prompt + sampled completion + new turns, token-exact, never re-rendering
the sampled history."""

from __future__ import annotations

from render_svc.bridge import bridge_chat
from scaleout.v1 import render_pb2
from tests.render.calls import chat
from tests.render.fixtures import TEMPLATES

IM_END = 2


def _bridge(renderer, previous, completion, new_messages, **fields):
    request = render_pb2.BridgeChatRequest(
        previous_prompt_token_ids=previous, completion_token_ids=completion, request=chat(new_messages, **fields)
    )
    return bridge_chat(renderer, request)


def _encode(renderer, text):
    return renderer.model.tokens.encode([text], add_special_tokens=False)[0]


def _full(tokenizer, messages, template=None):
    return tokenizer.apply_chat_template(
        messages, chat_template=template, add_generation_prompt=True, tokenize=True, return_dict=False
    )


USER1, USER2 = {"role": "user", "content": "Capital of France?"}, {"role": "user", "content": "And of Italy?"}


def test_bridge_equals_full_render_for_a_prefix_stable_template(renderers, reference_tokenizer):
    renderer = renderers["default"]
    previous = list(renderer.render_chat(chat([USER1])).generate_request.token_ids)
    answer = "Paris is the capital of France."
    completion = _encode(renderer, answer) + [IM_END]
    rendered = _bridge(renderer, previous, completion, [USER2])
    ids = list(rendered.generate_request.token_ids)
    assert ids[: len(previous) + len(completion)] == previous + completion
    assert ids == _full(reference_tokenizer, [USER1, {"role": "assistant", "content": answer}, USER2])
    assert rendered.generate_request.sampling_params.max_tokens == renderer.model.max_model_len - len(ids)
    assert rendered.derender_context.num_prompt_tokens == len(ids)


def test_completion_cut_by_length_gets_its_turn_closed(renderers, reference_tokenizer):
    renderer = renderers["default"]
    previous = list(renderer.render_chat(chat([USER1])).generate_request.token_ids)
    completion = _encode(renderer, "Paris is")  # no stop token: finished by length
    ids = list(_bridge(renderer, previous, completion, [USER2]).generate_request.token_ids)
    assert ids == _full(reference_tokenizer, [USER1, {"role": "assistant", "content": "Paris is"}, USER2])


def test_tool_result_turn_with_a_hermes_style_template(renderers, reference_tokenizer):
    renderer = renderers["qwen3"]
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    previous = list(renderer.render_chat(chat([USER1], tools=tools)).generate_request.token_ids)
    sampled = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    completion = _encode(renderer, sampled) + [IM_END]
    tool_result = {"role": "tool", "content": "sunny", "tool_call_id": "c1"}
    ids = list(_bridge(renderer, previous, completion, [tool_result], tools=tools).generate_request.token_ids)
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    history = [USER1, {"role": "assistant", "content": "", "tool_calls": [call]}, tool_result]
    want = reference_tokenizer.apply_chat_template(
        history,
        tools=tools,
        chat_template=(TEMPLATES / "qwen3.jinja").read_text(),
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
    )
    assert ids == want


def test_sampled_reasoning_is_kept_where_a_re_render_would_drop_it(renderers, reference_tokenizer):
    renderer = renderers["qwen3"]
    previous = list(renderer.render_chat(chat([USER1])).generate_request.token_ids)
    sampled = "<think>\nFrance... Paris.\n</think>\n\nParis."
    completion = _encode(renderer, sampled) + [IM_END]
    rendered = _bridge(renderer, previous, completion, [USER2], return_prompt_text=True)
    ids = list(rendered.generate_request.token_ids)
    delta = _encode(renderer, "\n<|im_start|>user\nAnd of Italy?<|im_end|>\n<|im_start|>assistant\n")
    assert ids == previous + completion + delta
    template = (TEMPLATES / "qwen3.jinja").read_text()
    assert ids != _full(reference_tokenizer, [USER1, {"role": "assistant", "content": sampled}, USER2], template)
    assert rendered.prompt_text.endswith("<|im_start|>assistant\n") and "France... Paris." in rendered.prompt_text


async def test_bridge_over_grpc(stub, renderers):
    previous = list((await stub.RenderChat(chat([USER1]))).generate_request.token_ids)
    completion = _encode(renderers["default"], "Paris.") + [IM_END]
    request = render_pb2.BridgeChatRequest(
        previous_prompt_token_ids=previous, completion_token_ids=completion, request=chat([USER2], max_tokens=5)
    )
    rendered = await stub.BridgeChat(request)
    assert list(rendered.generate_request.token_ids[: len(previous) + len(completion)]) == previous + completion
    assert rendered.generate_request.sampling_params.max_tokens == 5


def test_bridge_into_a_prefilled_assistant_turn(renderers, reference_tokenizer):
    renderer = renderers["default"]
    previous = list(renderer.render_chat(chat([USER1])).generate_request.token_ids)
    completion = _encode(renderer, "Paris.") + [IM_END]
    prefill = {"role": "assistant", "content": "Rome, I"}
    ids = list(
        _bridge(
            renderer, previous, completion, [USER2, prefill], add_generation_prompt=False, continue_final_message=True
        ).generate_request.token_ids
    )
    want = reference_tokenizer.apply_chat_template(
        [USER1, {"role": "assistant", "content": "Paris."}, USER2, prefill],
        continue_final_message=True,
        tokenize=True,
        return_dict=False,
    )
    assert ids == want
