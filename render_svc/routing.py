"""The routing key render publishes with every GenerateRequest (`prefix_hash`).

Requests that share a long prefix should reach the engine replica that caches its KV blocks, while distinct
conversations spread over the replicas. The key is the prefix hash (`scaleout_common.prefix_hash`, salted like
the engine's block hashes) of the part of the prompt that every turn of a conversation starts with:

- a chat: its prompt's tokens up to the end of its first user message's text. Turn 1 and turn 9 of a conversation
  render that part the same, so they get the same key; two conversations behind one shared system prompt differ
  in their first user message, so they spread. The count of those tokens comes from the request's one render
  and tokenization: `first_turn_end` finds where the first user message's text ends in the rendered prompt
  (each message's text is looked for in order, from where the previous one was found: templates render a
  message's text as given, at most trimmed), and render_svc/tokens.py counts the tokens before it. A chat whose
  first user text is not in its prompt as given (or that has no user message) keys on its whole prompt.
- a completion: its first COMPLETION_PREFIX_TOKENS tokens (a shared few-shot header routes together).
- a chat with OpenAI's `prompt_cache_key`: that key (salted), whatever the prompt: the caller groups its
  requests itself.
- a bridged turn (BridgeChat): the key of the turn it continues, which the caller passes on from that turn's
  GenerateRequest, so every turn of a conversation keeps its first turn's key; without it, its previous
  prompt's ids keyed as a completion's (the messages that key a chat are not there to render).

Callers send the key as the `x-scaleout-prefix-hash` header on EngineService calls; the gateway's consistent
hash picks the replica from it (gateway/envoy.yaml.j2), and a request without it goes anywhere.
"""

from __future__ import annotations

from scaleout_common import prefix_hash
from scaleout_common.reasons import Reason, fail

# Blocks the key is hashed in: the engine's default block size, so a key is also the engine's hash of the
# prefix's last block when the prefix fills whole blocks (what an external router can match on).
BLOCK_SIZE = 16
COMPLETION_PREFIX_TOKENS = 256


def first_turn_end(messages: list[dict], text: str) -> int | None:
    """Where the first user message's text ends in `text`, the prompt rendered from `messages` (None: no user
    message, or its text is not in the prompt as given)."""
    at = 0
    for message in messages:
        user = message["role"] == "user"
        for part in _texts(message["content"]):
            found, length = _find(text, part, at)
            if found < 0 and user:  # a template that moved an earlier message (the system prompt) after it
                found, length = _find(text, part, 0)
            if found >= 0:
                at = found + length
            elif user:
                return None
        if user:
            return at
    return None


def chat_prefix_hash(request, ids: list[int], first_turn_tokens: int | None) -> str:
    """The key of a rendered chat (`request`: its RenderChatRequest; `first_turn_tokens`: how many of its prompt
    `ids` lie before the end of its first user message's text, None when unknown)."""
    salt = request.cache_salt
    if request.prompt_cache_key:
        return prefix_hash.named_key(salt, request.prompt_cache_key)
    return prefix_hash.prefix_key(salt, ids if first_turn_tokens is None else ids[:first_turn_tokens], BLOCK_SIZE)


def _texts(content) -> list[str]:
    """A message's texts; blank ones find nothing."""
    texts = [content] if isinstance(content, str) else [part["text"] for part in content or ()]
    return [text for text in texts if text.strip()]


def _find(text: str, part: str, start: int) -> tuple[int, int]:
    """(where, length) of `part` in `text` from `start`: as given, else trimmed (templates that trim content);
    (-1, 0) when not there. As given, the end of a message's text is where its turn's closing token starts."""
    found = text.find(part, start)
    if found >= 0:
        return found, len(part)
    part = part.strip()
    return text.find(part, start), len(part)


def completion_prefix_hash(cache_salt: str, ids: list[int]) -> str:
    return prefix_hash.prefix_key(cache_salt, ids[:COMPLETION_PREFIX_TOKENS], BLOCK_SIZE)


def bridge_prefix_hash(previous_key: str, cache_salt: str, previous_ids: list[int]) -> str:
    """The key of a bridged turn: `previous_key` (the continued turn's key) when given, else the completion key
    of the previous prompt's ids."""
    if not previous_key:
        return completion_prefix_hash(cache_salt, previous_ids)
    if not prefix_hash.is_key(previous_key):
        raise fail(Reason.INVALID_PREFIX_HASH, "prefix_hash is not a key render makes (32 hex digits)", "prefix_hash")
    return previous_key
