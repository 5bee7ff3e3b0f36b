"""Settings of the benchmarked server: the local settings (as ``make run``)
plus the ceiling's route. Only ``bench_env()`` selects this module, so the
ceiling view is never reachable in any other environment."""

from config.settings.local import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
