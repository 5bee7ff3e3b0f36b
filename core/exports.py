"""Streamed CSV files (the API's exports and the back office's "Exportar
CSV") that pin nothing while a client reads them, and whose cells are never
formulas.

- The thread's pooled database connection is given back
  (:func:`core.connections.release_connections`) before every write to the client
  (:class:`ExportStream`). A client that stops reading holds a thread, never
  a connection: with the pool full of stalled exports, every other tenant's
  request waited out the pool's timeout and got a 500. The rows are read
  either in keyset batches between the writes (:func:`keyset_batches`: one
  short query per batch, no server-side cursor), for the API's files, whose
  order (newest first, by creation) no change to a record can move; or all
  at once beforehand into a spooled file (:func:`spool`), for the back
  office's, whose staff sort on any column, one that may change while the
  file is read (a status, a payment time): batches would skip or repeat a
  row that moved past the last one read, one snapshot cannot.
- A write that blocks longer than ``EXPORT_SEND_TIMEOUT`` (a client that
  stopped reading) fails and the connection is cut, which frees the thread
  (gunicorn: the socket's timeout, see :class:`ExportStream`).
- Every cell of text starting with ``=``, ``+``, ``-``, ``@``, a tab or a
  carriage return gets a leading ``'`` (:func:`csv_cell`, OWASP's CSV
  injection guidance): keys, names, references and reasons come from the
  API's clients, and a spreadsheet runs such a cell as a formula.
"""

from __future__ import annotations

import csv
import logging
import socket
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from typing import IO, Any, TypeVar

from django.conf import settings
from django.core.exceptions import FieldDoesNotExist
from django.db.models import Expression, F, Model, Q, QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.db.models.expressions import OrderBy

from core.connections import release_connections
from core.slots import Slot

logger = logging.getLogger(__name__)

#: What a spreadsheet reads as the start of a formula (OWASP, CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: Bytes handed to the server per write: few writes (each a chunk of the
#: chunked body), and a bounded buffer.
CHUNK_BYTES = 64 * 1024
#: Bytes of a spooled file (:func:`spool`) kept in memory; past them it is on disk.
SPOOL_MEMORY_BYTES = 4 * 1024 * 1024


class FormattedNumber(str):
    """Text the service wrote from a number (``-1234,56`` in reais, as a
    pt-BR spreadsheet reads it): a number, never prefixed by :func:`csv_cell`."""

    __slots__ = ()


def csv_cell(value: Any) -> Any:
    """A cell as written: numbers as they are (a negative amount stays a
    number); every other value is text, and text a spreadsheet would run as
    a formula gets a leading ``'``. Text is anything but a number: a
    ``+5511…`` phone key or a ``-`` description is the client's and is
    prefixed; what the service itself formats from a number says so
    (:class:`FormattedNumber`)."""
    if value is None:
        return ""
    if isinstance(value, int | float | Decimal | FormattedNumber) and not isinstance(value, bool):
        return value
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class _Echo:
    """csv.writer's file: hands each written line back instead of keeping it."""

    def write(self, value: str) -> str:
        return value


def csv_lines(header: Sequence[str], rows: Iterable[Sequence[Any]], *, bom: bool = False) -> Iterator[str]:
    """``;``-separated CSV, one line at a time: the header, then each row as
    it is read (every cell through :func:`csv_cell`); nothing is kept.
    ``bom``: a UTF-8 byte order mark first, which pt-BR spreadsheets need to
    read accents (the back office's exports; the API's files are ASCII)."""
    writer = csv.writer(_Echo(), delimiter=";")
    yield ("\ufeff" if bom else "") + writer.writerow(header)
    for row in rows:
        yield writer.writerow([csv_cell(value) for value in row])


# ---- keyset batches

M = TypeVar("M", bound=Model)


def _named(model: type[Model], name: str, descending: bool) -> list[tuple[str, bool]]:
    """The columns an ordering by ``name`` sorts on, as Django expands it: a
    relation (``account``) by its model's own ordering (``-created_at``:
    ``account__created_at`` reversed), or by its key when that has none."""
    meta = model._meta
    parts = name.split(LOOKUP_SEP)
    for n, part in enumerate(parts):
        try:
            field = meta.pk if part == "pk" else meta.get_field(part)
        except FieldDoesNotExist:
            return [(name, descending)]  # an annotation of the queryset
        assert field is not None
        related = field.related_model if field.is_relation else None
        if not isinstance(related, type):
            return [(name, descending)]
        if n < len(parts) - 1:
            meta = related._meta
            continue
        if part == getattr(field, "attname", None) or not related._meta.ordering:
            return [(name, descending)]
        expanded: list[tuple[str, bool]] = []
        for item in related._meta.ordering:
            if not isinstance(item, str):
                raise ValueError(f"no keyset over {related.__name__}'s ordering {item!r}")
            for sub, sub_descending in _named(related, item.lstrip("-"), item.startswith("-")):
                expanded.append((f"{name}{LOOKUP_SEP}{sub}", descending != sub_descending))
        return expanded
    return [(name, descending)]


def _terms(queryset: QuerySet[Any], order: Sequence[Any]) -> list[tuple[Any, bool, bool]]:
    """``order`` (names, ``-names``, expressions, ``OrderBy``) as (expression,
    descending, nulls first), a unique last term (the primary key) added
    when it is missing, as the admin's changelist adds it."""
    meta = queryset.model._meta
    assert meta.pk is not None
    pk_names = {"pk", meta.pk.name, meta.pk.attname}
    terms: list[tuple[Any, bool, bool]] = []
    for term in order:
        if isinstance(term, str):
            if term == "?" or "." in term:
                raise ValueError(f"no keyset over the ordering {term!r}")
            for name, descending in _named(queryset.model, term.lstrip("-"), term.startswith("-")):
                # PostgreSQL puts NULL last going up and first going down.
                terms.append((F(name), descending, descending))
            continue
        if isinstance(term, OrderBy):
            descending, expression, nulls_first = term.descending, term.expression, term.nulls_first
            if term.nulls_last:
                nulls_first = False
        elif isinstance(term, Expression | F):
            descending, expression, nulls_first = False, term, None
        else:
            raise ValueError(f"no keyset over the ordering {term!r}")
        terms.append((expression, descending, descending if nulls_first is None else nulls_first))
    last = terms[-1][0] if terms else None
    if not (isinstance(last, F) and getattr(last, "name", None) in pk_names):
        terms.append((F("pk"), True, True))
    return terms


def _after(name: str, value: Any, descending: bool, nulls_first: bool) -> Q:
    """The rows past ``value`` of one ordering term."""
    if value is None:
        return Q(**{f"{name}__isnull": False}) if nulls_first else Q(pk__in=[])
    past = Q(**{f"{name}__{'lt' if descending else 'gt'}": value})
    return past if nulls_first else past | Q(**{f"{name}__isnull": True})


def _at(name: str, value: Any) -> Q:
    return Q(**{f"{name}__isnull": True}) if value is None else Q(**{name: value})


def keyset_batches(queryset: QuerySet[M], *, size: int, order: Sequence[Any] | None = None) -> Iterator[list[M]]:
    """``queryset``'s rows in ``order`` (its own ordering when not given), as
    lists of at most ``size``: each list one query that starts past the
    last row of the previous one (keyset pagination: no OFFSET, no cursor
    left open), so the caller may give its connection back between them.
    Each batch reads the database as it is then; the ordering's last term is
    the primary key (added when missing), so no row is read twice or
    skipped for a tie. A row whose sort columns change between two batches
    may be skipped or read twice: keyset an order no update moves (the
    API's ``-created_at, -id``), or read a snapshot (:func:`spool`). Only a
    descending first term gets its index-range bound (every caller's order
    is newest first); an ascending one is correct but scans from its start
    on every batch."""
    if order is None:
        order = list(queryset.query.order_by or queryset.model._meta.ordering or [])
    terms = _terms(queryset, order)
    names = [f"keyset_{n}" for n in range(len(terms))]
    keyed = queryset.annotate(**{name: expression for name, (expression, _, _) in zip(names, terms, strict=True)})
    keyed = keyed.order_by(
        *(
            # NULLS FIRST/LAST said only where it is not PostgreSQL's default,
            # so that an index on the column still yields the order.
            OrderBy(
                F(name),
                descending=descending,
                nulls_first=True if nulls_first and not descending else None,
                nulls_last=True if descending and not nulls_first else None,
            )
            for name, (_, descending, nulls_first) in zip(names, terms, strict=True)
        )
    )
    last: list[Any] | None = None
    while True:
        page = keyed
        if last is not None:
            past = Q(pk__in=[])
            for n, (name, (_, descending, nulls_first)) in enumerate(zip(names, terms, strict=True)):
                ties = Q(*(_at(names[m], last[m]) for m in range(n)))
                past |= ties & _after(name, last[n], descending, nulls_first)
            page = page.filter(past)
            first_descending, first_nulls_first = terms[0][1], terms[0][2]
            if last[0] is not None and first_nulls_first:
                # Implied by the above; said apart so an index on the first
                # term starts its scan at the last row instead of the top.
                page = page.filter(**{f"{names[0]}__{'lte' if first_descending else 'gte'}": last[0]})
        rows = list(page[:size])
        if rows:
            yield rows
        if len(rows) < size:
            return
        last = [getattr(rows[-1], name) for name in names]


# ---- the stream


#: The shortest send timeout: none at all would let a stalled export hold its
#: thread forever while its slot's lease ends (the settings refuse less).
MIN_SEND_TIMEOUT = 1.0


def send_timeout_seconds() -> float:
    return max(MIN_SEND_TIMEOUT, float(settings.EXPORT_SEND_TIMEOUT))


def export_lease_seconds() -> float:
    """How long an export's slot outlives its last renewal: past one blocked
    write (the send timeout), a batch's wait for a connection and query, and
    the renewal's own period, with a margin."""
    return 3 * max(send_timeout_seconds(), 10.0) + 60.0


def _line_chunks(lines: Iterator[str]) -> Iterator[bytes]:
    """``lines`` encoded (UTF-8) in chunks of about :data:`CHUNK_BYTES`, the
    first one the header and at least one row."""
    parts: list[str] = []
    size = 0
    least = 2
    for line in lines:
        parts.append(line)
        size += len(line)
        if size >= CHUNK_BYTES and len(parts) >= least:
            yield "".join(parts).encode()
            parts, size, least = [], 0, 1
    if parts:
        yield "".join(parts).encode()


def spool(lines: Iterable[str], *, memory_bytes: int = SPOOL_MEMORY_BYTES) -> tempfile.SpooledTemporaryFile[bytes]:
    """``lines`` written (UTF-8) to a temporary file, rewound: in memory up to
    ``memory_bytes``, on disk past it (in ``TMPDIR``, gone once closed), so a
    file of any size costs bounded memory. Closed if writing fails."""
    # Not a with block: the file outlives this function, closed by its reader.
    file: tempfile.SpooledTemporaryFile[bytes] = tempfile.SpooledTemporaryFile(max_size=memory_bytes)  # noqa: SIM115
    try:
        for chunk in _line_chunks(iter(lines)):
            file.write(chunk)
        file.seek(0)
    except BaseException:
        file.close()
        raise
    return file


class ExportStream:
    """The body of a streamed export: ``chunks`` of bytes, made by
    :meth:`of_lines` (CSV lines read as they are sent) or :meth:`of_file` (a
    file spooled beforehand). Before every chunk goes to the server the
    thread's database connections are given back, and ``slot`` (the
    credential's export slot) has its lease renewed now and then; the slot is
    released and the source closed when the stream ends and on :meth:`close`,
    which the server calls however the response ends (finished, client gone,
    send timeout, error).

    ``sock``: the client's socket when the server hands it over (gunicorn's
    ``environ["gunicorn.socket"]``): its timeout becomes the send timeout, so
    a write the client does not take within ``EXPORT_SEND_TIMEOUT`` raises
    and the server drops the connection. gunicorn's gthread worker sets its
    sockets back to blocking before each request, so the next request on the
    connection is not affected.
    """

    def __init__(
        self, chunks: Iterator[bytes], *, source: Any = None, slot: Slot | None = None, sock: Any = None
    ) -> None:
        self._chunks = chunks
        self._source = source
        self._slot = slot
        self._sock = sock
        self._pending: bytes | None = None
        self._started = False
        self._finished = False

    @classmethod
    def of_lines(cls, lines: Iterator[str], *, slot: Slot | None = None, sock: Any = None) -> ExportStream:
        """``lines`` sent as they are made (the API's exports: rows read in
        keyset batches between the writes)."""
        return cls(_line_chunks(lines), source=lines, slot=slot, sock=sock)

    @classmethod
    def of_file(cls, file: IO[bytes], *, sock: Any = None) -> ExportStream:
        """A file written beforehand (:func:`spool`), read in chunks and
        closed (deleted) when the stream ends."""
        size = CHUNK_BYTES
        return cls(iter(lambda: file.read(size), b""), source=file, sock=sock)

    def start(self) -> None:
        """Read the first chunk now, the header and at least one row (within
        the view: the first batch's errors are the API's error envelopes,
        not a broken 200)."""
        self._pending = next(self._chunks, None)

    def __iter__(self) -> ExportStream:
        return self

    def __next__(self) -> bytes:
        if not self._started:
            self._started = True
            self._set_send_timeout()
        chunk, self._pending = (self._pending, None) if self._pending is not None else (next(self._chunks, None), None)
        if chunk is None:
            self._finished = True
            self.close()
            raise StopIteration
        release_connections(before="writing an export to its client")
        if self._slot is not None:
            self._slot.renew_if_due(every=send_timeout_seconds())
        return chunk

    def _set_send_timeout(self) -> None:
        if isinstance(self._sock, socket.socket):
            self._sock.settimeout(send_timeout_seconds())

    def close(self) -> None:
        """End the stream: the rows left unread, the source closed, the slot
        given back. Idempotent."""
        if self._slot is not None:
            self._slot.release()
        for source in (self._chunks, self._source):
            close = getattr(source, "close", None)
            if close is not None:
                close()
        if self._started and not self._finished:
            # The client went away or stopped reading for EXPORT_SEND_TIMEOUT
            # (gunicorn logs the cut: core.gunicorn_logging), or a batch failed.
            logger.info("export ended before its last row")
            self._finished = True
