from django.apps import AppConfig


class TriggersConfig(AppConfig):
    name = "triggers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Connects ``stamp_fired_at`` in every process that publishes fire_trigger (beat too).
        from triggers import tasks  # noqa: F401
