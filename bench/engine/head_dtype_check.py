"""--head-dtype float32 on CUDA (graphs, Triton kernels, bf16 model): the logits it reports against a float32 head over
transformers' own last hidden state, the same for the model-dtype head, and decode tokens/s with each.

    python -m bench.engine.head_dtype_check --shape llama-1b          # CUDA
    python -m bench.engine.head_dtype_check --shape llama-host --device cpu   # the script itself, on CPU

Prints, per head dtype: max |reported - float32 head| and |reported - bf16 head| over the prompt's logits (raw_logits
mode, prompt_logprobs), and tokens/s of `--streams` greedy streams. Expect the float32 head's row to sit near the
float32 reference (within what the paged decoder's bf16 hidden state differs from transformers') and its speed
within a few percent of the bf16 head's.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import torch

from bench.engine.shapes import build_model
from engine_svc.__main__ import make_parser
from engine_svc.scheduling.admission import admit
from engine_svc.serving.loader import build_engine
from engine_svc.serving.streaming import collect
from scaleout.v1 import common_pb2, engine_pb2


async def _run(loaded, prompts, new_tokens: int, scored: bool):
    loaded.engine.start(asyncio.get_running_loop())

    async def one(prompt):
        params = common_pb2.SamplingParams(temperature=0.0, max_tokens=new_tokens, ignore_eos=True)
        if scored:
            params.prompt_logprobs = 0
        rid, seqs, _ = admit(engine_pb2.GenerateRequest(token_ids=prompt, sampling_params=params), loaded.limits)
        return await collect(loaded.engine, loaded.engine.submit(rid, seqs), rid)

    try:
        return await asyncio.gather(*[one(p) for p in prompts])
    finally:
        loaded.engine.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="llama-1b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=128)
    args = parser.parse_args()
    model = build_model(args.shape, args.device, torch.bfloat16, max_len=4096)
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(3, vocab, (64,), generator=g).tolist()
    with torch.no_grad():
        hidden = model.model(torch.tensor([prompt], device=args.device)).last_hidden_state[0, :-1]
        targets = torch.tensor(prompt[1:], device=args.device)
        weight = model.lm_head.weight
        as_float32 = torch.nn.functional.linear(hidden.float(), weight.float()).gather(1, targets[:, None])[:, 0]
        as_model = torch.nn.functional.linear(hidden, weight).float().gather(1, targets[:, None])[:, 0]
    prompts = [torch.randint(3, vocab, (128,), generator=g).tolist() for _ in range(args.streams)]
    for head in ("model", "float32"):
        flags = ["--device", args.device, "--max-model-len", "2048", "--logprobs-mode", "raw_logits"]
        loaded = build_engine(model, make_parser().parse_args([*flags, "--head-dtype", head]), model_name=args.shape)
        [answer] = asyncio.run(_run(loaded, [prompt], 1, scored=True))
        reported = torch.tensor(list(answer.prompt.logprobs.logprobs), device=args.device)
        asyncio.run(_run(loaded, prompts[:4], 8, scored=False))  # warm-up: graphs
        start = time.perf_counter()
        asyncio.run(_run(loaded, prompts, args.new_tokens, scored=False))
        rate = args.streams * args.new_tokens / (time.perf_counter() - start)
        off32 = (reported - as_float32).abs().max().item()
        off16 = (reported - as_model).abs().max().item()
        print(f"head {head:>7}: |logits - fp32 head| {off32:.4f}  |logits - bf16 head| {off16:.4f}  {rate:.0f} tok/s")
        del loaded
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
