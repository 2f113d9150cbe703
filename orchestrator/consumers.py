"""The chat websocket, ``/ws/chat/``: send messages, receive the user's event stream.

Client frames (JSON objects, at most 64 KiB):

- ``{"type": "message", "content": "...", "conversation": "<uuid>"?, "ref": "..."?}``
- ``{"type": "resync", "after": "<seq>"}`` — replay every stored event after ``seq``
- ``{"type": "ping"}``
- ``{"type": "ack", "seq": "<seq>"}`` — the client has handled everything up to ``seq``.
  A client that acks gets flow control: at most ``ONEVALET_WS_MAX_UNACKED`` events are in
  flight, the rest wait in the event stream until the next ack, so a client that stops
  reading costs the server a bounded buffer. (Clients that never ack get events as they
  come; the chat page acks. A client that stops reading altogether also stops answering
  daphne's websocket pings, and daphne closes it after its ping timeout, which bounds
  that buffer in time.)

Server frames: the run's events (``message_start`` ... ``execution_end``, ``error``) and
``notification``, each with its ``seq``; plus ``accepted`` (the message was taken, with its
conversation id), ``resynced`` (replay finished) and ``pong``, which have no ``seq``.

A message's run is a detached task, not part of the socket: a client that disconnects
mid-run loses nothing, the run completes and is persisted, and its events wait in the
user's event stream (``orchestrator.event_store``) for the next ``resync``. The socket only
forwards that stream: a group hint says "something new", and the consumer reads the stream
from its cursor, so events reach the client in order, without gaps or duplicates, however
many hints the channel layer dropped.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from onevalet_site.errors import InvalidInput, OneValetError, TooLarge, ws_error_event
from orchestrator import event_store, orchestrator, selectors, services

logger = logging.getLogger("onevalet.ws")

MAX_FRAME_BYTES = 64 * 1024
CLOSE_UNAUTHENTICATED = 4401
SUBPROTOCOL = "onevalet"
READ_BATCH = 200
# The channel layer can drop a hint (channels-redis drops messages under load), so while a
# run this socket started is in flight, the socket also reads the stream this often.
WATCH_SECONDS = 1.0
RUN_END_TYPES = ("execution_end", "error")

# Strong references to detached runs: the event loop keeps only weak ones.
_runs: set[asyncio.Task] = set()


async def run_detached(*, user_id: int, content: str, conversation_id: str, source: str = "web") -> None:
    """Run one message to completion, publishing its events; failures become ``error`` events."""
    sink = event_store.sink_for(user_id, conversation_id)
    try:
        await orchestrator.get_orchestrator().handle_message(
            user_id=user_id, content=content, conversation_id=conversation_id, source=source, emit=sink, stream=True)
    except Exception as exc:
        if not isinstance(exc, OneValetError):
            logger.exception("run for user %s in conversation %s failed", user_id, conversation_id)
        await sink(_ErrorAsEvent(exc))


def start_detached_run(**kwargs: Any) -> asyncio.Task:
    task = asyncio.create_task(run_detached(**kwargs))
    _runs.add(task)
    task.add_done_callback(_runs.discard)
    return task


class _ErrorAsEvent:
    """Adapts an exception to the sink's ``LoopEvent`` interface (``type`` + ``as_dict``)."""

    type = "error"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def as_dict(self) -> dict[str, Any]:
        return ws_error_event(self.exc)


@database_sync_to_async
def _conversation_for(user_id: int, conversation_id: Any, text: str) -> str:
    """The owner's conversation (NotFound otherwise), or a new one titled by the message."""
    if conversation_id in (None, ""):
        return str(services.conversation_create(owner_id=user_id, title=text.splitlines()[0]).id)
    return str(selectors.conversation_get(owner_id=user_id, conversation_id=conversation_id).id)


class ChatConsumer(AsyncWebsocketConsumer):
    user_id: int
    cursor: str
    acks: bool = False  # the client acknowledges events: flow control is on
    unacked: int = 0  # events sent since the client's last ack
    watchdog: asyncio.Task | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inflight: set[str] = set()  # conversations with a run this socket started
        self.delivering = asyncio.Lock()  # the watchdog and the dispatch loop share the cursor

    async def connect(self) -> None:
        user = self.scope.get("user")
        offered = self.scope.get("subprotocols") or []
        subprotocol = SUBPROTOCOL if SUBPROTOCOL in offered else None
        if user is None or not user.is_authenticated:
            # Accept-then-close: a handshake refusal can only say 403, a close code says why.
            await self.accept(subprotocol)
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user_id = user.pk
        # Live delivery starts at the stream's current end; older events only on resync.
        self.cursor = await event_store.last_seq(self.user_id)
        await self.channel_layer.group_add(event_store.group_name(self.user_id), self.channel_name)
        await self.accept(subprotocol)

    async def disconnect(self, code: int) -> None:
        if self.watchdog is not None:
            self.watchdog.cancel()
        if hasattr(self, "user_id"):
            await self.channel_layer.group_discard(event_store.group_name(self.user_id), self.channel_name)

    # --- client frames --------------------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            frame = self._parse(text_data, bytes_data)
            kind = frame.get("type")
            if kind == "message":
                await self._on_message(frame)
            elif kind == "resync":
                await self._on_resync(frame)
            elif kind == "ping":
                await self._send_json({"type": "pong"})
            elif kind == "ack":
                await self._on_ack(frame)
            else:
                raise InvalidInput("Unknown frame type; expected message, resync, ack or ping.", code="unknown_type")
        except OneValetError as exc:
            await self._send_json(ws_error_event(exc))

    @staticmethod
    def _parse(text_data: str | None, bytes_data: bytes | None) -> dict[str, Any]:
        if text_data is None:
            raise InvalidInput("Frames must be JSON text.", code="not_json")
        if len(text_data) > MAX_FRAME_BYTES or len(text_data.encode()) > MAX_FRAME_BYTES:
            raise TooLarge(f"Frames are limited to {MAX_FRAME_BYTES} bytes.", code="frame_too_large")
        try:
            frame = json.loads(text_data)
        except ValueError:
            raise InvalidInput("Frames must be JSON text.", code="not_json") from None
        if not isinstance(frame, dict):
            raise InvalidInput("A frame must be a JSON object with a type.", code="not_object")
        return frame

    async def _on_message(self, frame: dict[str, Any]) -> None:
        text = orchestrator.get_orchestrator().should_process(frame.get("content"))
        conversation = frame.get("conversation")
        if conversation is not None and not isinstance(conversation, str):
            raise InvalidInput("conversation must be a conversation id.", code="invalid_conversation")
        conversation_id = await _conversation_for(self.user_id, conversation, text)
        await self._send_json({"type": "accepted", "conversation": conversation_id, "ref": frame.get("ref")})
        start_detached_run(user_id=self.user_id, content=text, conversation_id=conversation_id, source="web")
        self.inflight.add(conversation_id)
        if self.watchdog is None or self.watchdog.done():
            self.watchdog = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        """Read the stream now and then until this socket's runs have ended: a dropped hint
        delays their events by at most WATCH_SECONDS instead of forever."""
        while self.inflight:
            await asyncio.sleep(WATCH_SECONDS)
            await self._deliver()

    async def _on_resync(self, frame: dict[str, Any]) -> None:
        after = frame.get("after")
        try:
            event_store.parse_seq(after)
        except ValueError:
            raise InvalidInput("resync needs the last seq the client saw in 'after'.", code="invalid_seq") from None
        info = await event_store.stream_info(self.user_id)
        trimmed = (info.first_seq is not None and info.length >= event_store.STREAM_MAXLEN
                   and event_store.parse_seq(info.first_seq) > event_store.parse_seq(after))
        self.cursor = after
        await self._deliver()
        # complete=false: older events were trimmed away; the client reloads from REST.
        await self._send_json({"type": "resynced", "seq": self.cursor, "complete": not trimmed})

    async def _on_ack(self, frame: dict[str, Any]) -> None:
        try:
            event_store.parse_seq(frame.get("seq"))
        except ValueError:
            raise InvalidInput("ack needs the last seq the client handled in 'seq'.", code="invalid_seq") from None
        self.acks, self.unacked = True, 0
        await self._deliver()  # whatever waited for this ack

    # --- the user's stream ----------------------------------------------------------------
    async def user_event(self, message: dict[str, Any]) -> None:
        """A hint from ``event_store.publish``: read what is new since our cursor."""
        if event_store.parse_seq(message["seq"]) > event_store.parse_seq(self.cursor):
            await self._deliver()

    async def _deliver(self) -> None:
        """Send every stored event after the cursor, in order; consumers handle one message
        at a time, so a hint for an event already sent finds nothing new and sends nothing."""
        async with self.delivering:
            while True:
                room = settings.ONEVALET_WS_MAX_UNACKED - self.unacked if self.acks else READ_BATCH
                if room <= 0:
                    return  # the client is behind: the rest waits in the stream for its next ack
                batch = await event_store.read_since(self.user_id, self.cursor, min(room, READ_BATCH))
                for seq, event in batch:
                    await self._send_json(event)
                    self.cursor = seq
                    if event.get("type") in RUN_END_TYPES:
                        self.inflight.discard(event.get("conversation"))
                self.unacked += len(batch)
                if len(batch) < min(room, READ_BATCH):
                    return

    async def _send_json(self, payload: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(payload, separators=(",", ":"), default=str))
