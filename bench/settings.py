"""Settings of the benchmarked service: the local settings, as ``make run``
(``bench_env()`` turns DEBUG off and routes tasks to a queue no worker
reads). The ceiling every API figure is a ratio to is not in this server: it
is a bare app of its own (bench/anchor/)."""

from config.settings.local import *  # noqa: F403
