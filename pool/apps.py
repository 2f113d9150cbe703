from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _sync_schedule(**_: object) -> None:
    from pool.services import pool_expiry_schedule_sync

    pool_expiry_schedule_sync()


class PoolConfig(AppConfig):
    name = "pool"
    verbose_name = "Agent pool"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # After every migrate (deploys, test databases): the expiry task's beat schedule exists.
        post_migrate.connect(_sync_schedule, sender=self, dispatch_uid="pool.sync_expiry_schedule")
