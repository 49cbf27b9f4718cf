"""SGLang's server tests (test/srt of sgl-project/sglang) that talk to a launched server over HTTP.

The tree: SGLang's repository snapshot is too large for the fetch tool here, so the files are taken one by one
from the public index into ~/.cache/scaleout/peers/sglang at their repository paths (FILES and the kit below);
`--src` points at any other copy, a checkout included. Nothing of it is committed.

Left out: the files that need what a 135M text model on CPU cannot be (multimodal, LoRA, speculative decoding,
TP/DP/EP, P/D, quantization, hardware kernels) and SGLang's own Python objects tested in-process.
"""

from __future__ import annotations

HOW = (
    "copy SGLang's test files (sgl-project/sglang: FILES and RENAMED in bench/peers/sglang_shim/suite.py) into "
    "~/.cache/scaleout/peers/sglang at their repository paths, or pass --src with a checkout"
)
MARKER = "test/srt"
FILES: tuple[str, ...] = (
    "test/srt/test_srt_endpoint.py",
    "test/srt/test_regex_constrained.py",
    "test/srt/test_ebnf_constrained.py",
    "test/srt/test_skip_tokenizer_init.py",
    "test/srt/openai_server/features/test_json_constrained.py",
    "test/srt/openai_server/basic/test_openai_server.py",
)
# SGLang's own helpers the tests import, staged where the `sglang` package would hold them.
RENAMED = {"python/sglang/test/kits/json_constrained_kit.py": "sglang/test/kits/json_constrained_kit.py"}
# SGLang runs these files with unittest: only TestCase classes are tests (its mixins, named Test*, are not).
PYTEST_INI = (
    "[pytest]\npython_classes = UnittestTestCasesOnly\nasyncio_default_fixture_loop_scope = function\ntimeout = 900\n"
)
_SHIM = "bench.peers.sglang_shim."
SHIMS = {
    "sglang/test/test_utils.py": _SHIM + "test_utils",
    "sglang/test/runners.py": _SHIM + "runners",
    "sglang/srt/utils/__init__.py": _SHIM + "process",
    "sglang/srt/utils/hf_transformers_utils.py": _SHIM + "tokenizer",
    "sglang/srt/sampling/custom_logit_processor.py": _SHIM + "logit_processor",
}
