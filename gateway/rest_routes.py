"""The contract's REST paths as the gateway routes them before transcoding (gateway/envoy.yaml.j2).

A REST call matches a route by its REST path only until the transcoder has turned it into its gRPC method's
path. That first match decides two things:
- the body limit (the buffer filter reads it per route): the one-hop JSON routes take `max_one_hop_body_mb`, the
  services' own routes (long contexts, render_batch, derender's token arrays) the services' message size;
- a method the path does not take (GET on /v1/chat/completions, a bare OPTIONS) is not transcoded, keeps its
  REST path and is answered here: 405 with `Allow`, in OpenAI's error shape (METHOD_NOT_ALLOWED).
Paths with variables (`/v1/models/{model=**}`) match through Envoy's URI template matcher, whose syntax is the
annotations' own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from google.protobuf.descriptor import ServiceDescriptor

from gateway.limits import Limits
from scaleout_common.openapi import method_bindings, verb_and_path

URI_TEMPLATE = {
    "name": "envoy.path.match.uri_template.uri_template_matcher",
    "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.path.match.uri_template.v3.UriTemplateMatchConfig",
    },
}


# Methods whose REST path a role's replicas also serve as plain HTTP (render's --http-port, render_svc/http_face.py):
# where every replica of the role has that port, the gateway proxies the path there as it is, untranscoded.
HTTP_FACES = {"render": ("RenderChatVllm", "RenderCompletionVllm", "RenderMessagesVllm", "RenderResponsesVllm")}


@dataclass(frozen=True)
class RestRoute:
    path: str  # the annotation's template
    methods: tuple[str, ...]  # what the transcoder takes on it (Allow)
    max_body_bytes: int
    proxy: str | None = None  # the cluster of the replicas' HTTP faces that serve this path as it is

    @property
    def match(self) -> dict:
        if "{" not in self.path:
            return {"path": self.path}
        typed = {**URI_TEMPLATE["typed_config"], "path_template": self.path}
        return {"path_match_policy": {**URI_TEMPLATE, "typed_config": typed}}

    @property
    def match_taken(self) -> dict:
        """The path with a method it takes (a call the transcoder left alone: an unknown query parameter)."""
        methods = "|".join(self.methods)
        taken = {"name": ":method", "string_match": {"safe_regex": {"regex": f"^({methods})$"}}}
        return {**self.match, "headers": [taken]}

    @property
    def allow(self) -> str:
        return ", ".join(self.methods)


def rest_routes(
    roles: Iterable[tuple[str, tuple[ServiceDescriptor, ...], str | None]], limits: Limits
) -> list[RestRoute]:
    """Every REST path the given roles' services bind, with the methods it takes, its body limit and, for a path
    of `HTTP_FACES`, the role's HTTP cluster (the third of each role's triple; None: transcoded as the others)."""
    paths: dict[str, tuple[set[str], int, str | None]] = {}
    for role, services, http_cluster in roles:
        for service in services:
            for method in service.methods:
                proxy = http_cluster if method.name in HTTP_FACES.get(role, ()) else None
                for rule in method_bindings(method.GetOptions()):
                    verb, path = verb_and_path(rule)
                    paths.setdefault(path, (set(), limits.body_bytes(role), proxy))[0].add(verb.upper())
    return [RestRoute(path, tuple(sorted(verbs)), size, proxy) for path, (verbs, size, proxy) in paths.items()]
