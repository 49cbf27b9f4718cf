"""What the engine knows of its model beyond the limits: where it was loaded from, its family, its special ids
and the sampling defaults of its generation_config. Read by GetModelInfo on the faces that report them."""

from __future__ import annotations

from dataclasses import dataclass, field

# generation_config keys that are sampling defaults (vLLM's get_diff_sampling_param keeps the same ones).
SAMPLING_DEFAULT_KEYS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")


@dataclass(frozen=True)
class ModelFacts:
    path: str = ""  # the model folder ("" for a model built in memory)
    model_type: str = ""
    architectures: tuple[str, ...] = ()
    bos_token_id: int | None = None
    pad_token_id: int | None = None
    sampling_defaults: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, hf_model, path: str = "") -> ModelFacts:
        config, generation = hf_model.config, getattr(hf_model, "generation_config", None)
        given = generation.to_diff_dict() if generation is not None else {}  # what the file sets, not defaults
        defaults = {key: given[key] for key in SAMPLING_DEFAULT_KEYS if given.get(key) is not None}
        return cls(
            path=path,
            model_type=getattr(config, "model_type", "") or "",
            architectures=tuple(config.architectures or ()),
            bos_token_id=_first(getattr(config, "bos_token_id", None)),
            pad_token_id=_first(getattr(config, "pad_token_id", None)),
            sampling_defaults=defaults,
        )


def _first(value) -> int | None:
    return value[0] if isinstance(value, list) and value else value if isinstance(value, int) else None
