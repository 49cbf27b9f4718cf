"""vLLM's ZMQ KV-event face (`--kv-events-config`): wire.py maps our events onto vLLM's structs, publisher.py
sends them (PUB + ROUTER replay), config.py reads the flag and answers `/kv_event_sources`."""
