"""vLLM 0.33's `/score` and `/rerank` JSON over an embedding model (its bi-encoder scoring) -> one embedding call.

The policy (vLLM's ScoreRequest and RerankRequest fields, as its ScoringRequestMixin takes them):
- the pair: score's `queries`/`documents`, `queries`/`items`, `data_1`/`data_2` or `text_1`/`text_2` (vLLM's order
  of its request types); rerank's `query` (one) and `documents`. Each side a string or a list of strings, lengths
  1:1, 1:N or N:N (vLLM's words); a field of a second pair is refused (CONFLICTING_OPTIONS, naming it), as is a
  multimodal item (`{"content": [...]}`: the model takes text, vLLM's words);
- each query and document is embedded once, alone, queries first, in one render + Embed call: render tokenizes
  each (special tokens added, as vLLM's scoring does) and applies `truncate_prompt_tokens` / `truncation_side`;
- the pooling fields every route takes (`model`, `user`, `priority`, `request_id`, `use_activation`, `cache_salt`,
  `padding`; embeddings_request.pooling_field); `use_activation` changes no score (a cosine ignores the norms);
- `max_tokens_per_query` / `max_tokens_per_doc` (0, vLLM's default: no cut) cut each query's / document's text to
  that many tokens before it is tokenized, as vLLM does (render's `max_text_tokens`: the queries and the documents
  then render apart, one Embed call still); below 0 or not below the model length refused naming it;
- `instruction` and `chat_template_kwargs` feed a cross-encoder's score template only: refused naming them, as is
  any other field (UNSUPPORTED_FIELD);
- rerank: `top_n` (0, the default: every document) keeps the best n; `return_documents` (Jina's and Cohere's
  field; vLLM 0.33 always returns them) false leaves each result's `document` out.
The answers and the math: vllm_scoring_answer.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline_svc.embeddings_request import pooling_field, refused, renamed
from scaleout.v1 import render_pb2
from scaleout_common.errors import ServiceError
from scaleout_common.json_body import load_object
from scaleout_common.openai_body_rules import parse_typed
from scaleout_common.reasons import Reason, fail

SCORE_PAIRS = (("queries", "documents"), ("queries", "items"), ("data_1", "data_2"), ("text_1", "text_2"))
RERANK_PAIR = ("query", "documents")
CUTS = ("max_tokens_per_query", "max_tokens_per_doc")  # each side's text cut (render's max_text_tokens)
CROSS_ENCODER_ONLY = "is read by a cross-encoder's score template only; this model scores as a bi-encoder"
WHY = {"instruction": CROSS_ENCODER_ONLY, "chat_template_kwargs": CROSS_ENCODER_ONLY}


@dataclass
class ScoringRequest:
    typed: render_pb2.RenderEmbeddingRequest
    names: tuple[str, str]  # the client's names of the two sides
    queries: list[str]
    documents: list[str]
    single: tuple[bool, bool] = (False, False)  # a side sent as one string, not a list
    cuts: tuple[int, int] = (0, 0)  # tokens each query's and each document's text is cut to (0: none)
    top_n: int = 0  # rerank: 0 keeps every document
    return_documents: bool = True
    identity: dict[str, str] = field(default_factory=dict)


def _side(name: str, value) -> list[str]:
    items = value if isinstance(value, list) else [value]
    for i, item in enumerate(items):
        where = f"{name}[{i}]" if isinstance(value, list) else name
        if isinstance(item, dict):
            raise fail(Reason.UNSUPPORTED_FIELD, "MultiModalParam is not supported: the model takes text", where)
        if not isinstance(item, str):
            raise fail(Reason.INVALID_REQUEST, f"`{where}` must be a string", where)
    return items


def _check_lengths(queries: list, documents: list, names: tuple[str, str]) -> None:
    """vLLM's rule and words: 1:1, 1:N or N:N."""
    if len(queries) > 1 and len(queries) != len(documents):
        raise fail(Reason.INVALID_REQUEST, "Input lengths must be either 1:1, 1:N or N:N", names[1])
    if not queries:
        raise fail(Reason.MISSING_PROMPT, "At least one text element must be given", names[0])
    if not documents:
        raise fail(Reason.MISSING_PROMPT, "At least one text_pair element must be given", names[1])


def _pair(data: dict, rerank: bool) -> tuple[str, str]:
    if rerank:
        for name in RERANK_PAIR:
            if name not in data:
                raise fail(Reason.MISSING_PROMPT, f"`{name}` is required", name)
        return RERANK_PAIR
    pair = next((p for p in SCORE_PAIRS if p[0] in data and p[1] in data), None)
    if pair is None:
        raise fail(
            Reason.MISSING_PROMPT,
            "a score request needs `text_1` and `text_2` (or `queries` and `documents`, `queries` and `items`, "
            "`data_1` and `data_2`)",
            "text_1",
        )
    return pair


def scoring_request(body: bytes, rerank: bool) -> ScoringRequest:
    data = {k: v for k, v in load_object(body).items() if v is not None}
    names = _pair(data, rerank)
    if rerank and isinstance(data["query"], list):
        raise fail(Reason.INVALID_REQUEST, "`query` must be one string", "query")
    single = (not isinstance(data[names[0]], list), not isinstance(data[names[1]], list))
    queries, documents = _side(names[0], data.pop(names[0])), _side(names[1], data.pop(names[1]))
    _check_lengths(queries, documents, names)
    parsed = ScoringRequest(render_pb2.RenderEmbeddingRequest(), names, queries, documents, single)
    out: dict = {"inputs": queries + documents}
    pairs = {name for pair in SCORE_PAIRS for name in pair}
    for name, value in data.items():
        if pooling_field(name, value, out, parsed.identity):
            continue
        if name in pairs or name in RERANK_PAIR:
            raise fail(Reason.CONFLICTING_OPTIONS, f"`{name}`: give one pair of inputs", name)
        if name in CUTS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise fail(Reason.INVALID_REQUEST, f"{name} must be a non-negative integer", name)  # vLLM's words
            cuts = list(parsed.cuts)
            cuts[CUTS.index(name)] = value
            parsed.cuts = (cuts[0], cuts[1])
        elif rerank and name == "top_n":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise fail(Reason.INVALID_REQUEST, "`top_n` must be an integer >= 0", name)
            parsed.top_n = value
        elif rerank and name == "return_documents":
            if not isinstance(value, bool):
                raise fail(Reason.INVALID_REQUEST, "`return_documents` must be a boolean", name)
            parsed.return_documents = value
        else:
            raise refused(name, WHY)
    parsed.typed = parse_typed(out, parsed.typed)
    return parsed


def parts(request: ScoringRequest) -> list[render_pb2.RenderEmbeddingRequest]:
    """The render requests: one over queries and documents, or, where a side's text is cut, one per side."""
    if not any(request.cuts):
        return [request.typed]
    out = []
    for texts, cut in zip((request.queries, request.documents), request.cuts):
        part = render_pb2.RenderEmbeddingRequest()
        part.CopyFrom(request.typed)
        del part.inputs[:]
        part.inputs.extend(texts)
        part.max_text_tokens = cut
        out.append(part)
    return out


def in_client_terms(error: ServiceError, request: ScoringRequest) -> ServiceError:
    """`error` with render's and the engine's `inputs[i]` named as the client's side and index, and render's
    `max_text_tokens` as the side's cut that it refused (the queries render first)."""
    count = len(request.queries)
    given = [(name, value) for name, value in zip(CUTS, request.cuts) if value]
    cut = next((name for name, value in given if f"({value})" in error.message), given[0][0] if given else "")
    if cut and any(name == "max_text_tokens" for name, _ in error.violations):
        error.message = error.message.replace("max_text_tokens", cut)
        error.violations = [
            (cut if n == "max_text_tokens" else n, w.replace("max_text_tokens", cut)) for n, w in error.violations
        ]

    def name_of(i: int) -> str:
        side, index = (0, i) if i < count else (1, i - count)
        return request.names[side] if request.single[side] else f"{request.names[side]}[{index}]"

    return renamed(error, name_of)
