"""NVIDIA Dynamo's worker protocol (ai-dynamo 1.6.1): our engine registered with Dynamo's runtime as a token-in
model, behind Dynamo's frontend and router. fields.py: the field mapping; worker.py: the worker (docs/dynamo.md)."""
