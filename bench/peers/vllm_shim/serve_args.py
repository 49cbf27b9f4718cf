"""`vllm serve` flags, as vLLM's tests pass them, onto a devstack StackConfig.

Four kinds: flags that only tune a vLLM deployment (no effect on what the API answers) are dropped; flags with
an equivalent are passed to the services that own it; flags that make the server another kind of server (no
tokenizer, multimodal, MCP tool servers) are `Unsupported`, which the shim turns into a skip naming the flag; any
other flag (a feature we lack) is listed in `not_served` and the stack starts without it, so the cases that
need it fail, where the report classifies them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from engine_svc.scheduling.speculation import parse_speculative_config

# Deployment tuning: memory, kernels, scheduling, caching. The answers are the same without them.
IGNORED = {
    "--dtype": 1,
    "--max-num-seqs": 1,
    "--enforce-eager": 0,
    "--gpu-memory-utilization": 1,
    "--seed": 1,
    "--port": 1,
    "--host": 1,
    "--trust-remote-code": 0,
    "--max-num-batched-tokens": 1,
    "--enable-chunked-prefill": 0,
    "--no-enable-prefix-caching": 0,
    "--enable-prefix-caching": 0,
    "--no-async-scheduling": 0,
    "--load-format": 1,
    "--enable-server-load-tracking": 0,
    "--tensor-parallel-size": 1,
    "--enable-prompt-tokens-details": 0,  # we always report usage.prompt_tokens_details.cached_tokens
    "--enable-auto-tool-choice": 0,  # tool_choice "auto" is always served where a tool parser is set
    "--structured-outputs-config.backend": 1,  # which grammar library; ours is our own
    "--enable-scale-out": 0,  # render, derender and /inference/v1/generate: always served here
}

# Flags we serve: vLLM's flag -> (services that take it, our flag). The value (if any) is passed as given.
MAPPED = {
    "--served-model-name": (("render",), "--served-model-name"),
    "--chat-template": (("render", "engine", "derender"), "--chat-template"),
    "--max-model-len": (("render", "engine"), "--max-model-len"),  # at most the model's (parse's `model_len`)
    "--tool-call-parser": (("render",), "--tool-parser"),
    "--reasoning-parser": (("render",), "--reasoning-parser"),
    "--chat-template-content-format": (("render",), "--chat-template-content-format"),
    "--trust-request-chat-template": (("render",), "--trust-request-chat-template"),
    "--enable-force-include-usage": (("chat",), "--enable-force-include-usage"),
    "--return-tokens-as-token-ids": (("chat",), "--return-tokens-as-token-ids"),
    "--enable-per-request-metrics": (("chat",), "--enable-per-request-metrics"),
    "--enable-lora": (("render", "engine"), "--enable-lora"),
    "--max-loras": (("engine",), "--max-loras"),
    "--max-lora-rank": (("engine",), "--max-lora-rank"),
    "--max-cpu-loras": (("engine",), "--max-cpu-loras"),
    "--convert": (("engine",), "--convert"),
    "--pooler-config": (("engine",), "--pooler-config"),
    "--profiler-config": (("engine",), "--profiler-config"),
    "--enable-tokenizer-info-endpoint": (("render",), "--enable-tokenizer-info-endpoint"),
}
SWITCHES = {
    "--trust-request-chat-template",
    "--enable-force-include-usage",
    "--return-tokens-as-token-ids",
    "--enable-per-request-metrics",
    "--enable-lora",
    "--enable-tokenizer-info-endpoint",
}
# Another kind of server altogether: every case of the file would test that, so the file is skipped.
OTHER_SERVER = {
    "--skip-tokenizer-init": "token ids only, no tokenizer",
    "--tokens-only": "token ids only: never detokenizes, refuses stop strings and text output",
    "--tool-server": "MCP / built-in tool servers for the Responses API",
    "--limit-mm-per-prompt": "a multimodal model",
    "--hf-overrides": "a model config override",
    "--root-path": "the API under a path prefix behind a proxy",
}


# vLLM's runners the engine has (`--runner draft` is a speculative draft model's, not a server's).
RUNNERS = ("auto", "generate", "pooling")
CONVERTS = ("auto", "none", "embed")  # `classify`: a classifier head, not served
# The pooling of a pooling runner given no --pooler-config. vLLM reads the test's model's own (its Sentence
# Transformers modules.json: mean for e5, CLS for bge); the alias folder has none, and the HF reference the tests
# compute through the alias (hf_runner.py) pools by mean, Sentence Transformers' default for such a folder.
ALIAS_POOLER = '{"pooling_type": "MEAN"}'


class Unsupported(Exception):
    """A flag that changes the API's answers and that this stack does not serve."""


@dataclass
class ServeArgs:
    model: str
    served_names: list[str] = field(default_factory=list)
    service_args: dict[str, list[str]] = field(default_factory=dict)
    max_logprobs: int | None = None
    lora_names: list[str] = field(default_factory=list)  # adapters whose folder is not here (hub downloads, offline)
    not_served: list[str] = field(default_factory=list)  # flags the stack starts without


def _split(argv: list[str]) -> list[tuple[str, list[str]]]:
    """`--flag value...` and `--flag=value` pairs, in order."""
    pairs: list[tuple[str, list[str]]] = []
    for token in argv:
        if token.startswith("--"):
            name, eq, value = token.partition("=")
            pairs.append((name.replace("_", "-"), [value] if eq else []))  # vLLM takes either spelling
        elif pairs:
            pairs[-1][1].append(token)
        else:
            raise Unsupported(f"positional argument {token!r}")
    return pairs


def _served_speculation(values: list[str]) -> bool:
    """An n-gram --speculative-config the engine takes as given; a draft model names a checkpoint of the test's
    hub, which this stack does not have (not served)."""
    try:
        spec = parse_speculative_config(" ".join(values))
    except ValueError:
        return False
    return spec is not None and spec.method == "ngram"


def _lora_modules(out: ServeArgs, values: list[str]) -> None:
    """Adapters whose PEFT folder is here go to render and the engine (the engine checks that they fit the served
    model); the others (a hub adapter of the test's model, never downloaded offline) are listed unserved."""
    for value in values:
        name, path = _lora_module(value)
        if (Path(path) / "adapter_config.json").is_file():
            for role in ("render", "engine"):
                out.service_args.setdefault(role, []).extend(["--lora-modules", value])
        else:
            out.lora_names.append(name)


def _lora_module(value: str) -> tuple[str, str]:
    """(name, path) of a --lora-modules value, name=path or vLLM's JSON form."""
    if value.lstrip().startswith("{"):
        item = json.loads(value)
        return str(item.get("name", "")), str(item.get("path", ""))
    name, _, path = value.partition("=")
    return name, path


def _runner(out: ServeArgs, pairs: list[tuple[str, list[str]]], runner: str) -> None:
    """--runner (and --convert) to the engine; a runner or conversion the engine lacks (draft, classify) is another
    kind of server. A pooling engine given no --pooler-config pools as the HF reference does (ALIAS_POOLER)."""
    convert = "auto"
    for name, values in pairs:
        if name in ("--runner", "--convert"):
            known = RUNNERS if name == "--runner" else CONVERTS
            if len(values) != 1 or values[0] not in known:
                raise Unsupported(f"vllm serve flag {name} {' '.join(values)[:40]}: not served by scaleout")
            runner, convert = (values[0], convert) if name == "--runner" else (runner, values[0])
    if runner != "auto":
        out.service_args.setdefault("engine", []).extend(["--runner", runner])
    pooling = runner == "pooling" or (runner == "auto" and convert == "embed")
    if pooling and not any(name == "--pooler-config" for name, _ in pairs):
        out.service_args.setdefault("engine", []).extend(["--pooler-config", ALIAS_POOLER])


def parse(model: str, argv: list[str], model_len: int | None = None, runner: str = "auto") -> ServeArgs:
    """`vllm serve <model> argv` as a stack serving our model under the names the test asks for. `model_len`: our
    model's context; a longer --max-model-len (a length the test's model has) is cut to it, as the engine cuts it.
    `runner`: the one vLLM's `--runner auto` picks from the test's model's architecture (an embedding model's
    is pooling), which the alias (a causal LM) does not tell; a --runner flag wins."""
    out = ServeArgs(model)
    pairs = _split(argv)
    _runner(out, pairs, runner)
    for name, values in pairs:
        if name in IGNORED or name == "--runner":  # --runner: _runner's
            continue
        if name == "--max-model-len" and model_len:
            values = [str(min(int(values[0]), model_len))]
        if name == "--max-logprobs":  # -1: the whole vocabulary, as vLLM's
            out.max_logprobs = int(values[0])
        elif name == "--speculative-config" and _served_speculation(values):
            out.service_args.setdefault("engine", []).extend(["--speculative-config", *values])
        elif name in ("--lora-modules", "--lora-module"):
            _lora_modules(out, values)
        elif name == "--served-model-name":
            out.served_names += values
        elif name in MAPPED:
            roles, ours = MAPPED[name]
            for role in roles:
                out.service_args.setdefault(role, []).extend([ours] if name in SWITCHES else [ours, *values])
        elif name in OTHER_SERVER:
            raise Unsupported(f"vllm serve flag {name} ({OTHER_SERVER[name]}): not served by scaleout")
        else:
            out.not_served.append(" ".join([name, *values]))
    names = out.served_names or [model]
    out.service_args.setdefault("render", []).extend(["--served-model-name", *names])
    out.served_names = names
    return out
