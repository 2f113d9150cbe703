"""Settings of the daphne subprocess in the approval browser test: the site's, with Celery
tasks run eagerly (no worker process), so an approval clicked in the browser executes."""

from onevalet_site.settings import *  # noqa: F403

CELERY_TASK_ALWAYS_EAGER = True
