"""LoRA adapter names loaded and unloaded at run time (RenderService.LoadLoraAdapter / UnloadLoraAdapter, reached
through vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter once every engine replica has the adapter): the
names a request's `model` may give and /v1/models lists (Renderer.loras). The checks and messages are vLLM's
(OpenAIServingModels' _check_load_lora_adapter_request and _check_unload_lora_adapter_request)."""

from __future__ import annotations

from render_svc.renderer import Renderer
from scaleout.v1 import common_pb2
from scaleout_common.errors import quote
from scaleout_common.lora_modules import LoraModule
from scaleout_common.reasons import Reason, fail


def load_adapter(renderer: Renderer, enabled: bool, request: common_pb2.LoadLoraAdapterRequest):
    if not enabled:
        raise fail(Reason.LORA_REFUSED, "this render serves no LoRA adapters: start it with --enable-lora")
    name = request.lora_name
    if not name or not request.lora_path:
        raise fail(Reason.INVALID_REQUEST, "Both 'lora_name' and 'lora_path' must be provided.", "lora_name")
    if name in renderer.model.names:
        raise fail(Reason.LORA_REFUSED, f"The lora adapter {quote(name)} conflicts with a served base model.")
    if name in renderer.loras:
        raise fail(Reason.LORA_REFUSED, f"The lora adapter {quote(name)} has already been loaded.", "lora_name")
    renderer.loras[name] = LoraModule(name, request.lora_path, request.base_model_name)
    return common_pb2.LoadLoraAdapterResponse()


def unload_adapter(renderer: Renderer, request: common_pb2.UnloadLoraAdapterRequest):
    if not request.lora_name:
        raise fail(Reason.INVALID_REQUEST, "'lora_name' needs to be provided to unload a LoRA adapter.", "lora_name")
    if renderer.loras.pop(request.lora_name, None) is None:
        raise fail(Reason.LORA_NOT_FOUND, f"The lora adapter {quote(request.lora_name)} cannot be found.", "lora_name")
    return common_pb2.UnloadLoraAdapterResponse()
