"""What a PSP says when it says no: RFC 7807 problems as the API Pix writes
them, the HTTP errors that carry them, and the JSON readers the client shares.

A problem (or any other error status) maps to :class:`AcquirerDeclined` (4xx
refusals) or :class:`AcquirerUnavailable` (5xx, 429, connection; 504 and read
timeouts are :class:`AcquirerTimeout`: the PSP may have acted). JSON errors in
a PSP's own dialect (Efí's ``{"nome", "mensagem"}``) are quoted in the
message (:func:`plain_error`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NoReturn

from acquirers.adapters.base import (
    AcquirerDeclined,
    AcquirerTimeout,
    AcquirerUnavailable,
    InvalidResponse,
    RecordNotFound,
)


@dataclass(frozen=True)
class Problem:
    """An RFC 7807 problem as the API Pix writes it."""

    type: str = ""
    title: str = ""
    status: int | None = None
    detail: str = ""
    correlation_id: str = ""
    violations: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """The last segment of ``type`` (``CobOperacaoInvalida``)."""
        return self.type.rstrip("/").rsplit("/", 1)[-1]

    def describe(self) -> str:
        text = " - ".join(p for p in (self.kind, self.title, self.detail) if p)
        if self.violations:
            text += " [" + "; ".join(self.violations) + "]"
        if self.correlation_id:
            text += f" (correlationId {self.correlation_id})"
        return text


class _HttpErrorMixin:
    status: int | None
    problem: Problem | None

    def _init_http(self, status: int | None, problem: Problem | None) -> None:
        self.status = status
        self.problem = problem


class HttpDeclined(AcquirerDeclined, _HttpErrorMixin):
    """The PSP refused the call (a 4xx): a definitive answer."""

    def __init__(self, message: str, *, status: int | None = None, problem: Problem | None = None) -> None:
        super().__init__(message)
        self._init_http(status, problem)


class HttpNotFound(HttpDeclined, RecordNotFound):
    """404: the PSP does not know the resource (yet)."""


class HttpUnavailable(AcquirerUnavailable, _HttpErrorMixin):
    """Connection failure, 5xx, 429, or credentials the PSP refuses.
    ``retryable`` is False when trying again cannot help (TLS certificates)."""

    def __init__(
        self, message: str, *, status: int | None = None, problem: Problem | None = None, retryable: bool = True
    ) -> None:
        super().__init__(message)
        self._init_http(status, problem)
        self.retryable = retryable


class HttpTimeout(AcquirerTimeout, _HttpErrorMixin):
    """No complete answer in time, or a 504: the PSP may have acted."""

    def __init__(self, message: str, *, status: int | None = None, problem: Problem | None = None) -> None:
        super().__init__(message)
        self._init_http(status, problem)


def raise_for_status(where: str, status: int, body: bytes) -> NoReturn:
    """Raise the error an answer with a non-2xx ``status`` means (``where``:
    method and path, for the message)."""
    if 300 <= status < 400:
        raise InvalidResponse(f"{where}: HTTP {status} redirect refused")
    problem = parse_problem(body)
    text = f"{where}: HTTP {status}" + (f" {problem.describe()}" if problem else plain_error(body))
    if status == 404:
        raise HttpNotFound(text, status=status, problem=problem)
    if status == 504 or status == 408:
        raise HttpTimeout(text, status=status, problem=problem)
    if status in (401, 425, 429) or status >= 500:
        raise HttpUnavailable(text, status=status, problem=problem)
    if 400 <= status < 500:
        raise HttpDeclined(text, status=status, problem=problem)
    raise InvalidResponse(f"{where}: unexpected HTTP {status}")


def json_dict(body: bytes) -> dict[str, Any] | None:
    """``body`` as a JSON object; None when it is not JSON or not an object."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def json_object(body: bytes, where: str) -> dict[str, Any]:
    """``body`` as a JSON object; :class:`InvalidResponse` when it is not one."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise InvalidResponse(f"{where}: answer is not JSON") from None
    if not isinstance(data, dict):
        raise InvalidResponse(f"{where}: answer is not a JSON object")
    return data


def parse_problem(body: bytes) -> Problem | None:
    """The RFC 7807 problem in ``body``, or None when it is not one."""
    data = json_dict(body)
    if data is None or not ({"type", "title"} & data.keys()):
        return None
    violations: list[str] = []
    for item in data.get("violacoes") or []:
        if isinstance(item, dict):
            reason, prop = str(item.get("razao", "")), str(item.get("propriedade", ""))
            violations.append(f"{prop}: {reason}" if prop else reason)
    status = data.get("status")
    return Problem(
        type=str(data.get("type", ""))[:200],
        title=str(data.get("title", ""))[:200],
        status=status if isinstance(status, int) else None,
        detail=str(data.get("detail", ""))[:500],
        correlation_id=str(data.get("correlationId", ""))[:100],
        violations=tuple(v[:200] for v in violations[:10]),
    )


#: Fields of JSON errors that are not RFC 7807 (a PSP's own dialect, e.g. Efí's
#: ``{"nome", "mensagem"}``), quoted in error messages so attempts say why.
PLAIN_ERROR_FIELDS = ("nome", "mensagem", "error", "error_description", "code", "message")


def plain_error(body: bytes) -> str:
    """`` name - message`` of a JSON error object in a non-RFC 7807 dialect;
    empty when the body is not one (the status alone is then the message)."""
    data = json_dict(body)
    if data is None:
        return ""
    parts = [str(data[k])[:200] for k in PLAIN_ERROR_FIELDS if isinstance(data.get(k), str | int) and data[k] != ""]
    return (" " + " - ".join(parts)) if parts else ""
