"""Derender CPU cost, measured side by side in one run (python -m bench.derender).

The derender server runs as its own process (as in production); its CPU comes from /proc, the client's
(this process: building and sending engine messages, reading answers) from process_time.

1. Stateful stream (DerenderStream, one token per engine message): server CPU per output token at 512 and
   4,096 tokens; flat means the work per chunk does not grow with the output.
2. Replay-per-chunk baseline (what a client-held-state design does: re-derender the whole output so far on
   every chunk, here DerenderChat on the prefix) against the stateful stream, reasoning parser on, 2,048 tokens.
   The stateless twin (DerenderChunk, state in the message) is shown alongside.
3. Throughput against the tokenizers library's own decode (in process: one-shot `Tokenizer.decode` and
   `DecodeStream`, against a derender Session fed one token per message and one shot).
4. Per parser format, streamed parse cost per token at 512 and 4,096 tokens beside the replay-every-chunk
   baseline (in process; `--parsers-only` runs just this section, see bench/derender/parsers.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tokenizers.decoders import DecodeStream

from bench.derender import parsers
from derender_svc.limits import Limits
from derender_svc.session import Defaults, Session
from derender_svc.tokenizer_info import TokenizerInfo
from scaleout.v1 import common_pb2, derender_pb2, derender_pb2_grpc, engine_pb2
from scaleout_common.models import load_tokenizer, resolve_model

PARAGRAPH = (
    "The quick brown fox jumps over the lazy dog, then considers café crème and naïve façades. "
    "数据在服务器上保存，每个块的工作量与块大小成正比。 Émojis too: 🎉🚀👍🏽. Numbers 3.14159 and code `x += 1;`\n"
)


class ServerProcess:
    """`scaleout-derender` on a free loopback port; `cpu()` is its user+system CPU seconds so far."""

    def __enter__(self) -> ServerProcess:
        command = [
            sys.executable,
            "-m",
            "derender_svc",
            "--port",
            "0",
            "--metrics-port",
            "-1",
            "--log-level",
            "WARNING",
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        for line in self.process.stdout:
            if line.startswith("LISTENING"):
                self.target = line.split()[-1]
                return self
        raise RuntimeError("derender server did not start")

    def cpu(self) -> float:
        with open(f"/proc/{self.process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.wait(30)


def output_ids(tokenizer, count: int, reasoning: bool) -> list[int]:
    body = tokenizer.encode(PARAGRAPH * (count // 20 + 2), add_special_tokens=False)
    if not reasoning:
        return body[:count]
    think, close = (
        tokenizer.encode("<think>", add_special_tokens=False),
        tokenizer.encode("</think>", add_special_tokens=False),
    )
    half = (count - len(think) - len(close)) // 2
    return (think + body[:half] + close + body[: count - len(think) - len(close) - half])[:count]


def messages(ids: list[int], per: int = 1) -> list[engine_pb2.GenerateResponse]:
    """A streamed engine result, `per` tokens per message."""
    out = [
        engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(index=0, token_ids=ids[i : i + per])])
        for i in range(0, len(ids), per)
    ]
    out[-1].choices[0].finish_reason = common_pb2.FINISH_REASON_LENGTH
    out[-1].finished = True
    return out


async def stateful(stub, context, engine) -> None:
    async def requests():
        yield derender_pb2.DerenderStreamRequest(context=context)
        for message in engine:
            yield derender_pb2.DerenderStreamRequest(engine_output=message)

    async for _ in stub.DerenderStream(requests()):
        pass


async def stateless(stub, context, engine) -> None:
    state = b""
    for message in engine:
        reply = await stub.DerenderChunk(
            derender_pb2.DerenderChunkRequest(context=context, engine_output=message, state=state)
        )
        state = reply.state


async def replay(stub, context, engine) -> None:
    """Client-held state: every chunk re-derenders the whole output so far (one-shot on the prefix)."""
    for end in range(1, len(engine) + 1):
        await stub.DerenderChat(derender_pb2.DerenderChatRequest(context=context, results=engine[:end]))


async def measure(server: ServerProcess, tokens: int, run, repeat: int = 1) -> tuple[float, float]:
    """(server, client) CPU microseconds per token of `run()`, repeated `repeat` times."""
    server_start, client_start = server.cpu(), time.process_time()
    for _ in range(repeat):
        await run()
    per = 1e6 / (tokens * repeat)
    return (server.cpu() - server_start) * per, (time.process_time() - client_start) * per


async def over_grpc(args, tokenizer) -> None:
    plain = derender_pb2.DerenderContext(id="chatcmpl-bench", skip_special_tokens=True)
    think = derender_pb2.DerenderContext(id="chatcmpl-bench", skip_special_tokens=True, reasoning_parser="think")
    with ServerProcess() as server:
        async with grpc.aio.insecure_channel(server.target) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while (
                await health.Check(health_pb2.HealthCheckRequest())
            ).status != health_pb2.HealthCheckResponse.SERVING:
                await asyncio.sleep(0.1)
            stub = derender_pb2_grpc.DerenderServiceStub(channel)
            await stateful(stub, plain, messages(output_ids(tokenizer, 256, False)))  # warm up

            print("1. stateful stream, CPU per output token (one token per engine message)")
            engines = {count: messages(output_ids(tokenizer, count, False)) for count in (512, 4096)}
            samples = {count: [] for count in engines}
            for _ in range(args.repeat):  # interleaved; 4,096 tokens per sample either way (the machine is shared)
                for count, engine in engines.items():
                    samples[count].append(
                        await measure(server, count, lambda: stateful(stub, plain, engine), 4096 // count)
                    )
            best = {count: min(s, key=sum) for count, s in samples.items()}
            for count, (server_us, client_us) in best.items():
                print(f"   {count:5d} tokens: server {server_us:6.1f} us/token (client {client_us:6.1f})")
            print(f"   4096 vs 512, server: {best[4096][0] / best[512][0]:.2f}x (flat: within 1.5x)")
            batched = messages(output_ids(tokenizer, 4096, False), per=8)  # stream_interval=8
            server_us, client_us = min(
                [await measure(server, 4096, lambda: stateful(stub, plain, batched)) for _ in range(args.repeat)],
                key=sum,
            )
            print(f"   4096 tokens, 8 per message: server {server_us:6.1f} us/token (client {client_us:6.1f})")

            print("2. reasoning parser on, 2048 tokens: stateful stream vs replay-per-chunk baseline")
            engine = messages(output_ids(tokenizer, 2048, True))
            rows = {
                "stateful stream": min(
                    [await measure(server, 2048, lambda: stateful(stub, think, engine)) for _ in range(args.repeat)],
                    key=sum,
                ),
                "stateless twin": await measure(server, 2048, lambda: stateless(stub, think, engine)),
                "replay per chunk": await measure(server, 2048, lambda: replay(stub, think, engine)),
            }
            for name, (server_us, client_us) in rows.items():
                print(f"   {name:17s}: server {server_us:8.1f} us/token, client {client_us:8.1f} us/token")
            stream, twin, baseline = (sum(rows[k]) for k in ("stateful stream", "stateless twin", "replay per chunk"))
            server_ratio = rows["replay per chunk"][0] / rows["stateful stream"][0]
            print(
                f"   stream is {server_ratio:.1f}x cheaper than replay on the server, {baseline / stream:.1f}x "
                f"counting both sides (goal >= 5x); the twin {baseline / twin:.1f}x"
            )


def in_process(args, tokenizer) -> None:
    print("3. throughput (tokens/s, 4096 tokens, in process)")
    info = TokenizerInfo.from_hf(tokenizer)
    defaults = Defaults(info, Limits(), "none", "none")
    context = derender_pb2.DerenderContext(id="chatcmpl-bench", skip_special_tokens=True)
    ids = output_ids(tokenizer, 4096, False)
    engine = messages(ids)

    def session_stream():
        session = Session(context, defaults)
        for message in engine:
            session.chunk(session.feed(message), session.done)

    def session_one_shot():
        session = Session(context, defaults)
        session.feed(engine_pb2.GenerateResponse(choices=[engine_pb2.GenerateChoice(token_ids=ids)], finished=True))

    def decode_stream():
        stream = DecodeStream(skip_special_tokens=True)
        for token in ids:
            stream.step(info.tokenizer, token)

    def rate(fn) -> float:
        best = float("inf")
        for _ in range(args.repeat):
            start = time.process_time()
            fn()
            best = min(best, time.process_time() - start)
        return len(ids) / best

    rates = {
        "tokenizers Tokenizer.decode (one shot)": rate(lambda: info.tokenizer.decode(ids, skip_special_tokens=True)),
        "tokenizers DecodeStream.step per token": rate(decode_stream),
        "derender session, one token per message": rate(session_stream),
        "derender session, one shot": rate(session_one_shot),
    }
    base = rates["tokenizers DecodeStream.step per token"]
    for name, value in rates.items():
        print(f"   {name:42s}: {value:12,.0f} tok/s ({value / base:5.2f}x DecodeStream)")


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    cli.add_argument("--parsers-only", action="store_true", help="only section 4 (parser formats)")
    args = cli.parse_args()
    if args.parsers_only:
        parsers.run(args.repeat)
        return
    tokenizer = load_tokenizer(resolve_model(None))
    asyncio.run(over_grpc(args, tokenizer))
    in_process(args, tokenizer)
    parsers.run(args.repeat)


if __name__ == "__main__":
    main()
