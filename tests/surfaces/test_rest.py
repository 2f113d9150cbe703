"""REST: messages (result shape and errors), conversations, token auth, throttling, the page."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from rest_framework.test import APIClient

from tests.llm_server import error, text, tool_calls

pytestmark = [pytest.mark.django_db(transaction=True)]
OUTCOME_KEYS = {"conversation", "run", "status", "response", "turns", "tool_calls", "token_usage", "duration_ms",
                "pending_approvals"}


class Api:
    """Token-authenticated calls through the ASGI handler, as under daphne: the view's
    async_to_sync then runs the orchestrator on the test's event loop."""

    def __init__(self, token: str) -> None:
        self.client = AsyncClient()
        self.headers = {"Authorization": f"Token {token}"}

    async def post(self, path: str, data: dict[str, Any]) -> Any:
        return await self.client.post(path, data, content_type="application/json", headers=self.headers)

    async def get(self, path: str) -> Any:
        return await self.client.get(path, headers=self.headers)


@pytest.fixture
def api(token: str) -> Api:
    return Api(token)


@pytest.mark.smoke
async def test_message_result_shape_and_history(api: Api, orchestrator: Any, llm_server: Any) -> None:
    llm_server.script(tool_calls(("get_weather", {"city": "Rome"})), text("Sunny in Rome."))
    response = await api.post("/api/v1/messages", {"content": "Weather in Rome?"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == OUTCOME_KEYS
    assert body["status"] == "completed" and body["response"] == "Sunny in Rome." and body["turns"] == 2
    assert [c["name"] for c in body["tool_calls"]] == ["get_weather"]

    llm_server.script(text("Still sunny."))
    again = (await api.post("/api/v1/messages", {"content": "And now?", "conversation": body["conversation"]})).json()
    assert again["conversation"] == body["conversation"]
    conversations = (await api.get("/api/v1/conversations")).json()
    assert conversations["count"] == 1 and conversations["results"][0]["id"] == body["conversation"]
    page = (await api.get(f"/api/v1/conversations/{body['conversation']}/messages?limit=2&offset=4")).json()
    assert page["count"] == 6 and [m["role"] for m in page["results"]] == ["user", "assistant"]
    assert page["results"][1]["content"] == "Still sunny." and page["previous"]


async def test_message_errors(api: Api, orchestrator: Any, llm_server: Any, other_user: Any) -> None:
    from orchestrator.services import conversation_create

    assert (await api.post("/api/v1/messages", {"content": "  "})).status_code == 400
    assert (await api.post("/api/v1/messages", {})).json()["code"] == "invalid"
    response = await api.post("/api/v1/messages", {"content": "x" * (orchestrator.config.max_input_chars + 1)})
    assert response.status_code == 413 and response.json()["code"] == "message_too_long"
    foreign = await sync_to_async(conversation_create)(owner_id=other_user.pk, title="theirs")
    response = await api.post("/api/v1/messages", {"content": "hi", "conversation": str(foreign.id)})
    assert response.status_code == 404
    assert (await api.get(f"/api/v1/conversations/{foreign.id}/messages")).status_code == 404
    llm_server.script(error(401, message="bad key"))
    response = await api.post("/api/v1/messages", {"content": "hi"})
    assert response.status_code == 503 and response.json()["code"] == "llm_not_configured"


def test_token_auth_and_anonymous_refusal(user: Any, token: str) -> None:
    client = APIClient()
    assert client.get("/api/v1/conversations").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/conversations").status_code == 200
    client.credentials(HTTP_AUTHORIZATION="Token wrong")
    assert client.get("/api/v1/notifications").status_code == 401


async def test_message_rate_is_throttled_per_user(api: Api, orchestrator: Any, monkeypatch: Any) -> None:
    from django.core.cache import cache

    from orchestrator.api import MessageRateThrottle

    monkeypatch.setattr(MessageRateThrottle, "THROTTLE_RATES", {"messages": "2/minute"})
    await sync_to_async(cache.clear)()
    codes = [(await api.post("/api/v1/messages", {"content": ""})).status_code for _ in range(3)]
    assert codes == [400, 400, 429]
    await sync_to_async(cache.clear)()


async def test_chat_page_requires_login_and_shows_history(user: Any, orchestrator: Any, llm_server: Any,
                                                          api: Api) -> None:
    client = AsyncClient()
    assert (await client.get("/chat/"))["Location"].startswith("/accounts/login/")
    llm_server.script(text("Hello <there>"))
    conversation = (await api.post("/api/v1/messages", {"content": "hi"})).json()["conversation"]
    await client.aforce_login(user)
    page = (await client.get(f"/chat/?c={conversation}")).content.decode()
    assert "Hello &lt;there&gt;" in page and 'id="chat-config"' in page and "Log out" in page
    assert (await client.get("/chat/?c=00000000-0000-0000-0000-000000000000")).status_code == 404


@pytest.mark.django_db
def test_absurd_pagination_numbers_are_clamped_not_a_server_error(api_client: Any) -> None:
    """Found by the schema fuzzer: limit=2**91 used to reach the database driver and fail."""
    huge = str(2**91)
    for path in ("/api/v1/notifications", "/api/v1/conversations"):
        response = api_client.get(path, {"limit": huge, "offset": huge})
        assert response.status_code == 200, response.content
        assert response.json()["results"] == []
    assert api_client.get("/api/v1/conversations", {"limit": huge}).status_code == 200
