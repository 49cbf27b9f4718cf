"""An engine error in the client's words: the field it names is the client's own, not the engine's.

Render turns a request's output constraint (OpenAI's `response_format`, Anthropic's `output_config.format`, a
forced or strict tool, ...) into `SamplingParams.structured_outputs`, and the engine compiles it: a schema it
cannot enforce comes back naming `sampling_params.structured_outputs.<kind>`, a path the client never wrote.
The one hop knows what the client sent, so it names the first of the API's constraint sources in the body.
Likewise a completion's token-id `prompt` travels as `prompt_token_ids[i].token_ids`: an error there names the
client's `prompt` (`prompt[j]` for one list of ids, `prompt[i][j]` for several), and a chat's forwarded prompt
(`kv_transfer_params.prompt_token_ids`, vLLM's decode-side reuse) travels as `prompt_token_ids`.
"""

from __future__ import annotations

import json
import re

from scaleout_common.errors import ServiceError

ENGINE_CONSTRAINT = "sampling_params.structured_outputs"

# Where each API's requests put what render compiles into a constraint, most specific first.
OPENAI_CHAT = ("response_format", "structured_outputs", "tool_choice", "tools")
OPENAI_COMPLETION = ("response_format", "structured_outputs")
ANTHROPIC = ("output_config.format", "tool_choice", "tools")
RESPONSES = ("text.format", "tool_choice", "tools")


def _has(body: dict, path: str) -> bool:
    node = body
    for key in path.split("."):
        if not isinstance(node, dict) or node.get(key) is None:
            return False
        node = node[key]
    return True


PROMPT_IDS = re.compile(r"prompt_token_ids\[(\d+)\]\.token_ids")
CHAT_IDS = re.compile(r"(?<![.\w])prompt_token_ids\b")


def _prompt_path(body: dict, text: str) -> str:
    """`text` with the typed request's `prompt_token_ids[i].token_ids` written as the client's `prompt` path (a
    chat's `prompt_token_ids[i]` as its `kv_transfer_params.prompt_token_ids[i]`)."""
    if "prompt" not in body:
        return CHAT_IDS.sub(r"kv_transfer_params.\g<0>", text)
    prompt = body.get("prompt")
    several = isinstance(prompt, list) and bool(prompt) and isinstance(prompt[0], list)
    return PROMPT_IDS.sub(lambda m: f"prompt[{m[1]}]" if several else "prompt", text)


def in_client_terms(error: ServiceError, data: bytes, sources: tuple[str, ...]) -> ServiceError:
    """`error` with the engine's constraint field renamed to the source in the client's JSON body `data`, and a
    token-id prompt's typed path to the client's `prompt`."""
    typed_prompt = any(PROMPT_IDS.match(field) or CHAT_IDS.match(field) for field, _ in error.violations)
    if not typed_prompt and not any(field.startswith(ENGINE_CONSTRAINT) for field, _ in error.violations):
        return error
    try:
        body = json.loads(data)
    except ValueError:
        return error
    if (
        typed_prompt
        and isinstance(body, dict)
        and ("prompt" in body or _has(body, "kv_transfer_params.prompt_token_ids"))
    ):
        error.message = _prompt_path(body, error.message)
        error.violations = [(_prompt_path(body, f), _prompt_path(body, why)) for f, why in error.violations]
    source = next((path for path in sources if _has(body, path)), None)
    if source is not None:
        error.violations = [
            (source if field.startswith(ENGINE_CONSTRAINT) else field, why) for field, why in error.violations
        ]
    return error


async def named(events, data: bytes, sources: tuple[str, ...]):
    """A route's events; an error raised before any (an HTTP error) in the client's terms."""
    try:
        async for event in events:
            yield event
    except ServiceError as error:
        raise in_client_terms(error, data, sources) from None
