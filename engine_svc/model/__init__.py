"""The model side: runners that turn a step's chunks into logits (the fused decoder over the paged KV cache,
or transformers), attention backends and kernels, and the batched sampler."""
