"""The approval page in a real headless Chromium against a real daphne subprocess."""

from __future__ import annotations

import json
import shutil
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.approvals.test_flow import ALICE
from tests.llm_server import text, tool_calls

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


@pytest.fixture
def approvals_live(llm_server: Any, smtp_inbox: Any, settings: Any, tmp_path: Any) -> Iterator[Any]:
    from tests.surfaces.live import LiveServer, live_server_env

    env = live_server_env(tmp_path, llm_server.env, DJANGO_SETTINGS_MODULE="tests.approvals.live_settings",
                          ONEVALET_TOOL_MODULES="orchestrator.email_agent", EMAIL_HOST="127.0.0.1",
                          EMAIL_PORT=str(settings.EMAIL_PORT), DEFAULT_FROM_EMAIL="valet@example.test")
    server = LiveServer(workdir=tmp_path, env=env)
    server.start()
    server.tokens = server.create_users("carol")
    yield server
    server.stop()


@pytest.mark.browser
def test_approve_on_the_page_sends_the_email(approvals_live: Any, llm_server: Any, smtp_inbox: Any) -> None:
    from playwright.sync_api import expect, sync_playwright

    llm_server.script(tool_calls(("call_a", "SendEmailAgent", ALICE)), text("Shall I send Alice the lunch email?"))
    request = urllib.request.Request(approvals_live.url + "/api/v1/messages", method="POST",
                                     data=json.dumps({"content": "email Alice"}).encode(),
                                     headers={"Authorization": f"Token {approvals_live.tokens['carol']}",
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.load(response)
    assert answer["status"] == "waiting_for_approval" and answer["response"] == "Shall I send Alice the lunch email?"
    assert [a["arguments"] for a in answer["pending_approvals"]] == [ALICE]  # structured data unchanged

    llm_server.script(text("Your email to Alice is sent."))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.goto(approvals_live.url + "/approvals/")
        page.fill("#id_username", "carol")
        page.fill("#id_password", "pw-carol")
        page.click("button[type=submit]")
        page.wait_for_url("**/approvals/")
        page.click("#pending a")
        expect(page.locator("#arguments")).to_contain_text("alice@example.com")
        expect(page.locator("#arguments")).to_contain_text(ALICE["body"])
        page.click("#approve")
        expect(page.locator("#status")).to_have_text("Approved")
        expect(page.locator("#outcome")).to_contain_text("Email sent to alice@example.com")
        page.goto(approvals_live.url + "/approvals/")
        expect(page.locator("#pending")).to_contain_text("Nothing is waiting for you.")
        browser.close()
    assert smtp_inbox.summary() == [(ALICE["recipient"], ALICE["subject"], ALICE["body"])]
