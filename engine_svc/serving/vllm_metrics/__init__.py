"""vLLM's metric names beside ours: series.py is the whole map, vocab.py vLLM's label values and buckets, face.py the
observer and collector that serve it."""

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4 as CONTENT_TYPE

from engine_svc.serving.vllm_metrics.face import VllmMetrics

__all__ = ["CONTENT_TYPE", "VllmMetrics"]
