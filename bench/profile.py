"""Where a request's CPU goes: py-spy on one gunicorn worker of the service
as deployed (one process, 8 threads, so every request is in the profile)
while wrk loads one endpoint.

    .venv/bin/python -m bench.profile get|post|withdrawal|list [--seconds 10] [--top 60]

``list`` is ``GET /api/transactions`` filtered by one charge's id (the
listing's own work: filters, pages, the count, the serializer) or by
``--query``.

py-spy samples only the thread holding the GIL (``--gil``): what it shows
is CPU spent in Python, not waiting. The raw samples (flamegraph.pl's input)
go to ``var/profile-<endpoint>.txt``; the frames with the largest inclusive
share are printed. It is how the per-request cost work of docs/performance.md
("Decision records") was chosen. py-spy attaches with ptrace: as root, or with
``kernel.yama.ptrace_scope`` 0.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from bench import accounts, charges, wrk
from bench.cpu import children
from bench.harness import ROOT, bench_env, service, setup_django

WITHDRAWAL = {"amount": 1000, "key_value": "52998224725"}


def top_frames(raw: Path, count: int) -> list[tuple[float, str]]:
    """Frames by the share of samples they appear in (inclusive)."""
    total = 0
    seen: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        total += int(samples)
        for frame in set(stack.split(";")):
            seen[frame] += int(samples)
    return [(100 * n / max(total, 1), frame) for frame, n in seen.most_common(count)]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("endpoint", choices=["get", "post", "withdrawal", "list"])
    parser.add_argument("--query", help="list: the query string (default: id=<a charge of the bench account>)")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--top", type=int, default=60)
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy") or str(ROOT / ".venv" / "bin" / "py-spy")

    env = bench_env()
    setup_django(env)
    headers = charges.prepare()
    if args.endpoint == "withdrawal":
        # The bench account, with room to withdraw for a while.
        from accounts.models import Account, LedgerEntry

        account = Account.objects.get(ref="bench")
        Account.objects.filter(pk=account.pk).update(withdrawal_per_request_limit=10**12, withdrawal_daily_limit=10**15)
        reference = f"bench-profile:{LedgerEntry.objects.filter(account=account).count()}"
        accounts.credit(account.pk, 10**11, reference=reference)
    with service(env, workers=1, threads=8) as server:
        if args.endpoint == "get":
            [charge_id] = charges.charge_ids(headers, 1)
            load = wrk.Load("get", server.base, f"/api/transactions/{charge_id}", headers, method="GET")
        elif args.endpoint == "list":
            query = args.query or f"id={charges.charge_ids(headers, 1)[0]}"
            load = wrk.Load("list", server.base, f"/api/transactions?{query}", headers, method="GET")
        elif args.endpoint == "post":
            body = wrk.json_body(charges.BODY)
            load = wrk.Load(
                "post", server.base, "/api/transactions", {**headers, "Content-Type": "application/json"}, body
            )
        else:
            body = wrk.json_body(WITHDRAWAL)
            load = wrk.Load(
                "withdrawal", server.base, "/api/withdrawals", {**headers, "Content-Type": "application/json"}, body
            )
        load.connections, load.seconds = 8, args.seconds
        [worker] = children(server.pid)
        raw = ROOT / "var" / f"profile-{args.endpoint}.txt"
        raw.parent.mkdir(exist_ok=True)
        record = subprocess.Popen(
            [spy, "record", "--pid", str(worker), "--duration", str(args.seconds), "--rate", "200",
             "--format", "raw", "--output", str(raw), "--nonblocking", "--gil"],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        result = wrk.run(load)
        record.wait(timeout=args.seconds + 30)
    print(f"{args.endpoint}: {result.rps:.1f} req/s under py-spy (1 process x 8 threads, wrk c8); raw samples in {raw}")
    for share, frame in top_frames(raw, args.top):
        print(f"{share:5.1f}%  {frame[:150]}")


if __name__ == "__main__":
    main()
