"""Structured outputs: constraints, the grammar backend, the compiled-grammar cache and per-step token masks."""
