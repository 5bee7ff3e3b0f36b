"""Benchmark: GET /api/transactions with every filter on an account holding
1,000,000 charges, against gunicorn as deployed (issue #6).

    .venv/bin/python -m bench.listing [--rows 1000000] [--seconds 3] [--quick] [--total 100]
                                      [--concurrency 16] [--engines auto] [--plans] [--explain-only]

The fixture (one big account, four small ones beside it so the account
filter matters) is written once with a binary COPY and reused while its
marker row in ``bench_listing_fixture`` matches the requested size. For every
scenario the exact SQL the view sends (captured from an in-process request)
is timed and explained with ``EXPLAIN (ANALYZE, BUFFERS)``; a sequential
scan of ``payments_charge`` fails the run. Then each scenario is loaded
through gunicorn by wrk (bench/measure.py), a ratio to the anchor
(bench/anchor/, an anchor round every BLOCK scenarios) and beside a second
ceiling: the same SQL alone on PostgreSQL at the same concurrency (Python
closed loop: no HTTP to script). ``run()`` returns the rows for
``python -m bench``; ``main()`` prints them as one table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import random
import string
import time
import uuid
import zoneinfo
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import requests

from bench import measure, wrk
from bench.harness import LoadResult, bench_env, machine_lines, run_load, setup_django

SAO_PAULO = zoneinfo.ZoneInfo("America/Sao_Paulo")
URL = "/api/transactions"
TABLE = "payments_charge"
#: Bump when the generator changes: an older fixture is then rebuilt.
FIXTURE_VERSION = 1
ROWS = 1_000_000
#: Calls of the SQL-alone ceiling per scenario (fewer if SECONDS run out first).
TOTAL = 100
#: Of the SQL-alone ceiling: the API's wrk connections.
CONCURRENCY = measure.CONNECTIONS
#: One wrk round per scenario, this long (25 scenarios: the whole listing stays within ~3 minutes).
SECONDS = 3.0
#: A scenario matching at most this many charges is "selective": held to
#: SELECTIVE_TARGET of the anchor (issue 14). Past it the exact total (a
#: COUNT over every match, index-only) bounds the request: its ratio to the
#: SQL alone is what to read.
SELECTIVE = 50_000
SELECTIVE_TARGET = 0.5
#: An anchor round every this many scenarios.
BLOCK = 5
#: How many of a scenario's parameter sets wrk cycles through (the id and e2e_id lookups vary).
ROTATION = 200
BIG_REF = "bench-listing"
OTHER_REFS = tuple(f"bench-listing-{n}" for n in range(1, 5))
OTHER_ROWS = 25_000
HISTORY = dt.timedelta(days=180)
EXPIRY = dt.timedelta(hours=1)
FEE_BPS = 199
ISPB = "99999008"

#: Names and types of the copied columns: a binary COPY costs the server
#: half the parsing of a text one.
CHARGE_COLUMNS = (
    ("id", "uuid"), ("account_id", "uuid"), ("payment_method", "varchar"), ("amount", "int8"),
    ("platform_tax", "int8"), ("liquid_amount", "int8"), ("status", "varchar"), ("version", "int4"),
    ("txid", "varchar"), ("emv", "varchar"), ("acquirer_id", "int8"), ("provider_charge_id", "varchar"),
    ("e2e_id", "varchar"), ("buyer_name", "varchar"), ("buyer_document", "varchar"), ("buyer_phone", "varchar"),
    ("buyer_address", "jsonb"), ("postback_url", "varchar"), ("metadata", "jsonb"), ("expires_at", "timestamptz"),
    ("paid_at", "timestamptz"), ("created_at", "timestamptz"), ("updated_at", "timestamptz"),
)  # fmt: skip

# Settled history (older than the expiry): most charges are paid or expired.
SETTLED = (("paid", 62), ("canceled", 28), ("failed", 4), ("refunded", 4), ("chargeback", 2))
# The last hour: nothing has expired yet.
RECENT = (("pending", 70), ("paid", 25), ("failed", 5))
VERSION = {"pending": 0, "paid": 1, "canceled": 1, "failed": 1, "refunded": 2, "chargeback": 2}
FIRST_NAMES = ("Ana", "Bruno", "Carla", "Diego", "Elisa", "Fábio", "Gabriela", "Heitor", "Isabela", "João")
LAST_NAMES = ("Silva", "Santos", "Oliveira", "Souza", "Lima", "Pereira", "Costa", "Almeida", "Ferreira", "Rocha")
CITIES = (("São Paulo", "SP", "01310100"), ("Rio de Janeiro", "RJ", "20040002"), ("Belo Horizonte", "MG", "30130010"))


@dataclass
class Fixture:
    account_id: uuid.UUID
    rows: int
    generated_at: dt.datetime
    copy_seconds: float
    reused: bool


@dataclass
class PlanNode:
    """One plan node, flattened: what it scanned and what it cost."""

    node: str
    relation: str | None
    index: str | None
    rows: int
    heap_fetches: int | None
    filtered: int = 0


@dataclass
class QueryPlan:
    kind: str  # "count" or "page"
    table: str
    sql: str
    ms: float | None
    buffers: int
    nodes: list[PlanNode]
    text: str = ""

    @property
    def seq_scan(self) -> bool:
        return any(n.node == "Seq Scan" and n.relation == self.table for n in self.nodes)

    @property
    def uses_index(self) -> bool:
        # The listing queries read one table: every index in the plan is one of its own.
        return any(n.index for n in self.nodes)

    def summary(self) -> str:
        """Time, buffers touched, and the scans and sorts (what decides the cost)."""
        shown = [n for n in self.nodes if "Scan" in n.node or n.node == "Sort"]
        timing = f"{self.ms:7.1f} ms" if self.ms is not None else " " * 10
        return f"{self.kind:<5} {timing} {self.buffers:>6} buffers  {', '.join(map(_node_label, shown))}"


@dataclass
class Scenario:
    name: str
    params: Callable[[int], dict[str, Any]]
    total: int = 0
    queries: int = 0
    plans: list[QueryPlan] = field(default_factory=list)


def _node_label(node: PlanNode) -> str:
    if node.node == "Sort":
        return f"Sort ({node.rows:,} in)"
    label = node.node.replace("Index Only Scan", "Index Only").replace("Index Scan", "Index")
    label += f" {node.index or node.relation}"
    label += f" ({node.rows:,}"
    if node.filtered:
        label += f", {node.filtered:,} filtered out"
    if node.heap_fetches is not None:
        label += f", heap {node.heap_fetches:,}"
    return label + ")"


# --------------------------------------------------------------------------- rows


def _cpf(base: int) -> str:
    digits = [int(c) for c in f"{base:09d}"]
    for length in (9, 10):
        total = sum(d * w for d, w in zip(digits, range(length + 1, 1, -1), strict=True))
        digits.append((total * 10 % 11) % 10)
    return "".join(map(str, digits))


def _base36(number: int, width: int) -> str:
    alphabet = string.digits + string.ascii_uppercase
    out = ""
    while number:
        number, rest = divmod(number, 36)
        out = alphabet[rest] + out
    return out.rjust(width, "0")


def _json(text: str) -> Any:
    """JSON already written as text: the binary COPY must not encode it again."""
    from psycopg.types.json import Jsonb

    return Jsonb(text, dumps=str)


def _weighted(table: Sequence[tuple[str, int]]) -> list[str]:
    return [value for value, weight in table for _ in range(weight)]


def charge_rows(
    accounts: Sequence[tuple[uuid.UUID, int]], acquirers: Sequence[int], end: dt.datetime, seed: int = 1
) -> Iterator[tuple[Any, ...]]:
    """Charges of ``accounts`` (id, how many) over the ``HISTORY`` before
    ``end``, interleaved in time, oldest first, as production would have
    inserted them (physical order follows ``created_at``), in the order of
    ``CHARGE_COLUMNS``."""
    rng = random.Random(seed)
    owners = [account for account, count in accounts for _ in range(count)]
    rng.shuffle(owners)
    start = end - HISTORY
    slot = HISTORY / len(owners)
    settled, recent = _weighted(SETTLED), _weighted(RECENT)
    # Buyers come back: a pool of documents, not one per charge.
    documents = [_cpf(rng.randrange(10**8, 10**9)) for _ in range(20_000)]
    names = [f"{f} {m} {last}" for f in FIRST_NAMES for m in LAST_NAMES for last in LAST_NAMES]
    addresses = [
        _json(json.dumps({"buyer_city": c, "buyer_state": s, "buyer_zipcode": z, "buyer_number": "100"}))
        for c, s, z in CITIES
    ]
    no_json = _json("{}")
    acquirer_pick = [acquirers[0]] * 7 + [acquirers[1 % len(acquirers)]] * 2 + [acquirers[2 % len(acquirers)]]
    # The listing never reads the EMV; only its width matters (heap pages per
    # row), so it is the sandbox's code shape around the charge's txid, not a
    # freshly CRC'd BR Code (170 µs each: three minutes for a million).
    emv_head = "00020101021226780014br.gov.bcb.pix2556pix.sandbox.local/qr/v2/"
    emv_tail = "5802BR5918BENCH LISTING LTDA6009SAO PAULO62070503***6304"
    random_ = rng.random
    pending_since = end - EXPIRY
    n_names, n_documents = len(names), len(documents)
    for n, account in enumerate(owners):
        created = start + slot * (n + random_())
        status = (recent if created > pending_since else settled)[int(random_() * 100)]
        # Log-normal ticket around R$ 50, within the API's 100..300000 bounds.
        amount = min(300_000, max(100, int(math.exp(rng.gauss(math.log(5000), 1.0)))))
        tax = (amount * FEE_BPS + 5000) // 10_000
        charge_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        txid = charge_id.hex
        paid_at = e2e_id = None
        expires = created + EXPIRY
        updated = created
        if status in {"paid", "refunded", "chargeback"}:
            paid_at = created + dt.timedelta(seconds=min(3500.0, 5 + rng.expovariate(1 / 90)))
            e2e_id = f"E{ISPB}{paid_at:%Y%m%d%H%M}{_base36(n, 11)}"
            updated = paid_at if status == "paid" else paid_at + dt.timedelta(days=rng.randrange(1, 20))
            updated = min(updated, end)
        elif status == "canceled":
            updated = expires
        elif status == "failed":
            updated = created + dt.timedelta(seconds=3)
        amount_text = f"{amount // 100}.{amount % 100:02d}"
        emv = f"{emv_head}{txid}52040000530398654{len(amount_text):02d}{amount_text}{emv_tail}0000"
        yield (
            charge_id,
            account,
            "pix",
            amount,
            tax,
            amount - tax,
            status,
            VERSION[status],
            txid,
            emv,
            acquirer_pick[int(random_() * 10)],
            f"sbx_{txid}",
            e2e_id,
            names[int(random_() * n_names)],
            documents[int(random_() * n_documents)],
            f"119{10**7 + int(random_() * 9 * 10**7)}",
            addresses[int(random_() * 3)] if random_() < 0.4 else no_json,
            "https://loja.example.com.br/pix/postback" if random_() < 0.3 else "",
            _json(f'{{"order_id": "PED-{n}"}}') if random_() < 0.7 else no_json,
            expires,
            paid_at,
            created,
            updated,
        )


def copy_rows(cursor: Any, table: str, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]) -> None:
    """Binary COPY of ``rows`` into ``table`` on Django's ``cursor``."""
    names = ", ".join(name for name, _ in columns)
    # psycopg's own cursor: Django's wrapper has no copy().
    with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types([kind for _, kind in columns])
        for row in rows:
            copy.write_row(row)


# --------------------------------------------------------------------------- fixture


def _accounts() -> tuple[Any, list[Any]]:
    from accounts.models import Account
    from accounts.services import account_create

    def get(ref: str, name: str) -> Account:
        return Account.objects.filter(ref=ref).first() or account_create(
            name=name, ref=ref, status=Account.Status.APPROVED, cashin_fee_bps=FEE_BPS
        )

    return get(BIG_REF, "Bench Listing Ltda"), [get(ref, f"Bench Listing {ref[-1]}") for ref in OTHER_REFS]


def _vacuum() -> None:
    # VACUUM sets the visibility map, which index-only scans (the COUNT of
    # every listing) need to skip the table; autovacuum does the same in
    # production once inserts pass autovacuum_vacuum_insert_threshold. On a
    # reused fixture it only re-reads what changed since.
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {TABLE}")
    print(f"VACUUM (ANALYZE) {TABLE}: {time.perf_counter() - started:.1f} s", flush=True)


def fixture(rows: int) -> Fixture:
    """The big account with ``rows`` charges and four accounts of
    ``OTHER_ROWS``; reused when its marker says it is already there."""
    from django.db import connection, transaction

    from acquirers.services import acquirer_upsert

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS bench_listing_fixture (account_id uuid PRIMARY KEY, rows integer NOT NULL,"
            " version integer NOT NULL, generated_at timestamptz NOT NULL, copy_seconds double precision NOT NULL)"
        )
        # Cheap checks only: the marker row, its account, and the planner's
        # row estimate (a COUNT(*) here would cost what is being measured).
        cursor.execute(
            "SELECT f.account_id, f.rows, f.version, f.generated_at, f.copy_seconds,"
            " (SELECT reltuples FROM pg_class WHERE relname = %s)"
            " FROM bench_listing_fixture f JOIN accounts_account a ON a.id = f.account_id",
            [TABLE],
        )
        found = cursor.fetchone()
    if found and found[1] == rows and found[2] == FIXTURE_VERSION and found[5] >= rows:
        fx = Fixture(found[0], rows, found[3], found[4], reused=True)
        print(
            f"fixture reused: {rows:,} charges of {fx.generated_at:%Y-%m-%d %H:%M} (COPY took {fx.copy_seconds:.1f} s)"
        )
        _vacuum()
        return fx

    big, others = _accounts()
    acquirers = [
        acquirer_upsert(key=f"bench_listing_{n}", name=f"Bench Listing {n}", adapter="sandbox", options={})[0].pk
        for n in range(3)
    ]
    end = dt.datetime.now(dt.UTC).replace(microsecond=0)
    accounts = [(big.pk, rows), *((a.pk, OTHER_ROWS) for a in others)]
    print(f"generating {rows + OTHER_ROWS * len(others):,} charges with COPY ...", flush=True)
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE account_id = ANY(%s)", [[a for a, _ in accounts]])  # noqa: S608
        cursor.execute("DELETE FROM bench_listing_fixture")
        deleted = time.perf_counter() - started
        # Maintaining the table's indexes row by row (thirteen today, random
        # UUID and txid keys among them) is most of a COPY's time: ~50 µs a
        # row, a minute for 1.1M, where building them afterwards takes about
        # 25 s. Constraint indexes stay; the definitions come from the
        # catalog, so the schema ends as migrations left it.
        cursor.execute(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index"
            " WHERE indrelid = %s::regclass AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = indexrelid)",
            [TABLE],
        )
        indexes = cursor.fetchall()
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
        copy_rows(cursor, TABLE, CHARGE_COLUMNS, charge_rows(accounts, acquirers, end, seed=FIXTURE_VERSION))
        copied = time.perf_counter() - started - deleted
        # CREATE INDEX refuses to run while the deferred foreign-key checks
        # of the copied rows are pending: run them now.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        checked = time.perf_counter() - started - deleted - copied
        cursor.execute("SET LOCAL maintenance_work_mem = '256MB'")
        for _, definition in indexes:
            cursor.execute(definition)
        built = time.perf_counter() - started - deleted - copied - checked
        cursor.execute(
            "INSERT INTO bench_listing_fixture VALUES (%s, %s, %s, %s, %s)",
            [big.pk, rows, FIXTURE_VERSION, end, copied],
        )
    print(
        f"old fixture deleted {deleted:.1f} s, COPY {copied:.1f} s (generation included),"
        f" foreign keys checked {checked:.1f} s, {len(indexes)} indexes built {built:.1f} s",
        flush=True,
    )
    _vacuum()
    return Fixture(big.pk, rows, end, copied, reused=False)


# --------------------------------------------------------------------------- scenarios


def local(moment: dt.datetime) -> str:
    """A filter value: ``YYYY-MM-DD HH:mm:ss`` in America/Sao_Paulo (decisions §1)."""
    return moment.astimezone(SAO_PAULO).strftime("%Y-%m-%d %H:%M:%S")


def samples(table: str, account_id: uuid.UUID) -> tuple[list[str], list[str]]:
    """Ids and e2e ids of the account from ~1% of the table's pages (no scan)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id::text, e2e_id FROM {table} TABLESAMPLE SYSTEM (1) REPEATABLE (1)"  # noqa: S608 - constant
            " WHERE account_id = %s LIMIT 500",
            [account_id],
        )
        sample = cursor.fetchall()
        if len(sample) < 50:  # a small table: 1% of its pages may hold nothing
            cursor.execute(
                f"SELECT id::text, e2e_id FROM {table} WHERE account_id = %s"  # noqa: S608 - constant
                " ORDER BY created_at DESC, id DESC LIMIT 500",
                [account_id],
            )
            sample = cursor.fetchall()
    return [i for i, _ in sample], [e for _, e in sample if e]


def scenarios(
    fx: Fixture, *, table: str = TABLE, common: str = "paid", rare: str = "chargeback", recent: str = "pending"
) -> list[Scenario]:
    """Each filter alone, the common combinations, the default order, deep
    pages and a page past the end (the COUNT alone). The statuses are the
    listing's most frequent, a rare one, and the one only recent records have."""
    end = fx.generated_at
    ids, e2e_ids = samples(table, fx.account_id)
    last_page = max(1, math.ceil(fx.rows / 15))
    # Midnight in São Paulo, 90 days back: a day well inside the history.
    day = (end - dt.timedelta(days=90)).astimezone(SAO_PAULO).replace(hour=0, minute=0, second=0)
    one_day = {"start": local(day), "end": local(day + dt.timedelta(days=1, seconds=-1))}
    month = {"start": local(end - dt.timedelta(days=30)), "end": local(end)}

    def fixed(**params: Any) -> Callable[[int], dict[str, Any]]:
        return lambda index: params

    return [
        Scenario("no filter", fixed()),
        Scenario("no filter, per_page=100", fixed(per_page=100)),
        Scenario("page 1,000", fixed(page=1000)),
        Scenario(f"last page ({last_page:,})", fixed(page=last_page)),
        Scenario("page past the end", fixed(page=last_page + 1)),
        Scenario("id", lambda index: {"id": ids[index % len(ids)]}),
        Scenario("e2e_id", lambda index: {"e2e_id": e2e_ids[index % len(e2e_ids)]}),
        Scenario(f"status={common} (most)", fixed(status=common)),
        Scenario(f"status={rare} (rare)", fixed(status=rare)),
        Scenario(f"status={recent} (last hour)", fixed(status=recent)),
        Scenario("amount_min=100000 (top 1%)", fixed(amount_min=100_000)),
        Scenario("amount 1000..1100", fixed(amount_min=1000, amount_max=1100)),
        Scenario("amount_max=500", fixed(amount_max=500)),
        Scenario("created_at: one day", fixed(created_at_start=one_day["start"], created_at_end=one_day["end"])),
        Scenario("created_at: last 30 days", fixed(created_at_start=month["start"], created_at_end=month["end"])),
        Scenario("created_at_end: 150+ days ago", fixed(created_at_end=local(end - dt.timedelta(days=150)))),
        Scenario("paid_at: one day", fixed(paid_at_start=one_day["start"], paid_at_end=one_day["end"])),
        Scenario("paid_at_start: last 7 days", fixed(paid_at_start=local(end - dt.timedelta(days=7)))),
        Scenario("paid_at: last 30 days", fixed(paid_at_start=month["start"], paid_at_end=month["end"])),
        Scenario("paid_at_end: 150+ days ago", fixed(paid_at_end=local(end - dt.timedelta(days=150)))),
        Scenario(
            f"status={common} + created_at 30 days",
            fixed(status=common, created_at_start=month["start"], created_at_end=month["end"]),
        ),
        Scenario(
            f"status={common} + paid_at one day",
            fixed(status=common, paid_at_start=one_day["start"], paid_at_end=one_day["end"]),
        ),
        Scenario(f"status={common} + amount_min=100000", fixed(status=common, amount_min=100_000)),
        Scenario(
            "amount 1000..1100 + created_at 30 days",
            fixed(amount_min=1000, amount_max=1100, created_at_start=month["start"], created_at_end=month["end"]),
        ),
        Scenario(
            "all filters",
            fixed(
                status=common,
                amount_min=1000,
                amount_max=50_000,
                created_at_start=month["start"],
                created_at_end=month["end"],
                paid_at_start=month["start"],
            ),
        ),
    ]


# --------------------------------------------------------------------------- EXPLAIN


def _rows_out(plan: dict[str, Any]) -> int:
    # Per loop in the plan (per process for a parallel scan): times the loops.
    return int(plan.get("Actual Rows", 0)) * int(plan.get("Actual Loops", 1))


def _flatten(plan: dict[str, Any], out: list[PlanNode]) -> list[PlanNode]:
    children = plan.get("Plans", [])
    out.append(
        PlanNode(
            node=plan["Node Type"],
            relation=plan.get("Relation Name"),
            index=plan.get("Index Name"),
            # What a sort costs is what it takes in, not the page it gives out.
            rows=_rows_out(children[0]) if plan["Node Type"] == "Sort" and children else _rows_out(plan),
            heap_fetches=plan.get("Heap Fetches"),
            # A walk in index order stops after the page but reads past every
            # entry the filter drops on the way.
            filtered=int(plan.get("Rows Removed by Filter", 0)) * int(plan.get("Actual Loops", 1)),
        )
    )
    for child in children:
        _flatten(child, out)
    return out


def explain(sql: str, kind: str, table: str = TABLE, *, measure: bool = True) -> QueryPlan:
    """The plan of ``sql`` from ``EXPLAIN (ANALYZE, BUFFERS, TIMING OFF)``
    (per-node clocks would double the time of a million-row scan) and its
    time: the median of three plain runs after a warm-up, the warm figure
    the load test meets. ``measure=False``: the plan alone (``EXPLAIN``,
    nothing run), for checks of its shape."""
    from django.db import connection

    ms = None
    options = "ANALYZE, BUFFERS, TIMING OFF" if measure else "COSTS ON"
    with connection.cursor() as cursor:
        if measure:
            times = []
            for _ in range(4):
                started = time.perf_counter()
                cursor.execute(sql)
                cursor.fetchall()
                times.append(time.perf_counter() - started)
            ms = sorted(times[1:])[1] * 1000
        cursor.execute(f"EXPLAIN ({options}, FORMAT JSON) {sql}")
        (document,) = cursor.fetchone()
        cursor.execute(f"EXPLAIN ({options}) {sql}")
        text = "\n".join(line for (line,) in cursor.fetchall())
    root = (json.loads(document) if isinstance(document, str) else document)[0]
    plan = root["Plan"]
    return QueryPlan(
        kind=kind,
        table=table,
        sql=sql,
        ms=ms,
        buffers=int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0)),
        nodes=_flatten(plan, []),
        text=text,
    )


def capture(scenario: Scenario, client: Any, *, url: str = URL, table: str = TABLE, measure: bool = True) -> None:
    """Make the scenario's request in-process with ``client`` (a Django test
    client holding the credentials; one for all scenarios, since each new one
    loads the middleware again), keep the SQL it sent to ``table`` (the COUNT
    and the page) and explain each statement (``measure``: see :func:`explain`)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if measure:
        client.get(url, scenario.params(0))  # once first: the credential's last_used_at write is not counted
    # Twice, keeping the fewer: a write the request makes now and then (the
    # credential's last_used_at, a snapshot read again) is not the scenario's.
    attempts = []
    for _ in range(2):
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url, scenario.params(0))
        attempts.append((len(captured.captured_queries), captured, response))
    _, captured, response = min(attempts, key=lambda attempt: attempt[0])
    if response.status_code != 200:
        raise RuntimeError(f"{scenario.name}: {response.status_code} {response.content[:300]!r}")
    scenario.total = response.json()["data"]["pagination"]["total"]
    scenario.queries = len(captured.captured_queries)
    scenario.plans = [
        explain(query["sql"], "count" if "COUNT(*)" in query["sql"] else "page", table, measure=measure)
        for query in captured.captured_queries
        if f'FROM "{table}"' in query["sql"]
    ]


# --------------------------------------------------------------------------- load

CEILING_NOTE = (
    "the request's COUNT and page SQL alone, on psycopg connections at the same concurrency (no HTTP, no Django)"
)


class DirectSql:
    """A pool of ``size`` psycopg connections to the benchmark database, as
    gunicorn's workers keep theirs: every closed-loop thread borrows one."""

    def __init__(self, size: int) -> None:
        from django.db import connection
        from psycopg.conninfo import make_conninfo
        from psycopg_pool import ConnectionPool

        settings = connection.settings_dict
        conninfo = make_conninfo(
            dbname=settings["NAME"],
            user=settings["USER"],
            password=settings.get("PASSWORD") or None,
            host=settings.get("HOST") or None,
            port=settings.get("PORT") or None,
        )
        self.pool = ConnectionPool(conninfo, min_size=size, max_size=size, kwargs={"autocommit": True}, open=True)

    def run(self, statements: Sequence[str]) -> int:
        with self.pool.connection() as conn:
            for statement in statements:
                conn.execute(statement).fetchall()
        return 200

    def close(self) -> None:
        self.pool.close()


def credentials(account_id: uuid.UUID, calls: int) -> list[dict[str, str]]:
    """Enough credentials that none passes the per-minute rate limit
    (decisions §7) during ``calls`` requests: the limiter stays in the path."""
    from django.conf import settings

    from accounts.models import Account
    from accounts.services import credential_issue

    limit = settings.API_RATE_LIMIT_PER_MINUTE
    count = 1 if limit <= 0 else math.ceil(calls / (limit * 0.8))
    account = Account.objects.get(pk=account_id)
    return [
        {"X-Public-Key": issued.credential.public_key, "X-Secret-Key": issued.secret_key}
        for issued in (credential_issue(account=account, label="bench-listing") for _ in range(count))
    ]


def rotation(case: Scenario, headers: Sequence[dict[str, str]]) -> list[wrk.Request]:
    """The scenario's requests for wrk: its distinct query strings (many for
    the id and e2e_id lookups, one for the others), each credential in turn."""
    queries = list(dict.fromkeys(urlencode(case.params(index)) for index in range(ROTATION)))
    count = max(len(queries), len(headers))
    return [
        wrk.Request(
            "GET", f"{URL}?{queries[n % len(queries)]}" if queries[n % len(queries)] else URL, headers[n % len(headers)]
        )
        for n in range(count)
    ]


def run(
    env: dict[str, str],
    *,
    rows: int = ROWS,
    total: int = TOTAL,
    concurrency: int = CONCURRENCY,
    seconds: float = SECONDS,
    quick: bool = False,
    plans: bool = False,
    load: bool = True,
) -> list[LoadResult]:
    """The benchmark on Django already set up on ``env`` (``setup_django``):
    fixture, plans, then the load; returns the table's rows (the caller
    prints them, alone or beside other scenarios). ``quick`` shortens every
    round to a third: a smoke run, not figures. A plan that scans
    ``payments_charge`` sequentially raises RuntimeError before any load: a
    regression to fix, not a figure to print."""
    from django.test import Client

    if quick:
        total, seconds = max(30, total // 3), seconds / 3
    fx = fixture(rows)
    cases = scenarios(fx)
    # wrk sends as many as the server answers: the credentials are sized for
    # the fastest scenario's worth at ~1,000 req/s.
    headers = credentials(fx.account_id, int(1000 * seconds + total) * len(cases))
    print(f"\nEXPLAIN (ANALYZE, BUFFERS) of the SQL each request sends to {TABLE}, warm, median of 3:")
    client = Client(headers=headers[0])
    for case in cases:
        capture(case, client)
        print(f"- {case.name}: total {case.total:,}, {case.queries} SQL/request")
        for plan in case.plans:
            print(f"    {plan.summary()}")
            if plans:
                print("      " + plan.sql + "\n      " + plan.text.replace("\n", "\n      "))
    seq_scans = [f"{case.name} ({plan.kind})" for case in cases for plan in case.plans if plan.seq_scan]
    if seq_scans:
        raise RuntimeError(f"sequential scan of {TABLE} in: {', '.join(seq_scans)}")

    results: list[LoadResult] = []
    if not load:
        return results
    anchor_ids, _ = samples(TABLE, fx.account_id)
    sql = DirectSql(concurrency)
    try:
        with measure.servers(env, anchor_ids, seconds=seconds) as bench:
            bench.warm_up([rotation(cases[0], headers)])
            anchors = [bench.anchor_round()]
            # One anchor round every BLOCK scenarios: each row's ratio is to the
            # two anchor rounds around it, so both met the same noise.
            for start in range(0, len(cases), BLOCK):
                block: list[measure.ApiResult] = []
                for case in cases[start : start + BLOCK]:
                    name = f"GET {URL} {case.name}"
                    row = measure.combine(name, [bench.round(name, rotation(case, headers))])
                    row.queries = case.queries

                    def bare(session: requests.Session, index: int, case: Scenario = case) -> int:
                        # The request's SQL as the view sent it, straight on PostgreSQL.
                        return sql.run([plan.sql for plan in case.plans])

                    # At most 2 s: a ceiling, not a figure of its own (the run stays in budget).
                    alone = run_load(
                        name, bare, total=total, concurrency=concurrency, warmup=2, seconds=min(seconds, 2.0)
                    )
                    row.db_ceiling, row.db_ceiling_note = alone.rps, CEILING_NOTE
                    block.append(row)
                anchors.append(bench.anchor_round())
                anchor = measure.combine("anchor", anchors[-2:])
                for row, case in zip(block, cases[start : start + BLOCK], strict=True):
                    selective = case.total <= SELECTIVE
                    measure.beside(row, anchor, target=SELECTIVE_TARGET if selective else None)
                    if not selective:
                        row.target = f"none: COUNT of {case.total:,}"
                    results.append(row)
    finally:
        sql.close()
    return results


def main(argv: Sequence[str] | None = None) -> list[LoadResult]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=ROWS, help="charges of the big account")
    parser.add_argument("--total", type=int, default=TOTAL, help="SQL-alone calls per scenario")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY, help="of the SQL-alone ceiling")
    parser.add_argument("--seconds", type=float, default=SECONDS, help="length of each wrk round")
    parser.add_argument("--quick", action="store_true", help="a third of each round: a smoke run, not figures")
    parser.add_argument("--engines", choices=["auto", "machine", "embedded"], default="auto")
    parser.add_argument("--plans", action="store_true", help="print each SQL and its full plan")
    parser.add_argument("--explain-only", action="store_true", help="fixture and plans, no load")
    args = parser.parse_args(argv)

    env = bench_env(args.engines)
    setup_django(env)
    try:
        results = run(
            env,
            rows=args.rows,
            total=args.total,
            concurrency=args.concurrency,
            seconds=args.seconds,
            quick=args.quick,
            plans=args.plans,
            load=not args.explain_only,
        )
    except RuntimeError as error:
        raise SystemExit(str(error)) from None
    if results:
        api_rows = [row for row in results if isinstance(row, measure.ApiResult)]
        measure.print_table(api_rows, header_lines=machine_lines())
    return results


if __name__ == "__main__":
    main()
