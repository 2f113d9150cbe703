from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _sync_schedule(**_: object) -> None:
    from approvals.services import approval_expiry_schedule_sync

    approval_expiry_schedule_sync()


class ApprovalsConfig(AppConfig):
    name = "approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # After every migrate: the expiry task's beat schedule exists (this system task only, by name).
        post_migrate.connect(_sync_schedule, sender=self, dispatch_uid="approvals.sync_expiry_schedule")
