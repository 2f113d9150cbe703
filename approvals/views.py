"""Web door of the approvals: the list (pending first) and one request's page.

Login required and CSRF-protected (Django's middleware); the decision goes through
``approval_decide`` with ``channel="web"`` like every other door.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from approvals import selectors, services
from approvals.forms import ApprovalEditForm
from approvals.models import ApprovalRequest
from onevalet_site.errors import Conflict, InvalidInput, NotFound

LIST_SHOWN = 100


@login_required
def approval_list_page(request: HttpRequest) -> HttpResponse:
    rows = list(selectors.approval_list(owner_id=request.user.pk)[:LIST_SHOWN])
    return render(request, "approvals/list.html", {
        "pending": [r for r in rows if r.is_pending], "decided": [r for r in rows if not r.is_pending]})


@login_required
@require_http_methods(["GET", "POST"])
def approval_detail_page(request: HttpRequest, request_id: str) -> HttpResponse:
    try:
        approval = selectors.approval_get(owner_id=request.user.pk, request_id=request_id)
    except NotFound as exc:
        raise Http404(exc.message) from None
    form = ApprovalEditForm(approval=approval)
    status = 200
    if request.method == "POST":  # even when it looks decided: the service audits every attempt
        action = request.POST.get("action", "")
        form = ApprovalEditForm(request.POST if action == "edit" else None, approval=approval)
        try:
            if action == "edit":
                if not form.is_valid():
                    return render(request, "approvals/detail.html", {"approval": approval, "form": form}, status=400)
                changes = form.changes()
                _decide(request, approval, "edit" if changes else "approve", changes or None)
            elif action in ("approve", "cancel"):
                _decide(request, approval, action, None)
            else:
                raise InvalidInput("Choose approve, edit or cancel.")
            return redirect("approval-page", request_id=approval.id)
        except Conflict as exc:
            messages.error(request, exc.message)
            status = 409
        except InvalidInput as exc:
            field = exc.details.get("field")
            form.add_error(field if field in form.fields else None, exc.message)
            status = 400
        approval.refresh_from_db()
    return render(request, "approvals/detail.html", {"approval": approval, "form": form}, status=status)


def _decide(request: HttpRequest, approval: ApprovalRequest, decision: str, changes: dict | None) -> None:
    services.approval_decide(owner_id=request.user.pk, request_id=approval.id, decision=decision, changes=changes,
                             channel=ApprovalRequest.Channel.WEB, actor_id=request.user.pk)
    verb = {"approve": "Approved", "edit": "Approved with your changes", "cancel": "Cancelled"}[decision]
    messages.success(request, f"{verb}: {approval.action_summary}.")
