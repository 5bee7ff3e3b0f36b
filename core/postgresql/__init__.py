"""PostgreSQL backend: Django's, with a pool checkout that costs no round trip (base.py)."""
