"""The chat page in a real headless Chromium against a real daphne."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from tests.llm_server import text, tool_calls

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


@pytest.mark.browser
def test_login_send_and_watch_the_answer_stream(live: Any, llm_server: Any) -> None:
    from playwright.sync_api import expect, sync_playwright

    answer = "The weather in Lisbon is sunny with a light breeze from the sea. " * 4
    answer = answer.strip()  # ~50 chunks, 40 ms apart: long enough to watch it stream
    llm_server.script(tool_calls(("get_weather", {"city": "Lisbon"})), text(answer, chunk_delay=0.04))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.goto(live.url + "/chat/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", "pw-alice")
        page.click("button[type=submit]")
        page.wait_for_url("**/chat/")
        expect(page.locator("#status")).to_have_text("Connected")

        page.fill("#content", "What's the weather in Lisbon?")
        page.click("#send button[type=submit]")
        expect(page.locator(".msg.user").last).to_have_text("What's the weather in Lisbon?")
        expect(page.locator(".activity").last).to_have_text("get_weather ✓")
        streaming = page.locator(".msg.assistant.streaming")
        streaming.wait_for()  # seen mid-stream: chunks are arriving one by one
        expect(page.locator(".msg.assistant").last).to_have_text(answer)
        expect(streaming).to_have_count(0)
        assert "?c=" in page.url  # the new conversation became the page's conversation

        page.reload()  # stored history renders server-side
        expect(page.locator(".msg.assistant").last).to_have_text(answer)
        expect(page.locator("nav")).to_contain_text("Admin")
        browser.close()
