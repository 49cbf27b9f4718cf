"""gpt-oss's tokenizer as built offline (tests/engine/o200k_harmony.py) against tiktoken's o200k_harmony on the
same ranks, and its chat template (tests/render/templates/gpt_oss.jinja) against openai-harmony's own rendering."""

from __future__ import annotations

import random
import time

import pytest
from transformers import AutoTokenizer

from tests.engine.o200k_harmony import NAMED, VOCAB_SIZE, harmony_encoding
from tests.models.gpt_oss import STOPS, TEMPLATE, add_chat_parts

pytestmark = pytest.mark.slow  # builds a 28 MB tokenizer.json once (~10 s), then loads it

TEXTS = [
    "The capital of France is Paris.\n\n  indented\tTabs\r\nCRLF",
    "Ünïcödé façade naïve 日本語のテキスト 中文 한국어 العربية עברית ελληνικά русский",
    "emoji 🙂👍🏽 and 1234567890 numbers 3.14159 e=mc^2 I'M SHOUTING'S HERE'LL",
    "def f(x):\n    return x**2  # it's don't\n   \n\n\n a/b/c\n/\n//x \u00a0nbsp\u2003emsp",
    "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|><|reserved_201087|>",
]
# openai-harmony 0.0.11's render_conversation_for_completion (HARMONY_GPT_OSS) of MESSAGES and TOOLS with the
# system content the template writes (its default identity, knowledge cutoff 2024-06, medium reasoning) on DATE
HARMONY_IDS = """
200006 17360 200008 3575 553 17554 162016 11 261 4410 6439 2359 22203 656 7788 17527 558 87447 100594 25 220
1323 19 12 3218 198 6576 3521 25 220 1323 21 12 899 12 3218 279 30377 289 25 14093 279 2 13888 18403 25 8450
11 49159 11 1721 13 21030 2804 413 7360 395 1753 3176 558 63446 316 1879 8437 2804 810 316 290 49159 9334 25
461 44580 6120 200007 200006 77944 200008 2 68406 279 17045 51088 364 2 20574 279 877 9964 279 4797 9964
95359 14536 11122 306 261 5030 198 2493 717 170154 314 11350 25 405 17500 25 1621 412 9263 871 1062 502 92
602 9819 9964 200007 200006 1428 200008 4827 382 290 11122 306 12650 30 120241 191375 43369 377 17428 40909
26192 200007 200006 173781
"""
DATE = "2026-12-06"
MESSAGES = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "What is the weather in Paris? Ünïcödé 日本語 🙂"},
]
PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Current weather in a city", "parameters": PARAMETERS},
    }
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return AutoTokenizer.from_pretrained(add_chat_parts(tmp_path_factory.mktemp("gpt-oss-tokenizer")))


def test_ids_are_tiktokens_o200k_harmony(tokenizer):
    encoding = harmony_encoding()
    rng = random.Random(0)
    alphabet = [chr(c) for c in [*range(32, 127), *range(0xA0, 0x250), *range(0x400, 0x450), *range(0x4E00, 0x4E80)]]
    alphabet += ["\n", "\t", " ", "  ", "'s", "🙂"]
    texts = TEXTS + ["".join(rng.choices(alphabet, k=rng.randint(1, 80))) for _ in range(200)]
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert ids == encoding.encode(text, allowed_special="all"), text
        assert tokenizer.decode(ids) == text


def test_special_tokens_sit_at_their_ids(tokenizer):
    assert len(tokenizer) == VOCAB_SIZE
    assert all(tokenizer.convert_tokens_to_ids(content) == i for content, i in NAMED.items())
    assert tokenizer.convert_ids_to_tokens([200000, 201087]) == ["<|reserved_200000|>", "<|reserved_201087|>"]
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == (
        "<|startoftext|>",
        "<|return|>",
        "<|endoftext|>",
    )
    # generation_config's stops: the published ones and <|call|> (openai-harmony's stops are <|return|>, <|call|>)
    assert tokenizer.convert_ids_to_tokens(STOPS) == ["<|return|>", "<|endoftext|>", "<|call|>"]


def test_the_template_renders_as_openai_harmony(tokenizer):
    assert tokenizer.chat_template == TEMPLATE.read_text()
    text = tokenizer.apply_chat_template(MESSAGES, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    text = text.replace(f"Current date: {time.strftime('%Y-%m-%d')}\n", f"Current date: {DATE}\n")
    assert tokenizer(text, add_special_tokens=False)["input_ids"] == [int(i) for i in HARMONY_IDS.split()]
