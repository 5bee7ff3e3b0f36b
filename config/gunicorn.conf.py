"""gunicorn settings for every way the web process starts: ``make run``
(Procfile), the Docker image and compose, and the benchmarks (``bench/``),
so that what is measured is what is deployed.

    gunicorn config.wsgi:application -c config/gunicorn.conf.py --bind HOST:PORT

``WEB_WORKERS`` (or ``WEB_CONCURRENCY``, which platforms set) and
``WEB_THREADS`` size it (the defaults are what ``make bench`` found best on
a 2-CPU machine); ``WEB_TIMEOUT`` is its timeout.
"""

import os

# Threads overlap the waits on PostgreSQL, Redis and acquirers; processes
# are what use more than one CPU (the GIL). Each worker process holds its own
# database pool (sized by DB_POOL_MAX_SIZE, see settings), created lazily
# after the fork: never preload the app, or forked workers would share the
# master's sockets.
#
# Before waiting threads released their connections, 1 x 8 beat 2 x 4 on a
# 2-CPU machine (a second process only added contention); with waiting made
# cheap, what limits is the CPU-bound part of each request, and 2 x 64 beat
# 1 x 128 (one GIL) by half again.
# One process per CPU, each with many threads: a thread waiting on an
# acquirer holds no database connection (core/connections.py) and no lock, so waiting
# is cheap; the processes give the CPU-bound part of each request both CPUs
# (one GIL each). Chosen by `python -m bench.isolation` (docs/performance.md, "Serving model").
workers = int(os.environ.get("WEB_WORKERS") or os.environ.get("WEB_CONCURRENCY") or max(1, os.cpu_count() or 2))
threads = int(os.environ.get("WEB_THREADS") or 64)
worker_class = "gthread"
preload_app = False

# A charge may wait out every acquirer of its chain: three at the default
# 3 s connect + 10 s read is 39 s, past gunicorn's own 30 s, which would kill
# the worker mid-charge. Anything past this is stuck; the worker is recycled.
# WEB_TIMEOUT is read by the settings too: an Idempotency-Key whose request
# died stays "in flight" this long (api/idempotency.py).
timeout = int(os.environ.get("WEB_TIMEOUT") or 60)
graceful_timeout = 10
# The heartbeat file lives in memory: on Docker's overlay filesystem a
# stalled disk write would otherwise look like a hung worker.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None  # noqa: S108 - a tmpfs, not shared files

# The access log's request line (and the error log's "Error handling request
# <path>") would print the secret segment of the acquirer notification URLs.
logger_class = "core.gunicorn_logging.RedactingLogger"
