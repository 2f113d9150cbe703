"""REST: owner-scoped CRUD, runs, pause/resume; admin tenancy."""

from __future__ import annotations

from typing import Any

import pytest
from django_celery_beat.models import PeriodicTask

from tests.factories import make_user
from triggers import services
from triggers.models import TriggerRun

pytestmark = pytest.mark.django_db


def test_crud_runs_pause_resume(api_client: Any, user: Any) -> None:
    created = api_client.post("/api/v1/triggers", {"name": "Brief", "kind": "cron", "cron": "0 8 * * *",
                                                   "action": {"instruction": "brief me"}}, format="json")
    assert created.status_code == 201, created.content
    task_id = created.json()["id"]
    assert api_client.get("/api/v1/triggers").json()["results"][0]["id"] == task_id
    patched = api_client.patch(f"/api/v1/triggers/{task_id}", {"cron": "15 9 * * *"}, format="json")
    assert patched.status_code == 200 and patched.json()["cron"] == "15 9 * * *"
    assert api_client.post(f"/api/v1/triggers/{task_id}/pause").json()["status"] == "paused"
    assert not PeriodicTask.objects.get(trigger_task__id=task_id).enabled
    assert api_client.post(f"/api/v1/triggers/{task_id}/resume").json()["status"] == "active"
    TriggerRun.objects.create(task_id=task_id, owner=user, run_key="k", scheduled_for="2030-01-01T00:00Z",
                              status="completed")
    assert api_client.get(f"/api/v1/triggers/{task_id}/runs").json()["results"][0]["run_key"] == "k"
    assert api_client.delete(f"/api/v1/triggers/{task_id}").status_code == 204
    assert api_client.get(f"/api/v1/triggers/{task_id}").status_code == 404


def test_bad_input_is_400(api_client: Any) -> None:
    response = api_client.post("/api/v1/triggers", {"name": "x", "kind": "cron", "cron": "nope",
                                                    "action": {"instruction": "i"}}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "invalid_cron"


def test_other_users_trigger_is_404(api_client: Any, other_user: Any) -> None:
    task = services.trigger_task_create(owner_id=other_user.pk, name="theirs", kind="cron", cron="0 8 * * *",
                                        action={"instruction": "x"})
    for method, path in [("get", ""), ("patch", ""), ("delete", ""), ("get", "/runs"), ("post", "/pause"),
                         ("post", "/resume"), ("post", "/run")]:
        response = getattr(api_client, method)(f"/api/v1/triggers/{task.pk}{path}", {}, format="json")
        assert response.status_code == 404, (method, path)


def test_admin_is_owner_scoped_and_beat_admin_superuser_only(client: Any, user: Any, other_user: Any) -> None:
    staff = make_user(is_staff=True)
    from django.contrib.auth.models import Permission

    staff.user_permissions.set(Permission.objects.filter(content_type__app_label__in=["triggers", "django_celery_beat"]))
    mine = services.trigger_task_create(owner_id=staff.pk, name="mine", kind="cron", cron="0 8 * * *",
                                        action={"instruction": "x"})
    theirs = services.trigger_task_create(owner_id=other_user.pk, name="theirs", kind="cron", cron="0 8 * * *",
                                          action={"instruction": "x"})
    client.force_login(staff)
    listing = client.get("/admin/triggers/triggertask/").content.decode()
    assert "mine" in listing and "theirs" not in listing
    assert client.get(f"/admin/triggers/triggertask/{theirs.pk}/change/").status_code in (302, 404)
    assert client.get(f"/admin/triggers/triggertask/{mine.pk}/change/").status_code == 200
    assert client.get("/admin/django_celery_beat/periodictask/").status_code == 403
    superuser = make_user(is_staff=True, is_superuser=True)
    client.force_login(superuser)
    assert client.get("/admin/django_celery_beat/periodictask/").status_code == 200
    assert "theirs" in client.get("/admin/triggers/triggertask/").content.decode()


def test_admin_edit_of_crontab_updates_periodic_task(client: Any) -> None:
    superuser = make_user(is_staff=True, is_superuser=True, timezone="America/New_York")
    task = services.trigger_task_create(owner_id=superuser.pk, name="t", kind="cron", cron="0 8 * * *",
                                        action={"instruction": "x"})
    client.force_login(superuser)
    response = client.post(f"/admin/triggers/triggertask/{task.pk}/change/", {
        "name": "t", "executor": "orchestrator", "action": '{"instruction": "x"}', "output": '{"channels": ["inbox"]}',
        "cron": "45 6 * * 1", "missed_run_policy": "run_once", "event_filter": "{}", "condition": "{}",
        "cooldown_seconds": "3600", "runs-TOTAL_FORMS": "0", "runs-INITIAL_FORMS": "0"})
    assert response.status_code == 302, response.content.decode()[:2000]
    crontab = PeriodicTask.objects.get(pk=task.periodic_task_id).crontab
    assert (crontab.minute, crontab.hour, crontab.day_of_week, str(crontab.timezone)) == (
        "45", "6", "1", "America/New_York")
