"""`get_tokenizer`: the tokenizer of the model the stack serves, whatever name the test asks it by."""

from __future__ import annotations

import functools
import os

from scaleout_common.models import load_tokenizer, resolve_model


@functools.cache
def get_tokenizer(tokenizer_name: str = "", *args, **kwargs):
    return load_tokenizer(resolve_model(os.environ.get("SCALEOUT_PEER_MODEL") or None))
