"""Split by concern (issue 30): connections around outbound calls and read
snapshots are :mod:`core.connections`, compiled statements :mod:`core.sql`.

Only ``payments.services`` still imports from here, a part of issue 30
another change owns: its import moves to :mod:`core.sql` when both land,
and this module goes with it.
"""

from core.sql import insert_together

__all__ = ["insert_together"]
