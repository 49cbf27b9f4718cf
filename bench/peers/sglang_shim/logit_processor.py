"""SGLang's CustomLogitProcessor base, enough for a test to build one and serialize it. Our server refuses a
request's `custom_logit_processor` by name (no client code runs in the engine), so nothing here ever runs."""

from __future__ import annotations

import json


class CustomLogitProcessor:
    @classmethod
    def to_str(cls) -> str:
        return json.dumps({"callable": cls.__qualname__})

    def __call__(self, logits, custom_param_list):
        raise NotImplementedError
