"""derender_svc: token ids -> text, reasoning, tool calls and OpenAI-shaped responses."""
