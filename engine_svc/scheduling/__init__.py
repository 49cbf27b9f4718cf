"""The scheduler side: requests admitted as sequences with resolved sampling configs, the KV block pool, and
which chunks run each step. Pure Python; knows nothing of the model or the server."""
