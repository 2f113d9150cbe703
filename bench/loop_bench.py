"""ReAct loop benchmarks: ratios measured in one run against a zero-latency scripted LLM.

(a) overhead per loop turn in a tool loop whose history grows every turn, for OneValet
    (persistence included) against a naive ~30-line AsyncOpenAI loop and the floor (the
    same loop posting request bodies serialised before timing);
(b) wall time of K concurrent tool calls against the slowest one;
(c) peak memory of 200 concurrent conversations (pure loop, persistence excluded) against
    the naive loop.

    .venv/bin/python bench/loop_bench.py            # full
    .venv/bin/python bench/loop_bench.py --short    # CI: fewer turns and conversations

The database is whatever the settings say (DATABASE_URL, else the SQLite file in var/).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "onevalet_site.settings")
os.environ.setdefault("ONEVALET_VAR_DIR", str(ROOT / "var" / "bench"))

import django  # noqa: E402

django.setup()

from asgiref.sync import sync_to_async  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from openai.types.chat import ChatCompletion  # noqa: E402

from onevalet_site.embedded_redis import ensure_for_settings  # noqa: E402
from orchestrator.config import ReactLoopConfig  # noqa: E402
from orchestrator.llm import LLMClient  # noqa: E402
from orchestrator.loop import ReactLoop  # noqa: E402
from orchestrator.orchestrator import Orchestrator  # noqa: E402
from orchestrator.tools import ToolExecutionContext, ToolRegistry, tool  # noqa: E402
from orchestrator.events import discard  # noqa: E402

SYSTEM = {"role": "system", "content": "You are a benchmark."}


def bench_tools(sleeps: dict[str, float] | None = None) -> ToolRegistry:
    tools = ToolRegistry()

    @tool(register_in=tools)
    async def echo(text: str, n: int = 0) -> str:
        """Echo the text back.

        Args:
            text: What to echo.
            n: Turn number.
        """
        return f"{n}: {text}"

    for name, seconds in (sleeps or {}).items():
        async def sleeper(seconds: float = seconds) -> str:
            await asyncio.sleep(seconds)
            return f"slept {seconds}"
        sleeper.__name__ = name
        tool(sleeper, register_in=tools, description=f"Sleep {seconds} s")
    return tools


def start_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "llm_server_proc.py")], stdout=subprocess.PIPE,
                            text=True)
    port = proc.stdout.readline().strip()
    return proc, f"http://127.0.0.1:{port}/v1"


async def naive_loop(client: AsyncOpenAI, prompt: str, tools: list[dict[str, Any]]) -> int:
    """What most hand-written agents do: the SDK's create() with the growing history."""
    messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": prompt}]
    turns = 0
    while True:
        turns += 1
        completion = await client.chat.completions.create(model="bench", messages=messages, tools=tools)
        message = completion.choices[0].message
        if not message.tool_calls:
            return turns
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": f"{args['n']}: {args['text']}"})


async def floor_loop(client: AsyncOpenAI, bodies: list[bytes]) -> int:
    """The floor: the SDK's transport and parsing with request bodies serialised beforehand."""
    options = {"headers": {"Content-Type": "application/json"}, "security": {"bearer_auth": True}}
    for body in bodies:
        await client.post("/chat/completions", cast_to=ChatCompletion, content=body, options=options)
    return len(bodies)


def floor_bodies(turns: int, size: int, tools: list[dict[str, Any]]) -> list[bytes]:
    """The exact request bodies the naive loop sends, built before the clock starts."""
    messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": f"turns={turns} size={size}"}]
    bodies = []
    for n in range(turns + 1):
        bodies.append(json.dumps({"model": "bench", "messages": messages, "tools": tools}).encode())
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "echo", "arguments": json.dumps({"text": "x" * size, "n": n})}}
        messages = [*messages, {"role": "assistant", "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": f"call_{n}", "content": f"{n}: {'x' * size}"}]
    return bodies


async def timed(coro: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    value = await coro
    return time.perf_counter() - started, value


async def bench_overhead(base_url: str, turns: int, size: int, repeats: int) -> dict[str, float]:
    tools = bench_tools()
    schemas = [t.schema() for t in tools.all()]
    client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    user = await sync_to_async(_bench_user)()
    orchestrator = Orchestrator(llm=LLMClient(api_key="bench", base_url=base_url, model="bench"), tools=tools,
                                config=ReactLoopConfig.from_mapping({"max_turns": turns + 1}),
                                system_prompt=SYSTEM["content"])
    prompt = f"turns={turns} size={size}"
    bodies = floor_bodies(turns, size, schemas)
    results: dict[str, list[float]] = {"naive": [], "floor": [], "onevalet": []}
    for _ in range(repeats):
        seconds, count = await timed(naive_loop(client, prompt, schemas))
        results["naive"].append(seconds / count)
        seconds, count = await timed(floor_loop(client, bodies))
        results["floor"].append(seconds / count)
        seconds, outcome = await timed(orchestrator.handle_message(user_id=user.pk, content=prompt, source="cli"))
        assert outcome.result.turns == turns + 1, outcome.result.summary()
        results["onevalet"].append(seconds / outcome.result.turns)
    return {name: min(values) * 1000 for name, values in results.items()}


def _bench_user() -> Any:
    user, _ = get_user_model().objects.get_or_create(username="bench")
    return user


async def bench_concurrency(base_url: str, k: int) -> tuple[float, float]:
    sleeps = {f"sleep_{i}": 0.05 + 0.25 * i / max(k - 1, 1) for i in range(k)}
    tools = bench_tools(sleeps)
    llm = LLMClient(api_key="bench", base_url=base_url, model="bench")
    loop = ReactLoop(llm=llm, tools=tools.all(), config=ReactLoopConfig(), run_id="bench", emit=discard,
                     tool_context=ToolExecutionContext(tenant_id=0, conversation_id="c", run_id="r"))
    from orchestrator.types import ToolCall, TokenUsage

    calls = [ToolCall(id=f"c{i}", name=name, arguments="{}") for i, name in enumerate(sleeps)]
    started = time.perf_counter()
    await asyncio.gather(*(loop._run_tool(1, call, TokenUsage()) for call in calls))
    return time.perf_counter() - started, max(sleeps.values())


async def bench_memory(base_url: str, conversations: int, turns: int) -> dict[str, float]:
    tools = bench_tools()
    schemas = [t.schema() for t in tools.all()]
    prompt = f"turns={turns} size=200"

    async def onevalet_one(llm: LLMClient) -> None:
        loop = ReactLoop(llm=llm, tools=tools.all(), config=ReactLoopConfig(), run_id="m", emit=discard,
                         tool_context=ToolExecutionContext(tenant_id=0, conversation_id="c", run_id="r"))
        await loop.run([SYSTEM, {"role": "user", "content": prompt}])

    async def measure(make: Any) -> float:
        tracemalloc.start()
        baseline = tracemalloc.get_traced_memory()[0]
        await asyncio.gather(*(make() for _ in range(conversations)))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return (peak - baseline) / 1e6

    client = AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    naive = await measure(lambda: naive_loop(client, prompt, schemas))
    llm = LLMClient(api_key="bench", base_url=base_url, model="bench")
    onevalet = await measure(lambda: onevalet_one(llm))
    return {"naive": naive, "onevalet": onevalet}


async def main(args: argparse.Namespace) -> None:
    proc, base_url = start_server()
    try:
        overhead = await bench_overhead(base_url, args.turns, args.size, args.repeats)
        wall, slowest = await bench_concurrency(base_url, args.k)
        memory = await bench_memory(base_url, args.conversations, 3)
    finally:
        proc.terminate()
        proc.wait()
    engine = django.conf.settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(f"\nOneValet loop benchmark — {time.strftime('%Y-%m-%d')}, database: {engine}, "
          f"{args.turns}-turn tool loop, {args.size}-char tool results, best of {args.repeats}")
    print(f"{'measure':<46}{'value':>12}{'ratio':>10}")
    print(f"{'(a) naive AsyncOpenAI loop, ms/turn':<46}{overhead['naive']:>12.2f}{1.0:>10.2f}")
    print(f"{'(a) floor (pre-serialised bodies), ms/turn':<46}{overhead['floor']:>12.2f}"
          f"{overhead['floor'] / overhead['naive']:>10.2f}")
    print(f"{'(a) OneValet incl. persistence, ms/turn':<46}{overhead['onevalet']:>12.2f}"
          f"{overhead['onevalet'] / overhead['naive']:>10.2f}")
    print(f"{'(a) OneValet / floor':<46}{'':>12}{overhead['onevalet'] / overhead['floor']:>10.2f}")
    print(f"{f'(b) {args.k} concurrent tools: wall / slowest, s':<46}{wall:>12.3f}{wall / slowest:>10.2f}")
    print(f"{f'(c) {args.conversations} conversations, naive peak MB':<46}{memory['naive']:>12.1f}{1.0:>10.2f}")
    print(f"{f'(c) {args.conversations} conversations, OneValet peak MB':<46}{memory['onevalet']:>12.1f}"
          f"{memory['onevalet'] / memory['naive']:>10.2f}")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", action="store_true", help="quick run for CI")
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--size", type=int, default=400, help="characters per tool result")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--k", type=int, default=8, help="concurrent tool calls for (b)")
    parser.add_argument("--conversations", type=int, default=200)
    args = parser.parse_args()
    if args.short:
        args.turns, args.repeats, args.conversations = 20, 1, 40
    return args


if __name__ == "__main__":
    arguments = parse()
    call_command("migrate", verbosity=0)
    ensure_for_settings()
    asyncio.run(main(arguments))
