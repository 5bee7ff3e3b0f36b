"""The account API's CSV exports (issue 16): the statement, the charges and
the withdrawals as streamed files. One view class and one schema helper
for all three, so that they refuse the same way and stream the same way:

- the listing's filterset and its 422s (:func:`api.listing.valid_filterset`);
- a period of at most 31 days, both bounds required (``created_at_start``,
  ``created_at_end``, America/Sao_Paulo, inclusive), or a 422 on the field;
- rows read in keyset batches of :data:`CSV_CHUNK`, the database connection
  given back before every write to the client, a send timeout, and cells
  that are never formulas (:mod:`core.exports`): a month of a million
  records never sits in memory, and a client that stops reading holds no
  pooled connection;
- at most ``API_EXPORTS_PER_CREDENTIAL`` exports of one credential at once
  (:func:`export_slot`), or a 429.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, TypeVar

import django_filters
from django.conf import settings
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.request import Request

from accounts.models import ApiCredential
from api.base import AUTH_ERRORS, VALIDATION_ERROR, AccountAPIView, error_examples, responses
from api.listing import ORDER, require_all, valid_filterset
from api.schema import TIMESTAMP_SCHEMA
from core.exceptions import THROTTLED_MESSAGE, TOO_MANY_EXPORTS_MESSAGE, TooManyExports, ValidationFailed
from core.exports import ExportStream, csv_lines, export_lease_seconds, keyset_batches
from core.slots import Slot, slot_take

#: The longest period of an export (created_at_end - created_at_start).
CSV_MAX_PERIOD = dt.timedelta(days=31)
#: Rows per keyset batch (one query each, the connection given back between them).
CSV_CHUNK = 2000
#: The Redis name of the per-credential export slots (core/slots.py).
EXPORT_SLOTS = "exports"
PERIOD = ("created_at_start", "created_at_end")
PERIOD_DESCRIPTION = "`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive; at most 31 days apart."


def export_period(
    filterset: django_filters.FilterSet, *, required: str, too_long: str
) -> tuple[dt.datetime, dt.datetime]:
    """The bound filterset's period; :class:`ValidationFailed` naming each
    missing bound (``required``) or ``created_at_end`` (``too_long``)."""
    start, end = require_all(filterset.form.cleaned_data, PERIOD, required)
    if end - start > CSV_MAX_PERIOD:
        raise ValidationFailed({"created_at_end": [too_long]})
    return start, end


def export_slot(request: Request) -> Slot:
    """One of the credential's ``API_EXPORTS_PER_CREDENTIAL`` export slots,
    held until its export's response ends; :class:`TooManyExports` (429)
    when all are held. By public key, as the rate limit counts (ids repeat
    across databases sharing one Redis)."""
    credential = request.auth
    assert isinstance(credential, ApiCredential)
    slot = slot_take(
        EXPORT_SLOTS,
        credential.public_key,
        cap=settings.API_EXPORTS_PER_CREDENTIAL,
        lease_seconds=export_lease_seconds(),
    )
    if slot is None:
        raise TooManyExports()
    return slot


# The GET of an export. Subclasses set the filterset of the listing they
# export, the file's ``header`` and name, the two period messages, and
# ``export_queryset``; rows are the listing's records as ``item_serializer``
# renders them in JSON (same names, centavos, America/Sao_Paulo times), or
# ``export_rows`` when a record's JSON is not flat. Documented by
# ``csv_export_schema``. (Comments, not docstrings: drf-spectacular shows a
# view's inherited docstrings as its description.)
class FileDownloadApi(AccountAPIView):
    # A file (CSV, PDF), not a renderer's: any Accept is served, and errors
    # are the API's JSON envelopes.
    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        return super().perform_content_negotiation(request, force=True)


class CsvExportApi(FileDownloadApi):
    filterset_class: ClassVar[type[django_filters.FilterSet]]
    item_serializer: ClassVar[type[serializers.BaseSerializer[Any]] | None] = None
    header: ClassVar[Sequence[str]]
    #: The file's name before its period: ``<filename>-20250301-20250331.csv``.
    filename: ClassVar[str]
    order: ClassVar[Sequence[str]] = ORDER
    period_required: ClassVar[str]
    period_too_long: ClassVar[str]

    def export_queryset(self, request: Request) -> QuerySet[Any]:
        # The account's records; the filters narrow them.
        raise NotImplementedError

    def export_rows(self, records: Iterator[Any]) -> Iterator[Sequence[Any]]:
        assert self.item_serializer is not None
        render = self.item_serializer().to_representation
        for record in records:
            item = render(record)
            yield ["" if item[name] is None else item[name] for name in self.header]

    def get(self, request: Request) -> StreamingHttpResponse:
        filterset = valid_filterset(self.filterset_class, self.export_queryset(request), request.query_params)
        start, end = export_period(filterset, required=self.period_required, too_long=self.period_too_long)
        records = itertools.chain.from_iterable(keyset_batches(filterset.qs, order=self.order, size=CSV_CHUNK))
        slot = export_slot(request)
        stream = ExportStream.of_lines(
            csv_lines(self.header, self.export_rows(records)), slot=slot, sock=request.META.get("gunicorn.socket")
        )
        try:
            stream.start()
        except BaseException:
            stream.close()
            raise
        response = StreamingHttpResponse(stream, content_type="text/csv; charset=utf-8")
        period = f"{start:%Y%m%d}-{end:%Y%m%d}"  # Sao Paulo times, as given
        response["Content-Disposition"] = f'attachment; filename="{self.filename}-{period}.csv"'
        response["Cache-Control"] = "no-store"
        return response


ExportView = TypeVar("ExportView", bound=CsvExportApi)


def period_parameters() -> list[OpenApiParameter]:
    return [
        OpenApiParameter(name, dict(TIMESTAMP_SCHEMA), required=True, description=PERIOD_DESCRIPTION) for name in PERIOD
    ]


def csv_export_schema(
    *,
    header: Sequence[str],
    example: Sequence[Sequence[Any]],
    filters: Sequence[OpenApiParameter],
    what: str,
    credentials: str,
    **operation: Any,
) -> Callable[[type[ExportView]], type[ExportView]]:
    """Class decorator: the OpenAPI operation of a :class:`CsvExportApi`'s
    GET. ``filters``: the listing's, but its period (required here) and
    pages; ``example``: rows of the example file; ``what``: the rows, for
    the description ("The statement's entries"); ``operation`` as for
    ``extend_schema`` (tags, summary, operation_id)."""
    file = "".join(csv_lines(header, example))
    described = (
        f"{what} and filters as a streamed CSV file: `;`-separated, UTF-8, a header row "
        f"(`{';'.join(header)}`), newest first, amounts in centavos, times `YYYY-MM-DD HH:mm:ss` in "
        "America/Sao_Paulo. `created_at_start` and `created_at_end` are required and at most 31 days apart "
        "(422 otherwise). Text cells starting with `=`, `+`, `-`, `@`, a tab or a carriage return get a "
        "leading `'` (never run as formulas); numbers are written as they are. At most "
        "`API_EXPORTS_PER_CREDENTIAL` exports of one credential at once (429 past it); a client that takes "
        f"nothing for `EXPORT_SEND_TIMEOUT` seconds is cut. Credential {credentials}."
    )
    answers = responses(
        {
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR,
                description="The CSV file, streamed.",
                examples=[OpenApiExample("CSV file", value=file, media_type="text/csv")],
            )
        },
        (422, VALIDATION_ERROR),
        (
            429,
            error_examples(
                f"{AUTH_ERRORS[429].description} Or this credential already has as many exports being sent "
                "as `API_EXPORTS_PER_CREDENTIAL` allows: one must end first.",
                {"Rate limit": THROTTLED_MESSAGE, "Exports at once": TOO_MANY_EXPORTS_MESSAGE},
            ),
        ),
    )
    names = {p.name for p in filters}
    if names & {*PERIOD, "page", "per_page"}:
        raise ValueError(f"an export's filters are given without its period and pages: {sorted(names)}")
    get = extend_schema(
        description=described, parameters=[*period_parameters(), *filters], responses=answers, **operation
    )

    def attach(view: type[ExportView]) -> type[ExportView]:
        return extend_schema_view(get=get)(view)

    return attach


def without(parameters: Sequence[OpenApiParameter], *names: str) -> list[OpenApiParameter]:
    """``parameters`` but those named (a listing's, for its export)."""
    return [p for p in parameters if p.name not in names]
