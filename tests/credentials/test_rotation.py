"""``manage.py rotate_credentials``: every row ends up readable with the newest key alone."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command

from credentials import crypto
from credentials.models import Credential
from credentials.selectors import credential_value
from credentials.services import credential_rotate_batch, credential_save
from tests.credentials.conftest import SECRET, assert_no_secret

pytestmark = pytest.mark.django_db


def rotate(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("rotate_credentials", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def seed(user: Any, count: int) -> list[Credential]:
    return [
        credential_save(owner_id=user.pk, service=f"svc{i:02d}", credentials={"token": f"{SECRET}-{i}"})[0]
        for i in range(count)
    ]


def values_of(user: Any, rows: list[Credential]) -> list[dict[str, Any]]:
    return [credential_value(owner_id=user.pk, service=r.service, account_name=r.account_name) for r in rows]


@pytest.mark.smoke
def test_rotation_moves_every_row_to_the_new_key(
    user: Any, other_user: Any, old_key: str, new_key: str, settings: Any
) -> None:
    rows = seed(user, 5) + seed(other_user, 2)
    settings.CREDENTIALS_KEYS = [new_key, old_key]
    out, err = rotate("--batch-size", "3")
    assert "done: rotated 7, already current 0, changed meanwhile 0, failed 0" in out
    assert "resume with --start-after" in out and err == ""
    assert_no_secret(out)

    settings.CREDENTIALS_KEYS = [new_key]  # the old key is gone
    assert values_of(user, rows[:5]) == [{"token": f"{SECRET}-{i}"} for i in range(5)]
    assert values_of(other_user, rows[5:]) == [{"token": f"{SECRET}-{i}"} for i in range(2)]
    for token in Credential.objects.values_list("sealed_value", flat=True):
        Fernet(new_key).decrypt(token.encode())


def test_rotation_is_resumable_and_rerunning_is_harmless(user: Any, old_key: str, new_key: str, settings: Any) -> None:
    rows = seed(user, 6)
    settings.CREDENTIALS_KEYS = [new_key, old_key]
    first = credential_rotate_batch(after_pk=0, batch_size=2)  # a run stopped after one batch
    assert (first.rotated, first.last_pk) == (2, rows[1].pk)
    untouched = Credential.objects.get(pk=rows[2].pk).sealed_value
    assert not crypto.is_sealed_with_newest_key(untouched)

    out, _ = rotate("--start-after", str(first.last_pk), "--batch-size", "2")
    assert "done: rotated 4, already current 0" in out
    out, _ = rotate()  # again, from the start: nothing left to do, nothing broken
    assert "done: rotated 0, already current 6, changed meanwhile 0, failed 0" in out
    out, _ = rotate("--force")
    assert "done: rotated 6" in out

    settings.CREDENTIALS_KEYS = [new_key]
    assert values_of(user, rows) == [{"token": f"{SECRET}-{i}"} for i in range(6)]


def test_updated_at_is_kept(user: Any, old_key: str, new_key: str, settings: Any) -> None:
    (row,) = seed(user, 1)
    settings.CREDENTIALS_KEYS = [new_key, old_key]
    rotate()
    assert Credential.objects.get(pk=row.pk).updated_at == row.updated_at


def test_unreadable_rows_are_named_and_left_alone(
    user: Any, other_user: Any, old_key: str, new_key: str, settings: Any
) -> None:
    good, lost, swapped = seed(user, 3)
    lost_token = Fernet(Fernet.generate_key()).encrypt(b"{}").decode()  # sealed with a key nobody has
    Credential.objects.filter(pk=lost.pk).update(sealed_value=lost_token)
    Credential.objects.filter(pk=swapped.pk).update(sealed_value=good.sealed_value)
    settings.CREDENTIALS_KEYS = [new_key, old_key]
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="2 credential"):  # raised after printing its report
        call_command("rotate_credentials", stdout=out, stderr=err)
    assert "failed 2" in out.getvalue()
    assert f"pk={lost.pk} owner={user.pk} svc01/primary" in err.getvalue()
    assert f"pk={swapped.pk} owner={user.pk} svc02/primary" in err.getvalue()
    assert_no_secret(out.getvalue() + err.getvalue())
    assert Credential.objects.get(pk=lost.pk).sealed_value == lost_token
    settings.CREDENTIALS_KEYS = [new_key]
    assert values_of(user, [good]) == [{"token": f"{SECRET}-0"}]


def test_a_value_saved_during_rotation_is_not_overwritten(
    user: Any, old_key: str, new_key: str, settings: Any, monkeypatch: Any
) -> None:
    (row,) = seed(user, 1)
    settings.CREDENTIALS_KEYS = [new_key, old_key]
    real_rotate = crypto.rotate

    def rotate_while_a_tool_saves(token: str, binding: crypto.Binding) -> str:
        rotated = real_rotate(token, binding)
        credential_save(owner_id=user.pk, service=row.service, credentials={"token": "refreshed"})
        return rotated

    monkeypatch.setattr(crypto, "rotate", rotate_while_a_tool_saves)
    batch = credential_rotate_batch(after_pk=0, batch_size=10)
    assert (batch.rotated, batch.changed_meanwhile) == (0, 1)
    assert credential_value(owner_id=user.pk, service=row.service, account_name="primary") == {"token": "refreshed"}


def test_batch_size_must_be_positive(db: None) -> None:
    with pytest.raises(CommandError, match="batch-size"):
        rotate("--batch-size", "0")


def test_empty_table(db: None) -> None:
    out, _ = rotate()
    assert "done: rotated 0, already current 0, changed meanwhile 0, failed 0" in out
