"""Settings of the worker/beat subprocesses in ``test_processes``: the site's, with a short run lease.

A run's lease (how long a silent heartbeat means a dead worker) is a minute in production;
the kill -9 test would wait that long for every recovery, so its processes use a few
seconds instead — the same code path, a shorter clock.
"""

from onevalet_site.settings import *  # noqa: F403

TRIGGERS_RUN_LEASE_SECONDS = 4
