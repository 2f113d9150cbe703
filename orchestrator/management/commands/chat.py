"""``manage.py chat --user NAME``: talk to OneValet in the terminal, events printed live."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from onevalet_site.embedded_redis import ensure_for_settings
from orchestrator.events import (
    ErrorEvent,
    ExecutionEnd,
    LoopEvent,
    MessageChunk,
    MessageEnd,
    StateChange,
    ToolCallStart,
    ToolResultEvent,
)
from orchestrator.orchestrator import Orchestrator


class Command(BaseCommand):
    help = "Chat with the assistant as USER; type a message, Enter to send, Ctrl-D to quit."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--user", required=True, help="username to chat as")
        parser.add_argument("--conversation", help="continue this conversation id")
        parser.add_argument("--message", "-m", action="append", help="send this message and exit (repeatable)")

    def handle(self, *args: Any, **options: Any) -> None:
        ensure_for_settings()
        User = get_user_model()  # noqa: N806
        try:
            user = User.objects.get(username=options["user"])
        except User.DoesNotExist:
            raise CommandError(f"no user named {options['user']!r} (create one with manage.py createsuperuser)") from None
        asyncio.run(self._chat(user.pk, options["conversation"], options["message"]))

    async def _chat(self, user_id: int, conversation: str | None, scripted: list[str] | None) -> None:
        orchestrator = await sync_to_async(Orchestrator)()
        if not orchestrator.llm.configured:
            self.stderr.write("No LLM is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for a local server).")
            return
        lines = iter(scripted) if scripted else None
        while True:
            if lines is not None:
                text = next(lines, None)
            else:
                text = await asyncio.to_thread(_prompt)
            if text is None:
                return
            if not text.strip():
                continue
            async for event in orchestrator.stream_message(user_id=user_id, content=text,
                                                           conversation_id=conversation, source="cli"):
                conversation = self._show(event) or conversation

    def _show(self, event: LoopEvent) -> str | None:
        out = self.stdout
        match event:
            case MessageChunk(delta=delta):
                out.write(delta, ending="")
                out.flush()
            case MessageEnd(content=content) if content:
                out.write("")
            case ToolCallStart(name=name, args_summary=args):
                out.write(f"  → {name}({', '.join(f'{k}={v!r}' for k, v in args.items())})")
            case ToolResultEvent(name=name, success=ok, duration_ms=ms, preview=preview):
                mark = "✓" if ok else "✗"
                out.write(f"  {mark} {name} ({ms} ms): {preview[:100]}")
            case StateChange(state=state, prompt=prompt):
                out.write(f"[{state}] {prompt}")
            case ExecutionEnd(conversation=conversation, summary=summary):
                usage = summary["token_usage"]
                out.write(self.style.HTTP_INFO(
                    f"[{summary['status']}: {summary['turns']} turn(s), {len(summary['tool_calls'])} tool call(s), "
                    f"{usage['total']} tokens, {summary['duration_ms']} ms]"))
                return conversation
            case ErrorEvent(message=message):
                out.write(self.style.ERROR(f"error: {message}"))
        return None


def _prompt() -> str | None:
    try:
        return input("you> ")
    except EOFError:
        sys.stdout.write("\n")
        return None
