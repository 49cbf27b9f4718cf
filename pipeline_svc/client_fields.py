"""An engine error in the client's words: the field it names is the client's own, not the engine's.

Render turns a request's output constraint (OpenAI's `response_format`, Anthropic's `output_config.format`, a
forced or strict tool, ...) into `SamplingParams.structured_outputs`, and the engine compiles it: a schema it
cannot enforce comes back naming `sampling_params.structured_outputs.<kind>`, a path the client never wrote.
The one hop knows what the client sent, so it names the first of the API's constraint sources in the body.
"""

from __future__ import annotations

import json

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


def in_client_terms(error: ServiceError, data: bytes, sources: tuple[str, ...]) -> ServiceError:
    """`error` with the engine's constraint field renamed to the source in the client's JSON body `data`."""
    if not any(field.startswith(ENGINE_CONSTRAINT) for field, _ in error.violations):
        return error
    try:
        body = json.loads(data)
    except ValueError:
        return error
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
