"""config.broker's channel keeps one Redis client for its commands (kombu
built one per published task) and builds a new one once its pools are
dropped, as after a connection error. Against the test Redis."""

from __future__ import annotations

import uuid

from config.broker import Channel
from config.celery import app


def test_a_channel_reuses_its_client_and_replaces_it_with_its_pool() -> None:
    queue = f"pix-test-{uuid.uuid4().hex}"
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        assert isinstance(channel, Channel)
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
        channel._put(queue, {"body": "one"})
        assert channel._size(queue) == 1

        channel._disconnect_pools()  # type: ignore[attr-defined]  # what a connection error does
        with channel.conn_or_acquire() as third:
            assert third is not first
            assert third.connection_pool is channel.pool
        channel._put(queue, {"body": "two"})
        assert channel._size(queue) == 2
        channel._purge(queue)
        assert channel._size(queue) == 0
