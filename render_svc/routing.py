"""The routing key render publishes with every GenerateRequest (`prefix_hash`).

Requests that share a long prefix should reach the engine replica that caches its KV blocks, while distinct
conversations spread over the replicas. The key is the prefix hash (`scaleout_common.prefix_hash`, salted like
the engine's block hashes) of the part of the prompt that every turn of a conversation starts with:

- a chat: its messages up to and including the first user message, rendered on their own (no generation
  prompt) and tokenized. Turn 1 and turn 9 of a conversation render that part the same, so they get the same
  key; two conversations behind one shared system prompt differ in their first user message, so they spread.
  A chat without a user message keys on its whole prompt.
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

from render_svc import convert
from scaleout_common import prefix_hash
from scaleout_common.reasons import Reason, fail

# Blocks the key is hashed in: the engine's default block size, so a key is also the engine's hash of the
# prefix's last block when the prefix fills whole blocks (what an external router can match on).
BLOCK_SIZE = 16
COMPLETION_PREFIX_TOKENS = 256


def chat_prefix_hash(renderer, job, ids: list[int]) -> str:
    """The key of a rendered chat (`job`: render_svc.renderer.ChatJob, its prompt `ids`)."""
    first_user = next((i for i, m in enumerate(job.messages) if m["role"] == "user"), None)
    salt = job.request.cache_salt
    if job.request.prompt_cache_key:
        return prefix_hash.named_key(salt, job.request.prompt_cache_key)
    if first_user is None:
        return prefix_hash.prefix_key(salt, ids, BLOCK_SIZE)
    documents = [convert.struct_to_py(d) for d in job.request.documents] or None
    text = renderer.templates.render(
        job.template,
        job.messages[: first_user + 1],
        job.tools,
        documents,
        add_generation_prompt=False,
        variables={**renderer.special_tokens, **job.template_kwargs},
    )
    [opening] = renderer.model.tokens.encode([text], job.add_special_tokens)
    return prefix_hash.prefix_key(salt, opening, BLOCK_SIZE)


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
