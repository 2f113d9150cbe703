"""The edit form of the approval page, built from the agent's own InputFields.

Each editable field is checked with the agent's validator (``InputField.check``), the same
check ``approval_decide`` runs again, so the page shows the agent's message next to the
field instead of a generic error.
"""

from __future__ import annotations

from typing import Any

from django import forms

from approvals.models import ApprovalRequest
from orchestrator.agents import InputField, StandardAgent, agent_registry

LONG_TEXT_FIELDS = {"body", "message", "text", "content", "description"}


class ApprovalEditForm(forms.Form):
    def __init__(self, *args: Any, approval: ApprovalRequest, agent_cls: type[StandardAgent] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.approval = approval
        agent_cls = agent_cls or agent_registry.get(approval.agent_name)
        specs = {spec.name: spec for spec in agent_cls.input_fields} if agent_cls else {}
        self.specs: dict[str, InputField] = {name: specs[name] for name in approval.editable_fields if name in specs}
        for name, spec in self.specs.items():
            widget = forms.Textarea(attrs={"rows": 8}) if name in LONG_TEXT_FIELDS else forms.TextInput()
            self.fields[name] = forms.CharField(label=spec.label().capitalize(), required=spec.required,
                                                help_text=spec.validator_description or spec.description,
                                                initial=_as_text(approval.details.get(name)), widget=widget,
                                                strip=name not in LONG_TEXT_FIELDS)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        for name, spec in self.specs.items():
            if name in self.errors or name not in cleaned:
                continue
            value, problem = spec.check(spec.from_reply(cleaned[name]) if spec.type is not str else cleaned[name])
            if problem:
                self.add_error(name, problem)
            else:
                cleaned[name] = value
        return cleaned

    def changes(self) -> dict[str, Any]:
        """Only the fields whose value differs from what the agent proposed."""
        return {name: self.cleaned_data[name] for name in self.specs
                if name in self.cleaned_data and self.cleaned_data[name] != self.approval.details.get(name)}


def _as_text(value: Any) -> str:
    return "" if value is None else str(value)
