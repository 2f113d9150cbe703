from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _sync_schedule(**_: object) -> None:
    from triggers.schedules import reaper_schedule_sync

    reaper_schedule_sync()


class TriggersConfig(AppConfig):
    name = "triggers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Connects ``stamp_fired_at`` in every process that publishes fire_trigger (beat too).
        from triggers import tasks  # noqa: F401

        from approvals.signals import batch_resolved
        from triggers.approval_link import on_batch_resolved

        # A triggered run waiting for approval finishes when its approvals do.
        batch_resolved.connect(on_batch_resolved, dispatch_uid="triggers.approval_link")

        # After every migrate: the stale-run reaper's beat schedule exists (this system task only, by name).
        post_migrate.connect(_sync_schedule, sender=self, dispatch_uid="triggers.sync_reaper_schedule")
