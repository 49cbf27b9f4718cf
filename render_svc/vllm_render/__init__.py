"""vLLM's render protocol (`vllm launch render`, 0.33) as a face over our render core.

`POST /v1/chat/completions/render` and `POST /v1/completions/render` take vLLM's ChatCompletionRequest and
CompletionRequest JSON (`fields.py`: every field and how it is taken, in one table; `request.py` reads them
into our typed render requests) and answer as vLLM's render server answers: its GenerateRequest JSON, one
object for chat and a list (one per prompt) for completions (`answer.py`, with `sampling.py` printing
`sampling_params` as vLLM does), with our GenerateRequest and DerenderContext beside them under `scaleout`.
The typed RenderChat / RenderCompletion keep their contract at `/v1/chat/completions/render/typed` and
`/v1/completions/render/typed`.
"""

from render_svc.vllm_render.answer import chat_json, completion_json, render_chat_vllm, render_completion_vllm

__all__ = ["chat_json", "completion_json", "render_chat_vllm", "render_completion_vllm"]
