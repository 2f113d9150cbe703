"""The scripted LLM server in its own process, answering a tool loop without a script.

Benchmarks run the server out of process so its CPU time does not compete with the
client under measurement for the GIL. Protocol (stateless, so any number of concurrent
conversations work): the last user message holds ``turns=N size=S`` — the server asks for
the ``echo`` tool until the request carries N tool results after that user message, then
answers with text. Prints the port on stdout, then serves until killed.
"""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.llm_server import RecordedRequest, ScriptedLLMServer, Step, text, tool_calls  # noqa: E402

_SPEC = re.compile(r"turns=(\d+)(?: size=(\d+))?")


def respond(request: RecordedRequest) -> Step:
    messages = request.messages
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
    match = _SPEC.search(messages[last_user].get("content") or "") if messages else None
    turns, size = (int(match.group(1)), int(match.group(2) or 200)) if match else (0, 200)
    done = sum(1 for m in messages[last_user:] if m.get("role") == "tool")
    if done < turns and request.tools:
        return tool_calls(("echo", {"text": "x" * size, "n": done}), usage=(100, 10))
    return text("done", usage=(100, 2))


def main() -> None:
    server = ScriptedLLMServer()
    server.responder = respond
    server.record = False
    server.start()
    print(server.port, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
