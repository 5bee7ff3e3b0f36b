"""How the back office shows dates (issue 15): ``dd/mm/aaaa HH:MM:SS`` in
America/Sao_Paulo on every list, detail and title. Django's own pt_BR
formats spell the month out and stop at the minute; staff compare events to
the second. Input formats stay Django's (they already take dd/mm/aaaa)."""

DATE_FORMAT = "d/m/Y"
SHORT_DATE_FORMAT = "d/m/Y"
TIME_FORMAT = "H:i:s"
DATETIME_FORMAT = "d/m/Y H:i:s"
SHORT_DATETIME_FORMAT = "d/m/Y H:i:s"
