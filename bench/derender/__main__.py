"""Derender CPU cost, measured side by side in one run (python -m bench.derender).

1. Stateful stream (DerenderStream over loopback gRPC, one token per engine message): CPU per output token at
   512 and 4,096 tokens; flat means the work per chunk does not grow with the output.
2. Replay-per-chunk baseline (what a client-held-state design does: re-derender the whole output so far on
   every chunk, here DerenderChat on the prefix) against the stateful stream, reasoning parser on, 2,048 tokens.
3. Throughput against the tokenizers library's own decode (one-shot `Tokenizer.decode` and `DecodeStream`).

CPU is this process's CPU time (client and server run in it, as in the tests); ratios are what matter.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import grpc
from scaleout.v1 import common_pb2, derender_pb2, derender_pb2_grpc, engine_pb2
from tokenizers.decoders import DecodeStream

from derender_svc.__main__ import build_parser
from derender_svc.service import DerenderService
from derender_svc.session import Defaults, Session
from derender_svc.limits import Limits
from derender_svc.tokenizer_info import TokenizerInfo
from scaleout_common.models import load_tokenizer, resolve_model
from tests.serving import serving

PARAGRAPH = ("The quick brown fox jumps over the lazy dog, then considers café crème and naïve façades. "
             "数据在服务器上保存，每个块的工作量与块大小成正比。 Émojis too: 🎉🚀👍🏽. Numbers 3.14159 and code `x += 1;`\n")


def output_ids(tokenizer, count: int, reasoning: bool) -> list[int]:
    body = tokenizer.encode(PARAGRAPH * (count // 20 + 2), add_special_tokens=False)
    if not reasoning:
        return body[:count]
    think, close = tokenizer.encode("<think>", add_special_tokens=False), tokenizer.encode(
        "</think>", add_special_tokens=False)
    half = (count - len(think) - len(close)) // 2
    return (think + body[:half] + close + body[: count - len(think) - len(close) - half])[:count]


def messages(ids: list[int]) -> list[engine_pb2.GenerateResponse]:
    out = [engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(index=0, token_ids=[t])]) for t in ids]
    out[-1].choices[0].finish_reason = common_pb2.FINISH_REASON_LENGTH
    out[-1].finished = True
    return out


async def stateful(stub, context, engine) -> tuple[float, int]:
    async def requests():
        yield derender_pb2.DerenderStreamRequest(context=context)
        for message in engine:
            yield derender_pb2.DerenderStreamRequest(engine_output=message)

    start, count = time.process_time(), 0
    async for _ in stub.DerenderStream(requests()):
        count += 1
    return time.process_time() - start, count


async def stateless(stub, context, engine) -> float:
    start, state = time.process_time(), b""
    for message in engine:
        reply = await stub.DerenderChunk(derender_pb2.DerenderChunkRequest(context=context, engine_output=message,
                                                                           state=state))
        state = reply.state
    return time.process_time() - start


async def replay(stub, context, engine) -> float:
    """Client-held state: every chunk re-derenders the whole output so far (one-shot on the prefix)."""
    start = time.process_time()
    for end in range(1, len(engine) + 1):
        await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=engine[:end]))
    return time.process_time() - start


def per_token_us(seconds: float, tokens: int) -> float:
    return seconds / tokens * 1e6


async def main(args) -> None:
    tokenizer = load_tokenizer(resolve_model(None))
    info = TokenizerInfo.from_hf(tokenizer)
    parser = build_parser()
    service = DerenderService(parser.parse_args([]), info)
    async with serving(service, parser) as target, grpc.aio.insecure_channel(target) as channel:
        stub = derender_pb2_grpc.DerenderServiceStub(channel)
        plain = derender_pb2.DerenderContext(id="chatcmpl-bench", skip_special_tokens=True)
        think = derender_pb2.DerenderContext(id="chatcmpl-bench", skip_special_tokens=True, reasoning_parser="think")
        await stateful(stub, plain, messages(output_ids(tokenizer, 64, False)))  # warm up

        print("1. stateful stream, CPU per output token (one token per engine message)")
        defaults = Defaults(info, Limits(), "none", "none")
        engines = {count: messages(output_ids(tokenizer, count, False)) for count in (512, 4096)}
        flat, core = {512: [], 4096: []}, {512: [], 4096: []}
        for _ in range(args.repeat):  # interleaved, and 4,096 tokens per sample either way (the machine is shared)
            for count, engine in engines.items():
                start = time.process_time()
                for _ in range(4096 // count):
                    await stateful(stub, plain, engine)
                flat[count].append(per_token_us(time.process_time() - start, 4096))
                core[count].append(per_token_us(sum(_cpu(lambda: session_stream(plain, defaults, engine))
                                                    for _ in range(4096 // count)), 4096))
        flat, core = {k: min(v) for k, v in flat.items()}, {k: min(v) for k, v in core.items()}
        for count in engines:
            print(f"   {count:5d} tokens: {flat[count]:7.1f} us/token over gRPC, {core[count]:5.1f} us/token of it "
                  "in the derender session")
        print(f"   4096 vs 512: {flat[4096] / flat[512]:.2f}x over gRPC, {core[4096] / core[512]:.2f}x in the session "
              "(flat: within 1.5x)")

        print("2. reasoning parser on, 2048 tokens: stateful stream vs replay-per-chunk baseline")
        ids = output_ids(tokenizer, 2048, True)
        engine = messages(ids)
        stream_s = min([(await stateful(stub, think, engine))[0] for _ in range(args.repeat)])
        twin_s = await stateless(stub, think, engine)
        replay_s = await replay(stub, think, engine)
        print(f"   stateful stream   : {per_token_us(stream_s, len(ids)):8.1f} us/token")
        print(f"   stateless twin    : {per_token_us(twin_s, len(ids)):8.1f} us/token")
        print(f"   replay per chunk  : {per_token_us(replay_s, len(ids)):8.1f} us/token")
        print(f"   stream is {replay_s / stream_s:.1f}x cheaper than replay (goal >= 5x); "
              f"twin is {replay_s / twin_s:.1f}x cheaper")

    print("3. throughput (tokens/s, 4096 tokens, in process)")
    ids = output_ids(tokenizer, 4096, False)
    engine = messages(ids)

    def rate(fn) -> float:
        best = min(_cpu(fn) for _ in range(args.repeat))
        return len(ids) / best

    def session_one_shot():
        session = Session(plain, defaults)
        session.feed(engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(token_ids=ids)], finished=True))

    def decode_stream():
        stream = DecodeStream(skip_special_tokens=True)
        for token in ids:
            stream.step(info.tokenizer, token)

    rates = {
        "tokenizers Tokenizer.decode (one shot)": rate(lambda: info.tokenizer.decode(ids, skip_special_tokens=True)),
        "tokenizers DecodeStream.step per token": rate(decode_stream),
        "derender session, one token per message": rate(lambda: session_stream(plain, defaults, engine)),
        "derender session, one shot": rate(session_one_shot),
    }
    base = rates["tokenizers DecodeStream.step per token"]
    for name, value in rates.items():
        print(f"   {name:42s}: {value:12,.0f} tok/s ({value / base:5.2f}x DecodeStream)")


def session_stream(context, defaults, engine) -> None:
    """What DerenderStream does per message, without gRPC: feed the session, build the chunk."""
    session = Session(context, defaults)
    for message in engine:
        session.chunk(session.feed(message), session.done)


def _cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    asyncio.run(main(cli.parse_args()))
