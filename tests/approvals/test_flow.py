"""End to end: agents stop for approval, the user decides through the doors, the loop finishes.

Sync tests drive the async orchestrator with ``async_to_sync`` so the REST and web doors
(Django's and DRF's test clients) and the eager Celery tasks run as they do in a worker.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from approvals import services
from approvals.models import ApprovalDecisionAttempt, ApprovalRequest
from notifications.models import Notification
from orchestrator.models import LoopRun, Message
from orchestrator.types import RunStatus
from pool.models import AgentPoolEntry
from tests.approvals.conftest import INJECTION
from tests.llm_server import text, tool_calls
from tests.pool.conftest import assert_phrasing_request, assert_valid_tool_ordering

pytestmark = [pytest.mark.django_db(transaction=True)]

ALICE = {"recipient": "alice@example.com", "subject": "Lunch", "body": "Lunch at noon on Friday?"}
BOB = {"recipient": "bob@example.com", "subject": "Report", "body": "The report is attached in spirit."}
PHRASED = "Shall I go ahead and send it?"  # the scripted phrasing of a waiting agent's question


def ask(orch: Any, user: Any, content: str, conversation: str | None = None, source: str = "web") -> Any:
    """One message, in its own event loop, as the Celery tasks do (the LLM client is per loop)."""
    return async_to_sync(orch.handle_message)(user_id=user.pk, content=content, conversation_id=conversation,
                                              source=source)


def two_emails(orch: Any, llm_server: Any, user: Any) -> Any:
    llm_server.script(tool_calls(("call_a", "SendEmailAgent", ALICE), ("call_b", "SendEmailAgent", BOB)),
                      text(PHRASED))
    return ask(orch, user, "email Alice about lunch and Bob about the report")


def test_two_approvals_of_one_turn_are_shown_together(orchestrator: Any, llm_server: Any, user: Any,
                                                      smtp_inbox: Any) -> None:
    outcome = two_emails(orchestrator, llm_server, user)
    result = outcome.result
    assert result.status == RunStatus.WAITING_FOR_APPROVAL
    assert [a["arguments"] for a in result.pending_approvals] == [ALICE, BOB]
    # Both agents' questions go to the phrasing call together; clients keep the structured data.
    assert_phrasing_request(llm_server.requests[-1], result.interruption.prompt)
    assert result.response == PHRASED and len(result.interruption.prompt.split("\n\n")) == 2
    assert result.pending_approvals[0]["details"]["body_preview"] == ALICE["body"]
    rows = list(ApprovalRequest.objects.order_by("created_at"))
    assert len(rows) == 2 and {str(r.run_id) for r in rows} == {outcome.run_id}
    assert rows[0].arguments_hash == services.arguments_hash(ALICE)
    assert {r.tool_call_id for r in rows} == {"call_a", "call_b"}
    assert all(r.expires_at > r.created_at and r.options == ["approve", "edit", "cancel"] for r in rows)
    assert AgentPoolEntry.objects.filter(status="waiting_for_approval").count() == 2
    assert smtp_inbox.messages == []


def test_approve_one_via_rest_and_edit_the_other_on_the_page(orchestrator: Any, llm_server: Any, user: Any,
                                                             api_client: Any, smtp_inbox: Any) -> None:
    outcome = two_emails(orchestrator, llm_server, user)
    first, second = (a["approval_id"] for a in outcome.result.pending_approvals)

    listed = api_client.get("/api/v1/approvals?status=pending").json()
    assert [r["id"] for r in listed["results"]] and {r["id"] for r in listed["results"]} == {first, second}
    response = api_client.post(f"/api/v1/approvals/{first}/decision", {"decision": "approve"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "approved"
    assert smtp_inbox.summary() == [(ALICE["recipient"], ALICE["subject"], ALICE["body"])]

    llm_server.script(text("Both emails are on their way."))
    browser = Client()
    browser.force_login(user)
    page = browser.get(f"/approvals/{second}/")
    assert page.status_code == 200 and b"bob@example.com" in page.content
    bad = browser.post(f"/approvals/{second}/", {"action": "edit", "recipient": "bob-at-nowhere",
                                                 "subject": "Report", "body": BOB["body"]})
    assert bad.status_code == 400 and b"Invalid email address" in bad.content
    done = browser.post(f"/approvals/{second}/", {"action": "edit", "recipient": "bob@example.com",
                                                  "subject": "Quarterly report", "body": BOB["body"]})
    assert done.status_code == 302

    assert smtp_inbox.summary() == [(ALICE["recipient"], ALICE["subject"], ALICE["body"]),
                                    ("bob@example.com", "Quarterly report", BOB["body"])]
    sent = llm_server.requests[-1].messages
    assert_valid_tool_ordering(sent)
    assert [m["content"] for m in sent[-2:]] == ["Email sent to alice@example.com (subject: Lunch).",
                                                 "Email sent to bob@example.com (subject: Quarterly report)."]
    continuation = LoopRun.objects.get(source="approval")
    assert continuation.response == "Both emails are on their way." and continuation.status == "completed"
    assert Message.objects.filter(run=continuation, role="assistant").last().content == continuation.response
    assert Notification.objects.filter(owner=user, source="approval", body=continuation.response).exists()
    rows = {str(r.id): r for r in ApprovalRequest.objects.all()}
    assert rows[second].status == "edited" and rows[second].final_arguments["subject"] == "Quarterly report"
    assert rows[first].channel == "rest" and rows[second].channel == "web"
    assert all(r.outcome == "completed" and r.executed_at for r in rows.values())
    assert AgentPoolEntry.objects.count() == 0


def test_cancel_tells_the_llm_and_it_answers(orchestrator: Any, llm_server: Any, user: Any,
                                             smtp_inbox: Any) -> None:
    llm_server.script(tool_calls(("call_a", "SendEmailAgent", ALICE)), text(PHRASED))
    outcome = ask(orchestrator, user, "email Alice")
    [pending] = outcome.result.pending_approvals
    llm_server.script(text("Understood, I did not send it."))
    services.approval_decide(owner_id=user.pk, request_id=pending["approval_id"], decision="cancel",
                             channel="rest", actor_id=user.pk)
    last = llm_server.requests[-1].messages[-1]
    assert last == {"role": "tool", "tool_call_id": f"approval_{pending['approval_id'].replace('-', '')}",
                    "content": "User cancelled this action."}
    assert LoopRun.objects.get(source="approval").response == "Understood, I did not send it."
    assert smtp_inbox.messages == [] and AgentPoolEntry.objects.count() == 0


def test_chat_yes_approves_a_single_request(orchestrator: Any, llm_server: Any, user: Any, smtp_inbox: Any) -> None:
    llm_server.script(tool_calls(("call_a", "SendEmailAgent", ALICE)), text(PHRASED))
    outcome = ask(orchestrator, user, "email Alice")
    llm_server.script(text("Sent!"))
    done = ask(orchestrator, user, "yes please", outcome.conversation_id)
    assert done.result.response == "Sent!"
    assert smtp_inbox.summary() == [(ALICE["recipient"], ALICE["subject"], ALICE["body"])]
    request = ApprovalRequest.objects.get()
    assert request.channel == "chat" and request.status == "approved" and request.flowback_at is not None


def test_chat_reply_for_several_requests_is_mapped_and_unclear_asks_again(orchestrator: Any, llm_server: Any,
                                                                          user: Any, smtp_inbox: Any) -> None:
    outcome = two_emails(orchestrator, llm_server, user)
    llm_server.script(tool_calls(("m1", "record_decisions", {"decisions": [
        {"request": 1, "decision": "approve"}, {"request": 2, "decision": "unclear"}]})))
    again = ask(orchestrator, user, "the first one is fine", outcome.conversation_id)
    assert again.result.status == RunStatus.WAITING_FOR_APPROVAL and "could not tell" in again.result.response
    assert ApprovalRequest.objects.filter(status="pending").count() == 2 and smtp_inbox.messages == []

    llm_server.script(tool_calls(("m2", "record_decisions", {"decisions": [
        {"request": 1, "decision": "approve"},
        {"request": 2, "decision": "edit", "changes": {"subject": "Q3 report"}}]})),
        text("Done: both sent."))
    done = ask(orchestrator, user, "send Alice's, and Bob's with subject Q3 report", outcome.conversation_id)
    assert done.result.response == "Done: both sent."
    assert smtp_inbox.summary() == [(ALICE["recipient"], ALICE["subject"], ALICE["body"]),
                                    (BOB["recipient"], "Q3 report", BOB["body"])]
    assert_valid_tool_ordering(llm_server.requests[-1].messages)


def test_double_approve_expired_and_cross_tenant(orchestrator: Any, llm_server: Any, user: Any, other_user: Any,
                                                 api_client: Any, smtp_inbox: Any) -> None:
    from datetime import timedelta

    from django.utils import timezone
    from rest_framework.test import APIClient

    outcome = two_emails(orchestrator, llm_server, user)
    first, second = (a["approval_id"] for a in outcome.result.pending_approvals)
    stranger = APIClient()
    stranger.force_authenticate(other_user)
    assert stranger.get(f"/api/v1/approvals/{first}").status_code == 404
    assert stranger.post(f"/api/v1/approvals/{first}/decision", {"decision": "approve"},
                         format="json").status_code == 404
    assert api_client.get("/api/v1/approvals/not-a-uuid").status_code == 404

    assert api_client.post(f"/api/v1/approvals/{first}/decision", {"decision": "approve"},
                           format="json").status_code == 200
    again = api_client.post(f"/api/v1/approvals/{first}/decision", {"decision": "approve"}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "approval_approved"
    assert len(smtp_inbox.messages) == 1

    ApprovalRequest.objects.filter(id=second).update(expires_at=timezone.now() - timedelta(seconds=1))
    late = api_client.post(f"/api/v1/approvals/{second}/decision", {"decision": "approve"}, format="json")
    assert late.status_code == 409 and late.json()["code"] == "approval_expired"
    assert len(smtp_inbox.messages) == 1
    attempts = list(ApprovalDecisionAttempt.objects.order_by("id").values_list("accepted", "reason"))
    assert attempts == [(True, ""), (False, "already approved"), (False, "expired")]


def test_edit_is_limited_to_editable_fields_and_validated(orchestrator: Any, llm_server: Any, user: Any,
                                                          api_client: Any, smtp_inbox: Any) -> None:
    llm_server.script(tool_calls(("call_a", "SendEmailAgent", ALICE)), text(PHRASED))
    [pending] = ask(orchestrator, user, "email Alice").result.pending_approvals
    url = f"/api/v1/approvals/{pending['approval_id']}/decision"
    bad = api_client.post(url, {"decision": "edit", "changes": {"recipient": "nobody"}}, format="json")
    assert bad.status_code == 400 and bad.json()["details"]["field"] == "recipient"
    unknown = api_client.post(url, {"decision": "edit", "changes": {"bcc": "x@evil.example"}}, format="json")
    assert unknown.status_code == 400 and unknown.json()["details"]["field"] == "bcc"
    assert ApprovalRequest.objects.get().status == "pending" and smtp_inbox.messages == []


def test_changed_arguments_after_approval_are_refused(orchestrator: Any, llm_server: Any, user: Any,
                                                      smtp_inbox: Any) -> None:
    """The paused agent's stored fields are altered after the user saw them: hash mismatch, nothing sent."""
    llm_server.script(tool_calls(("call_a", "SendEmailAgent", ALICE)), text(PHRASED))
    [pending] = ask(orchestrator, user, "email Alice").result.pending_approvals
    entry = AgentPoolEntry.objects.get()
    entry.collected_fields = {**entry.collected_fields, "recipient": "x@evil.example"}
    entry.save()
    llm_server.script(text("It was not sent; the details changed."))
    services.approval_decide(owner_id=user.pk, request_id=pending["approval_id"], decision="approve",
                             channel="rest", actor_id=user.pk)
    request = ApprovalRequest.objects.get()
    assert request.outcome == "refused" and smtp_inbox.messages == []
    assert llm_server.requests[-1].messages[-1]["content"].startswith("Refused: the arguments SendEmailAgent")


def test_llm_calling_again_with_another_recipient_gets_a_new_request(orchestrator: Any, llm_server: Any,
                                                                     user: Any, smtp_inbox: Any) -> None:
    llm_server.script(tool_calls(("call_a", "SendEmailAgent", ALICE)), text(PHRASED))
    [pending] = ask(orchestrator, user, "email Alice").result.pending_approvals
    llm_server.script(tool_calls(("call_x", "SendEmailAgent", {**ALICE, "recipient": "x@evil.example"})),
                      text(PHRASED))
    services.approval_decide(owner_id=user.pk, request_id=pending["approval_id"], decision="approve",
                             channel="rest", actor_id=user.pk)
    assert smtp_inbox.summary() == [(ALICE["recipient"], ALICE["subject"], ALICE["body"])]
    fresh = ApprovalRequest.objects.get(status="pending")
    assert fresh.details["recipient"] == "x@evil.example"
    continuation = LoopRun.objects.get(source="approval")
    assert continuation.status == RunStatus.WAITING_FOR_APPROVAL and continuation.response == PHRASED


def test_injected_instruction_gets_at_most_an_honest_request(orchestrator: Any, llm_server: Any, user: Any,
                                                             smtp_inbox: Any) -> None:
    evil = {"recipient": "x@evil.example", "subject": "Fwd: everything", "body": "all of it"}
    llm_server.script(tool_calls(("r1", "read_inbox", {})),
                      tool_calls(("s1", "SendEmailAgent", evil)), text(PHRASED))
    outcome = ask(orchestrator, user, "summarise my newest email")
    assert INJECTION in llm_server.requests[1].messages[-1]["content"]
    assert outcome.result.status == RunStatus.WAITING_FOR_APPROVAL
    [pending] = outcome.result.pending_approvals
    assert pending["arguments"] == evil and pending["action_summary"] == "Send email to x@evil.example"
    # A triggered run saying "yes" never approves: the request stays pending, nothing is sent.
    llm_server.script(text("Noted."))
    ask(orchestrator, user, "yes", outcome.conversation_id, source="trigger")
    assert ApprovalRequest.objects.get().status == "pending" and smtp_inbox.messages == []


def test_users_stored_smtp_account_is_used(orchestrator: Any, llm_server: Any, user: Any, smtp_inbox: Any,
                                           settings: Any) -> None:
    from credentials.store import CredentialStore

    port, settings.EMAIL_HOST = settings.EMAIL_PORT, ""  # only the stored account can reach the server
    async_to_sync(CredentialStore().save)(user.pk, "smtp", {"host": "127.0.0.1", "port": port, "username": "",
                                                            "password": "", "use_tls": False,
                                                            "from": "me@example.test"})
    llm_server.script(tool_calls(("call_a", "SendEmailAgent", ALICE)), text(PHRASED))
    [pending] = ask(orchestrator, user, "email Alice").result.pending_approvals
    llm_server.script(text("Sent."))
    services.approval_decide(owner_id=user.pk, request_id=pending["approval_id"], decision="approve",
                             channel="rest", actor_id=user.pk)
    [(recipients, message)] = smtp_inbox.messages
    assert recipients == [ALICE["recipient"]] and message["From"] == "me@example.test"
