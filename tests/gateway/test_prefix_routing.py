"""Cache-aware routing: two engine replicas behind the real Envoy, balanced on render's prefix hash.

Every turn of a conversation reaches the replica that cached its earlier turns, distinct conversations spread
over both, and a replica that dies hands its conversations to the other within seconds.
"""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from devstack.stack import Stack, StackConfig
from scaleout.v1 import engine_pb2, engine_pb2_grpc
from tests.gateway.rest import post

SYSTEM = "You are a helpful assistant who answers in one short sentence. " * 6


@pytest.fixture(scope="module")
def engine_pair(tmp_path_factory):
    config = StackConfig(
        port=0,
        replicas={"render": 1, "engine": 2, "derender": 1, "chat": 1},
        log_dir=tmp_path_factory.mktemp("prefix-routing-logs"),
    )
    with Stack(config) as stack:
        yield stack


def _engines(stack):
    return [r for r in stack.replicas if r.name.startswith("engine-")]


def _queried(stack) -> list[int]:
    """Prompt tokens each engine replica has admitted so far (from its own GetLoad)."""
    counts = []
    for replica in _engines(stack):
        if replica.process.poll() is not None:
            counts.append(-1)
            continue
        with grpc.insecure_channel(f"127.0.0.1:{replica.port}") as channel:
            load = engine_pb2_grpc.EngineServiceStub(channel).GetLoad(engine_pb2.GetLoadRequest(), timeout=5)
        counts.append(load.prefix_cache_queried_tokens)
    return counts


def _turn(stack, messages) -> tuple[int, dict]:
    """One chat turn through the one-hop route; (HTTP status, body). The answer joins `messages`."""
    body = {"messages": messages, "temperature": 0, "max_tokens": 4}
    answer = post(stack, "/v1/chat/completions", body)
    if answer.status_code != 200:
        return answer.status_code, {}
    reply = answer.json()
    messages.append({"role": "assistant", "content": reply["choices"][0]["message"]["content"] or "ok"})
    return 200, reply


def _conversation(topic: int) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Tell me fact number {topic}."}]


def _served_by(stack, messages) -> tuple[int, dict]:
    before = _queried(stack)
    status, reply = _turn(stack, messages)
    assert status == 200
    after = _queried(stack)
    [replica] = [i for i, (a, b) in enumerate(zip(after, before)) if a != b]
    return replica, reply


def test_every_turn_of_a_conversation_reaches_the_same_replica_and_hits_its_cache(engine_pair):
    for topic in range(3):
        messages = _conversation(topic)
        served, cached = [], []
        for turn in range(3):
            replica, reply = _served_by(engine_pair, messages)
            served.append(replica)
            cached.append(reply["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0))
            messages.append({"role": "user", "content": f"And then {turn}?"})
        assert len(set(served)) == 1, served
        assert cached[0] < cached[1] < cached[2], cached  # turn 1 may find the shared system prompt


def test_distinct_conversations_spread_over_both_replicas(engine_pair):
    served = [_served_by(engine_pair, _conversation(100 + topic))[0] for topic in range(20)]
    assert min(served.count(0), served.count(1)) >= 4, served


def test_a_dead_replica_hands_its_conversations_over_within_seconds(engine_pair):
    # Replica ports, hence the ring, change from run to run: take conversations until each replica is home to 3.
    conversations, homes = [], []
    for topic in range(40):
        messages = _conversation(200 + topic)
        home = _served_by(engine_pair, messages)[0]
        if homes.count(home) < 3:
            conversations.append(messages)
            homes.append(home)
        if len(homes) == 6:
            break
    assert sorted(homes) == [0, 0, 0, 1, 1, 1], homes
    victim = _engines(engine_pair)[0].process
    victim.kill()
    victim.wait(10)
    killed_at = time.monotonic()
    outcomes: list[tuple[float, int]] = []
    lock = threading.Lock()

    def talk(messages):
        """Turns until one starts 2 s or more after the kill (the handover may take 2 s), however long each takes."""
        for turn in range(12):
            started = time.monotonic() - killed_at
            messages.append({"role": "user", "content": f"More {turn}?"})
            status, _ = _turn(engine_pair, messages)
            with lock:
                outcomes.append((started, status))
            if started >= 2.0:
                return
            time.sleep(0.25)

    threads = [threading.Thread(target=talk, args=(m,)) for m in conversations]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    late = [status for started, status in outcomes if started >= 2.0]
    assert late and all(status == 200 for status in late), outcomes
    # The survivor now serves every conversation, the victim's ones included.
    assert _served_by(engine_pair, conversations[homes.index(0)])[0] == 1
