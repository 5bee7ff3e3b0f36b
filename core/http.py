"""requests/urllib3 connections that the current deadline scope can cut.

Every connection hands its socket to the :func:`core.deadline.scope` it is
used in: when it connects, and again each time the pool lends it, kept
alive, to a request of a later scope (a session reused across calls must be
cut as surely as a fresh one). Outside a scope a connection is not watched.
"""

from __future__ import annotations

import socket
from typing import Any, cast

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from core import deadline


class _Watched:
    """Mixin for urllib3 connections: remembers the scope that watches its socket."""

    _deadline_scope: deadline.Scope | None = None

    def _watch(self, sock: socket.socket) -> None:
        active = deadline.current()
        if active is None or active is self._deadline_scope:
            return
        # Closed once the scope is over if it was cut: urllib3 may have put it
        # back in the pool, its cut answer read as complete.
        active.watch(sock, close=cast(HTTPConnection, self).close)
        self._deadline_scope = active


def _watched_new(conn: _Watched, sock: socket.socket) -> socket.socket:
    try:
        conn._watch(sock)
    except OSError:
        sock.close()  # not handed to urllib3 yet: nobody else would close it
        raise
    return sock


class DeadlineHTTPConnection(_Watched, HTTPConnection):
    def _new_conn(self) -> socket.socket:
        self._deadline_scope = None
        return _watched_new(self, super()._new_conn())


class DeadlineHTTPSConnection(_Watched, HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        self._deadline_scope = None
        return _watched_new(self, super()._new_conn())


def _lent(conn: Any) -> Any:
    # A kept-alive connection lent to a new request: watched by the scope it now serves.
    sock = getattr(conn, "sock", None)
    if isinstance(conn, _Watched) and sock is not None:
        try:
            conn._watch(sock)
        except OSError:
            sock.close()  # the connection is out of the pool already: nobody else would close it
            raise
    return conn


class DeadlineHTTPPool(HTTPConnectionPool):
    ConnectionCls = DeadlineHTTPConnection

    def _get_conn(self, timeout: float | None = None) -> Any:
        return _lent(super()._get_conn(timeout))


class DeadlineHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = DeadlineHTTPSConnection

    def _get_conn(self, timeout: float | None = None) -> Any:
        return _lent(super()._get_conn(timeout))


POOL_CLASSES: dict[str, type[HTTPConnectionPool]] = {"http": DeadlineHTTPPool, "https": DeadlineHTTPSPool}


class DeadlineAdapter(HTTPAdapter):
    """An ``HTTPAdapter`` whose connections the current deadline scope cuts."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = POOL_CLASSES


def watch(session: requests.Session) -> requests.Session:
    """Make the connections of ``session``'s HTTP adapters (whatever their
    class: requests-hardened's keeps its address filter) cuttable by the
    current deadline scope. Before its first request."""
    for adapter in session.adapters.values():
        if isinstance(adapter, HTTPAdapter):
            adapter.poolmanager.pool_classes_by_scheme = POOL_CLASSES
    return session


def session() -> requests.Session:
    """A ``requests.Session`` whose connections the current deadline scope cuts."""
    fresh = requests.Session()
    for prefix in ("https://", "http://"):
        fresh.mount(prefix, DeadlineAdapter())
    return fresh
