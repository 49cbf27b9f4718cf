"""`hf` / `beam`: the model's response_template declares the format (response_template.py). Expected results are
vLLM 0.33's ResponseTemplateParser's on the same text and template (its one-shot `parse` and its `parse_delta`
stream agree); each is checked one-shot and streamed at several chunkings, the state round-tripped through JSON
between pieces as the stateless twin does. Then the plumbing: the tokenizer config's template reaches the parsers
through TokenizerInfo, and a model without one is refused at startup (naming the flag) and per request."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from derender_svc.__main__ import build_parser
from derender_svc.parsers import REASONING_PARSERS, make_tool_parser
from derender_svc.parsers.response_template import LIVE_TEXT
from derender_svc.service import DerenderService
from derender_svc.tokenizer_info import TokenizerInfo
from scaleout.v1 import derender_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.models import load_tokenizer, resolve_model
from scaleout_common.response_templates import load_template
from tests.derender.calls import engine_messages
from tests.derender.response_templates import GEMMA4, QWEN3, TEMPLATES, template_info

TOOLS = [
    {"function": {"name": "set_alarm", "parameters": {"properties": {"hour": {"type": "integer"}}}}},
    {"function": {"name": "get_weather", "parameters": {"properties": {"days": {"type": "integer"}}}}},
]
G_ALARM = '<|tool_call>call:set_alarm{hour:7,label:<|"|>morning<|"|>}<tool_call|>'
G_PARIS = '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>'
Q_PARIS = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>'
Q_ALARM = '<tool_call>\n{"name": "set_alarm", "arguments": {"hour": 7, "label": "morning"}}\n</tool_call>'
X_PARIS = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
X_ALARM = "<tool_call>\n<function=set_alarm>\n<parameter=hour>\n7\n</parameter>\n<parameter=label>\nmorning\n</parameter>\n</function>\n</tool_call>"
ALARM, PARIS = ("set_alarm", {"hour": 7, "label": "morning"}), ("get_weather", {"city": "Paris", "days": 3})

# (parsers: both hf / reasoning only / tools only / both with reasoning_started, template, text, reasoning, content, calls)
CASES = [
    ("both", "gemma4", "Hello there.<turn|>", "", "Hello there.", []),
    ("both", "gemma4", "<|channel>thought\nplan it<channel|>The answer is 42.<turn|>", "plan it", "The answer is 42.", []),
    ("both", "gemma4", "<|channel>thought\nstill thinking", "still thinking", "", []),
    ("both", "gemma4", "<|channel>thought\nplan<channel|>" + G_ALARM, "plan", "", [ALARM]),
    ("both", "gemma4", "Let me check." + G_ALARM, "", "Let me check.", [ALARM]),
    ("both", "gemma4", G_PARIS + G_ALARM, "", "", [PARIS, ALARM]),
    ("both", "gemma4", '<|tool_call>call:set_alarm{hour:7,label:<|"|>morn<tool_call|>after', "", "after", []),
    ("both", "gemma4", "<|tool_call>call:set_alarm{hour:7", "", "", []),
    ("both", "gemma4", "a <|channel> b <|tool_call x <turn|>", "", "a <|channel> b <|tool_call x ", []),
    ("both", "gemma4", '<|tool_call>call:f{nested:{inner:<|"|>v<|"|>},list:[<|"|>a<|"|>]}<tool_call|>', "", "",
     [("f", {"nested": {"inner": "v"}, "list": ["a"]})]),
    ("both", "qwen3", "<think>\nplan it\n</think>\n\nThe answer is 42.<|im_end|>", "\nplan it\n", "\n\nThe answer is 42.", []),
    ("both", "qwen3", "<think>\nneed weather\n</think>\n\n" + Q_PARIS, "\nneed weather\n", "", [PARIS]),
    ("both", "qwen3", Q_PARIS + "\n" + Q_ALARM + "<|im_end|>", "", "", [PARIS, ALARM]),
    ("both", "qwen3", '<tool_call>\n{"name": "get_weather", "arguments": {"city": \n</tool_call>tail', "", "tail", []),
    ("both", "qwen3", '<tool_call>\n{"arguments": {}}\n</tool_call>', "", "", []),
    ("both", "qwen3", "a < b and c <t d </think> e", "", "a < b and c <t d </think> e", []),
    ("both", "qwen3", "<think>思考 🤔</think>答案 ✓<|im_end|>", "思考 🤔", "答案 ✓", []),
    ("both", "qwen3", Q_PARIS.replace("3}", '"3"}'), "", "", [PARIS]),  # typed by the tool's schema
    ("both", "qwen3", Q_PARIS + "\nDone.", "", "\nDone.", [PARIS]),
    ("both", "qwen35", "<think>\nneed weather\n</think>\n\n" + X_PARIS, "\nneed weather\n", "", [PARIS]),
    ("both", "qwen35", "Sure." + X_PARIS + "\n" + X_ALARM, "", "Sure.", [PARIS, ALARM]),
    ("both", "qwen35", "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar", "", "", [("get_weather", {})]),
    ("reasoning", "gemma4", "Let me check." + G_ALARM, "", "Let me check." + G_ALARM, []),
    ("reasoning", "qwen3", "<think>\nneed weather\n</think>\n\n" + Q_PARIS, "\nneed weather\n", "\n\n" + Q_PARIS, []),
    ("reasoning", "qwen35", "<tool_call>\n<function=x>\n<parameter=city>\nPar", "", "<tool_call>\n<function=x>\n<parameter=city>\nPar", []),
    ("tools", "gemma4", "<|channel>thought\nplan it<channel|>The answer is 42.<turn|>", "", "plan itThe answer is 42.", []),
    ("tools", "qwen3", "<think>\nneed weather\n</think>\n\n" + Q_PARIS, "", "\nneed weather\n", [PARIS]),
    ("started", "gemma4", "plan<channel|>" + G_ALARM, "plan", "", [ALARM]),
    ("started", "qwen3", "plan it\n</think>\n\nThe answer.<|im_end|>", "plan it\n", "\n\nThe answer.", []),
    ("started", "qwen35", "need weather\n</think>\n\n" + X_PARIS, "need weather\n", "", [PARIS]),
    ("started", "qwen3", "still thinking", "still thinking", "", []),
    # a closer that ends with a start anchor, the output stopped before the anchor: the rest is supplied (vLLM)
    ("both", "anchored", "Hi." + G_ALARM, "", "Hi.", [ALARM]),
    ("both", "anchored", "Hi." + G_ALARM + "<tool_resp", "", "Hi.", [ALARM]),
    ("reasoning", "anchored", "Hi." + G_ALARM, "", "Hi." + G_ALARM + "<tool_response|>", []),
]  # fmt: skip


def run(parsers: str, info, text: str, size: int, name: str = "hf", rebuild: bool = True):
    """(reasoning, content, calls) of `text` fed in pieces of `size` (0: whole), in derender's order: reasoning,
    then tool calls over the content; each parser rebuilt from its JSON state before each piece (`rebuild`, as the
    stateless twin does) or kept (as the stream keeps it)."""
    pieces = [text[i : i + size] for i in range(0, len(text), size)] if size else [text]
    reasoning, content, calls = [], [], {}
    r_state = t_state = None
    parser = tools = None
    for n, piece in enumerate(pieces):
        final = n == len(pieces) - 1
        if parsers != "tools":
            cls = REASONING_PARSERS[name]
            if parser is None or rebuild:
                parser = cls(**json.loads(r_state)) if r_state else cls.create(parsers == "started")
                parser.bind(info)
            thought, piece = parser.feed(piece, final)
            r_state = json.dumps(parser.state())
            reasoning.append(thought)
        if parsers != "reasoning":
            if tools is None or rebuild:
                tools = make_tool_parser(name, json.loads(t_state) if t_state else None, tools=TOOLS, model=info)
            piece, deltas = tools.feed(piece, final)
            t_state = json.dumps(tools.state())
            for delta in deltas:
                entry = calls.setdefault(delta.index, ["", ""])
                entry[0] += delta.name or ""
                entry[1] += delta.arguments
        content.append(piece)
    return "".join(reasoning), "".join(content), [(n, json.loads(a)) for n, a in (calls[i] for i in sorted(calls))]


ANCHORED = {**GEMMA4, "fields": {**GEMMA4["fields"], "tool_calls": {**GEMMA4["fields"]["tool_calls"]}}}
ANCHORED["fields"]["tool_calls"]["close"] = "<tool_call|><tool_response|>"  # ends with Gemma 4's second anchor
INFOS = {name: template_info(raw) for name, raw in {**TEMPLATES, "anchored": ANCHORED}.items()}


@pytest.mark.parametrize("parsers,template,text,reasoning,content,calls", CASES)
def test_as_vllm(parsers, template, text, reasoning, content, calls):
    for size in (0, 1, 3, 7):
        assert run(parsers, INFOS[template], text, size) == (reasoning, content, calls), size
    assert run(parsers, INFOS[template], text, 2, "beam") == (reasoning, content, calls)
    assert run(parsers, INFOS[template], text, 3, rebuild=False) == (reasoning, content, calls)


PIECES = ["<|channel>", "thought\n", "<channel|>", "<|tool_call>", "call:f", "{", "}", "a:1", '<|"|>', "<tool_call|>"]
PIECES += ["<turn|>", "<eos>", "x", " ", "\n", ":", ",", "<", "|", "é"]


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(PIECES), max_size=24),
    size=st.integers(1, 9),
    parsers=st.sampled_from(["both", "reasoning", "tools"]),
)
def test_marker_soup_is_chunking_invariant(pieces, size, parsers):
    text = "".join(pieces)
    whole = run(parsers, INFOS["gemma4"], text, 0)
    assert run(parsers, INFOS["gemma4"], text, size) == whole
    assert run(parsers, INFOS["gemma4"], text, size, rebuild=False) == whole


def test_state_stays_small_over_a_long_answer():
    info = INFOS["qwen3"]
    text = "<think>" + "word " * 1200 + "</think>" + "answer " * 1200
    parser = REASONING_PARSERS["hf"].create(False)
    parser.bind(info)
    for i in range(0, len(text), 5):
        parser.feed(text[i : i + 5], False)
        assert len(json.dumps(parser.state())) < 100
        assert parser._live is None or len(parser._live._buffer) <= LIVE_TEXT + 5  # what the stream keeps


def test_template_problems():
    assert load_template(None) == (None, "the tokenizer config declares no response_template")
    bad = {**QWEN3, "fields": {**QWEN3["fields"], "citations": {"open": "<cite>", "close": "</cite>"}}}
    assert "citations" in load_template(bad)[1]
    assert "not plain text" in load_template({**QWEN3, "fields": {"thinking": {"content": "json"}}})[1]


@pytest.fixture(scope="module")
def template_model(tmp_path_factory):
    """The default model's tokenizer with a response_template in its tokenizer_config.json (Qwen3's: ChatML)."""
    folder = tmp_path_factory.mktemp("templated")
    source = resolve_model(None)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source / name, folder / name)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "response_template": QWEN3}))
    hf = load_tokenizer(folder)
    return hf, TokenizerInfo.from_hf(hf)


@pytest.mark.parametrize(
    "reasoning_parser,tail,text,expected",
    [
        ("hf", "", "<think>plan</think>Sure.", ("plan", "Sure.")),
        # the prompt's last tokens hold the start anchor: read from there, as vLLM reads the prompt
        ("hf", "<|im_start|>assistant\n<think>\n", "plan</think>Sure.", ("plan", "Sure.")),
        ("none", "<|im_start|>assistant\n<think>\n", "plan</think>Sure.", ("", "planSure.")),
    ],
)
async def test_tokenizer_config_template_end_to_end(template_model, reasoning_parser, tail, text, expected):
    hf, info = template_model
    assert info.response_template is not None
    flags = ["--reasoning-parser", reasoning_parser, "--tool-parser", "beam"]
    service = DerenderService(build_parser().parse_args(flags), info)
    await service.load()
    typed = Q_PARIS.replace("3}", '"3"}')  # the schema types "3" as 3
    messages = engine_messages([[i] for i in hf.encode(text + typed + "<|im_end|>", add_special_tokens=False)])
    context = derender_pb2.DerenderContext(id="chatcmpl-hf", skip_special_tokens=True, parallel_tool_calls=True)
    context.prompt_tail_token_ids.extend(hf.encode(tail, add_special_tokens=False))
    function = context.tools.add(type="function").function
    function.name = "get_weather"
    function.parameters.update({"properties": {"days": {"type": "integer"}}})
    answer = await service.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=messages), None)
    message = answer.choices[0].message
    assert (message.reasoning_content, message.content) == expected
    assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [PARIS]
    assert answer.choices[0].finish_reason == "tool_calls"
    streamed, state = [], b""
    for message in messages:  # the stateless twin
        request = derender_pb2.DerenderChunkRequest(context=context, engine_output=message, state=state)
        response = await service.DerenderChunk(request, None)
        state = response.state
        streamed += [c.delta for c in response.chat.choices]
    assert ("".join(d.reasoning_content for d in streamed), "".join(d.content for d in streamed)) == expected
    assert [(c.function.name, json.loads(c.function.arguments)) for d in streamed for c in d.tool_calls] == [PARIS]


async def test_a_model_without_a_template_is_refused(info):
    assert info.response_template is None
    for flags in (["--reasoning-parser", "hf"], ["--tool-parser", "beam"]):
        with pytest.raises(SystemExit, match=f"{flags[0]} {flags[1]} reads the model's response_template"):
            await DerenderService(build_parser().parse_args(flags), info).load()
    service = DerenderService(build_parser().parse_args([]), info)
    await service.load()
    context = derender_pb2.DerenderContext(id="chatcmpl-x", reasoning_parser="hf")
    with pytest.raises(ServiceError, match="response_template"):
        await service.DerenderChat(
            derender_pb2.DerenderChatRequest(context=context, results=engine_messages([[1]])), None
        )
