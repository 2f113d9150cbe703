"""Signals other apps listen to, so approvals need not know who waits on them."""

from django.dispatch import Signal

#: Sent when every request of one run (a batch) has been dealt with and its conversation
#: was continued — or not, when all of them expired. Arguments: ``run_id`` (the run that
#: asked), ``status`` ("completed", "failed", "waiting_for_approval", "waiting_for_input"
#: or "expired"), ``response`` (the continuation's answer, "" when expired) and
#: ``continuation_run_id`` (the run that continued the conversation, or None).
batch_resolved = Signal()
