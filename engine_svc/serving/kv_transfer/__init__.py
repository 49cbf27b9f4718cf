"""Disaggregated prefill and decode: a prompt's KV blocks handed from a prefill engine to a decode engine."""
