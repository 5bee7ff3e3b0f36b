"""Content negotiation without parsing the common ``Accept`` headers.

Every JSON view has one renderer, and almost every client sends no
``Accept``, ``*/*`` or ``application/json``: for those, DRF's negotiation
(parse the header, order by precedence, match each renderer) always ends in
the JSON renderer with ``application/json``, and cost about 3 % of a read by
id in py-spy under wrk. Anything else (another media type, parameters, a view
with several renderers such as the QR code's) goes through DRF's own
negotiation unchanged, 406 included."""

from __future__ import annotations

from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation

#: Accept headers DRF answers with the JSON renderer and plain ``application/json``.
#: (Not the empty header: DRF refuses it with a 406, and so does this.)
_PLAIN = frozenset({None, "*/*", "application/json"})


class JSONFirstNegotiation(DefaultContentNegotiation):
    def select_renderer(self, request: Any, renderers: Any, format_suffix: Any = None) -> Any:
        if (
            format_suffix is None
            and len(renderers) == 1
            and renderers[0].media_type == "application/json"
            and request.META.get("HTTP_ACCEPT") in _PLAIN
        ):
            return renderers[0], "application/json"
        return super().select_renderer(request, renderers, format_suffix)
