"""render_svc: OpenAI-style chat/completion requests -> GenerateRequest + DerenderContext, on CPU.

Pure core (no gRPC): convert (proto -> template data), template (Jinja as transformers runs it) + sandbox
(request templates in worker processes), tokens (Rust encode), sampling (resolution rules), context
(DerenderContext), prompt (truncation, limits), renderer (chat), completion, bridge (multi-turn RL), tokenize_rpcs.
The gRPC servicer (service.py) is a thin shell; scaleout_common.reasons holds every error reason; errors.py words
render's composite errors.
"""
