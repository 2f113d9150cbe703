"""Websocket load: N users, one message each, against ONE daphne process.

    .venv/bin/python bench/ws_load.py --users 100

The LLM is the suite's scripted server answering every request at once, so the figures
measure OneValet (socket, run, event store, channel layer), not a model. Everything stays
on loopback; the run is bounded by ``--timeout``. Reports messages/s, p50/p95 time to the
first run event and to ``execution_end``, and the daphne process's RSS per idle socket.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "onevalet_site.settings")
os.environ.setdefault("ONEVALET_VAR_DIR", str(ROOT / "var" / "bench"))

import django  # noqa: E402

django.setup()

from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from onevalet_site import embedded_redis  # noqa: E402
from tests.llm_server import RecordedRequest, ScriptedLLMServer, Step, text  # noqa: E402
from tests.surfaces.live import LiveServer, live_server_env  # noqa: E402

MAKE_USERS = """
import json, sys
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
User = get_user_model()
import uuid
run = uuid.uuid4().hex[:6]
User.objects.bulk_create([User(username=f"load{run}-{i}", password="!") for i in range(int(sys.argv[1]))])
print(json.dumps([Token.objects.create(user=u).key for u in User.objects.filter(username__startswith=f"load{run}-")]))
"""


def answer(request: RecordedRequest) -> Step:
    return text("Done: " + str(request.last_message.get("content", ""))[:40])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def one_user(server: LiveServer, ws: object, index: int, out: dict[str, list[float]]) -> None:
    sent = time.perf_counter()
    await ws.send(json.dumps({"type": "message", "content": f"hello from {index}"}))
    first = None
    while True:
        try:
            event = json.loads(await ws.recv())
        except ConnectionClosed:  # an overloaded server dropped the socket: count it, go on
            out["errors"].append(1.0)
            return
        if first is None and "seq" in event:
            first = time.perf_counter() - sent
        if event["type"] in ("execution_end", "error"):
            out["first"].append(first or 0.0)
            out["end"].append(time.perf_counter() - sent)
            out["errors"].append(float(event["type"] == "error"))
            return


async def measure(server: LiveServer, tokens: list[str]) -> dict[str, float]:
    rss_before = server.rss_kib()
    sockets = []
    for start in range(0, len(tokens), 50):  # open in waves: a burst of handshakes is not the point
        sockets += await asyncio.gather(*[
            connect(server.ws_url, origin=server.url, subprotocols=["onevalet", f"token.{t}"], open_timeout=30)
            for t in tokens[start:start + 50]])
    for ws in sockets:  # a round trip on each socket: every consumer is fully set up
        await ws.send('{"type":"ping"}')
    for ws in sockets:
        await ws.recv()
    rss_idle = server.rss_kib()
    out: dict[str, list[float]] = {"first": [], "end": [], "errors": []}
    began = time.perf_counter()
    await asyncio.gather(*[one_user(server, ws, i, out) for i, ws in enumerate(sockets)])
    elapsed = time.perf_counter() - began
    rss_after = server.rss_kib()
    await asyncio.gather(*[ws.close() for ws in sockets])
    return {
        "users": len(tokens), "elapsed_s": elapsed, "messages_per_s": len(out["end"]) / elapsed,
        "first_p50_ms": percentile(out["first"], 0.5) * 1000, "first_p95_ms": percentile(out["first"], 0.95) * 1000,
        "end_p50_ms": percentile(out["end"], 0.5) * 1000, "end_p95_ms": percentile(out["end"], 0.95) * 1000,
        "errors": sum(out["errors"]), "rss_before_mib": rss_before / 1024, "rss_idle_mib": rss_idle / 1024,
        "rss_after_runs_mib": rss_after / 1024, "kib_per_idle_socket": (rss_idle - rss_before) / len(tokens),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=20, help="concurrent websocket users (up to 500)")
    parser.add_argument("--database-url", default="", help="daphne's DB (default: a fresh SQLite file)")
    parser.add_argument("--timeout", type=float, default=300, help="give up after this many seconds")
    args = parser.parse_args()
    if not 1 <= args.users <= 500:
        parser.error("--users must be between 1 and 500")
    from django.conf import settings

    if settings.EMBEDDED_REDIS:
        embedded_redis.ensure_running(Path(settings.VAR_DIR))
    llm = ScriptedLLMServer().start()
    llm.responder, llm.record = answer, False
    with tempfile.TemporaryDirectory(prefix="ws-load-") as tmp:
        extra = {"DATABASE_URL": args.database_url} if args.database_url else {}
        server = LiveServer(workdir=Path(tmp), env=live_server_env(Path(tmp), llm.env, **extra))
        try:
            server.start()
            tokens = json.loads(server.manage("shell", "-c", f"import sys; sys.argv=['x', '{args.users}']\n"
                                              + MAKE_USERS).strip().splitlines()[-1])
            result = asyncio.run(asyncio.wait_for(measure(server, tokens), args.timeout))
        finally:
            server.stop()
            llm.stop()
            log = Path(tmp) / "daphne.log"
            if log.exists() and log.stat().st_size:
                problems = [line for line in log.read_text().splitlines() if "/ws/chat/\" - -" not in line]
                print("--- daphne log ---\n" + "\n".join(problems[-60:]))
    width = max(len(k) for k in result)
    print(f"\n{'metric':<{width}}  value")
    for key, value in result.items():
        print(f"{key:<{width}}  {value:,.1f}" if isinstance(value, float) else f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
