"""wrk (https://github.com/wg/wrk, Debian's ``wrk`` package) as the load
generator of the isolation scenarios: a native, event-driven client, so the
load costs a sliver of the CPU it measures (a Python client on 2 CPUs takes
about one of them). ``make bench`` installs it when missing.

:func:`run` writes a Lua script that sends one fixed request (method, path,
headers, body: the API authenticates every request with its two key
headers), runs ``wrk --latency`` and reads its report: requests, req/s, the
latency percentiles, non-2xx answers and socket errors.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import LoadResult

#: wrk gives up on a request after this long (its default, 2 s, would turn a
#: slow acquirer's answers into "timeouts" instead of latencies).
TIMEOUT_SECONDS = 60
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_REQUESTS = re.compile(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h)", re.M)
_PERCENTILE = re.compile(r"^\s*([\d.]+)%\s+([\d.]+)(us|ms|s|m|h)\s*$", re.M)
_SOCKET = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_NON_2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")
_FAILURE = re.compile(r"^failure (\d+) (\d{3}) ?(.*)$", re.M)

# Counts what wrk counts as "Non-2xx or 3xx" (a status above 399) in each
# thread, by status and the envelope's message; ``done`` prints every
# thread's counts after wrk's report. Only where asked: a ``response``
# function makes wrk hand every answer's headers and body to Lua.
_COUNT_FAILURES = """
failures = {}
function response(status, headers, body)
  if status > 399 then
    local message = body and string.match(body, '"message"%s*:%s*"([^"]*)"') or ""
    local key = status .. " " .. message
    failures[key] = (failures[key] or 0) + 1
  end
end
function done(summary, latency, requests)
  for _, thread in ipairs(threads) do
    for key, count in pairs(thread:get("failures") or {}) do
      io.write("failure ", count, " ", key, "\\n")
    end
  end
end
"""


class WrkMissing(RuntimeError):
    pass


def binary() -> str:
    path = shutil.which("wrk")
    if path is None:
        raise WrkMissing("wrk is not installed: `make bench` installs it (apt-get install wrk)")
    return path


def _lua_string(text: str) -> str:
    """A Lua string literal: every byte outside printable ASCII (and the
    quote and backslash) as a decimal escape, so any body is carried intact."""
    out = []
    for byte in text.encode():
        out.append(chr(byte) if 32 <= byte < 127 and byte not in (34, 92) else f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


def _setup(lines: list[str]) -> list[str]:
    """wrk's ``setup``: each thread's offset (0, 1, ...) and the list of
    threads ``done`` reads the failures from."""
    return [
        "threads = {}",
        "local started = 0",
        "function setup(thread)",
        "  thread:set('offset', started)",
        "  started = started + 1",
        "  table.insert(threads, thread)",
        "end",
        *lines,
    ]


def _tail(lines: list[str], think_ms: int, count_failures: bool) -> str:
    if think_ms:
        lines += ["function delay()", f"  return {int(think_ms)}", "end"]
    return "\n".join(lines) + "\n" + (_COUNT_FAILURES if count_failures else "")


def script(
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes | str | None,
    *,
    think_ms: int = 0,
    count_failures: bool = False,
) -> str:
    """A wrk script sending this request on every connection. The request is
    formatted once per wrk thread (``init``), not per request: wrk's own
    loop then costs next to nothing. ``think_ms``: each connection pauses
    this long before each request (a paced client instead of a saturating one);
    ``count_failures``: see the module's docstring."""
    text = body.decode() if isinstance(body, bytes) else body
    lines = _setup(["local headers = {}"])
    lines += [f"headers[{_lua_string(k)}] = {_lua_string(v)}" for k, v in headers.items()]
    lines += [
        f"local body = {_lua_string(text) if text is not None else 'nil'}",
        "local req",
        "function init(args)",
        f"  req = wrk.format({_lua_string(method)}, {_lua_string(path)}, headers, body)",
        "end",
        "function request()",
        "  return req",
        "end",
    ]
    return _tail(lines, think_ms, count_failures)


@dataclass(frozen=True)
class Request:
    """One request of a rotation (see :func:`rotating_script`)."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes | str | None = None


def _lua_table(headers: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"[{_lua_string(k)}] = {_lua_string(v)}" for k, v in headers.items()) + "}"


def rotating_script(
    requests: Sequence[Request], *, threads: int, think_ms: int = 0, count_failures: bool = False
) -> str:
    """A wrk script cycling through ``requests`` (credentials of many
    accounts, many charge ids): each wrk thread formats them all once
    (``init``) and sends the next on every call; the threads start
    ``len / threads`` apart, so two never walk the same accounts in step."""
    lines = _setup(["local variants = {"])
    for r in requests:
        text = r.body.decode() if isinstance(r.body, bytes) else r.body
        body = _lua_string(text) if text is not None else "nil"
        lines.append(f"  {{{_lua_string(r.method)}, {_lua_string(r.path)}, {_lua_table(r.headers)}, {body}}},")
    lines += [
        "}",
        "local reqs = {}",
        "local i = 0",
        "function init(args)",
        "  for n, v in ipairs(variants) do reqs[n] = wrk.format(v[1], v[2], v[3], v[4]) end",
        f"  i = math.floor((offset or 0) * #reqs / {max(1, threads)})",
        "end",
        "function request()",
        "  i = i % #reqs + 1",
        "  return reqs[i]",
        "end",
    ]
    return _tail(lines, think_ms, count_failures)


@dataclass
class WrkResult(LoadResult):
    """One wrk run as a table row. wrk reports percentiles, not every
    latency: ``percentiles`` maps 0.5/0.75/0.9/0.99 to seconds."""

    percentiles: dict[float, float] = field(default_factory=dict)
    non_2xx: int = 0
    #: The non-2xx answers by "status message" (only with ``Load.count_failures``).
    failures: dict[str, int] = field(default_factory=dict)
    socket_errors: dict[str, int] = field(default_factory=dict)
    #: Most PostgreSQL connections of the service seen during the run (None: not sampled).
    pg_connections: int | None = None
    #: What they should stay within.
    pg_bound: int | None = None
    #: Text of the target this row is held to (printed beside it).
    target: str = ""
    passed: bool | None = None

    def percentile(self, q: float) -> float:
        """In ms: the reported percentile at or above ``q`` (wrk prints 50/75/90/99)."""
        if not self.percentiles:
            return 0.0
        above = [p for p in sorted(self.percentiles) if p >= q - 1e-9]
        return self.percentiles[above[0] if above else max(self.percentiles)] * 1000

    @property
    def failed(self) -> int:
        return self.non_2xx + sum(self.socket_errors.values())


def _seconds(value: str, unit: str) -> float:
    return float(value) * _UNITS[unit]


def parse(name: str, output: str) -> WrkResult:
    """Read wrk's report (with ``--latency``). Raises ValueError when it is
    not one (wrk failed to start, or printed nothing)."""
    done = _REQUESTS.search(output)
    if done is None:
        raise ValueError(f"not a wrk report:\n{output}")
    percentiles = {float(p) / 100: _seconds(v, u) for p, v, u in _PERCENTILE.findall(output)}
    socket = _SOCKET.search(output)
    kinds = ("connect", "read", "write", "timeout")
    errors = dict(zip(kinds, map(int, socket.groups()), strict=True)) if socket else {}
    non_2xx = _NON_2XX.search(output)
    failures: Counter[str] = Counter()
    for count, status, message in _FAILURE.findall(output):
        failures[f"{status} {message}".rstrip()] += int(count)
    result = WrkResult(
        name,
        requests=int(done.group(1)),
        errors=0,
        seconds=_seconds(done.group(2), done.group(3)),
        latencies=[],
        percentiles=percentiles,
        non_2xx=int(non_2xx.group(1)) if non_2xx else 0,
        failures=dict(failures),
        socket_errors={k: v for k, v in errors.items() if v},
    )
    result.errors = result.failed
    return result


@dataclass
class Load:
    """One wrk run to start: ``url`` is the base (scheme, host, port)."""

    name: str
    url: str
    path: str
    headers: Mapping[str, str]
    body: bytes | str | None = None
    method: str = "POST"
    threads: int = 2
    connections: int = 64
    seconds: float = 10.0
    #: Pause of each connection before each request, in ms (0: none).
    think_ms: int = 0
    #: When given, sent in turn instead of the one request above (:func:`rotating_script`).
    rotation: Sequence[Request] = ()
    #: Count the failed answers by status and message (see the module's docstring).
    count_failures: bool = False


def start(load: Load) -> tuple[subprocess.Popen[str], Path]:
    """Start wrk on ``load`` (it runs in the background); :func:`finish` reads it."""
    folder = Path(tempfile.mkdtemp(prefix="bench-wrk-"))
    lua = folder / "request.lua"
    if load.rotation:
        lua.write_text(
            rotating_script(
                load.rotation, threads=load.threads, think_ms=load.think_ms, count_failures=load.count_failures
            )
        )
    else:
        lua.write_text(
            script(
                load.method,
                load.path,
                load.headers,
                load.body,
                think_ms=load.think_ms,
                count_failures=load.count_failures,
            )
        )
    command = [
        binary(),
        "--latency",
        f"-t{load.threads}",
        f"-c{load.connections}",
        f"-d{max(1, round(load.seconds))}s",
        f"--timeout={TIMEOUT_SECONDS}s",
        "-s", str(lua),
        load.url,
    ]  # fmt: skip
    # The failures' messages are the API's UTF-8 (DRF does not escape them).
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, encoding="utf-8", errors="replace"
    )
    return process, folder


def finish(load: Load, started: tuple[subprocess.Popen[str], Path]) -> WrkResult:
    process, folder = started
    output, _ = process.communicate(timeout=load.seconds + TIMEOUT_SECONDS + 30)
    shutil.rmtree(folder, ignore_errors=True)
    if process.returncode != 0:
        raise RuntimeError(f"wrk exited with {process.returncode}:\n{output}")
    return parse(load.name, output)


def run(load: Load) -> WrkResult:
    """Run wrk on ``load`` and return its figures."""
    return finish(load, start(load))


def json_body(data: object) -> str:
    return json.dumps(data, separators=(",", ":"))


def combine(name: str, parts: Sequence[WrkResult]) -> WrkResult:
    """Rounds as one row: req/s over all of them, p50 request-weighted, the
    higher percentiles of the worst round (wrk gives percentiles, not samples)."""
    total = sum(p.requests for p in parts) or 1
    keys = sorted({q for p in parts for q in p.percentiles})
    percentiles = {
        q: (
            sum(p.percentiles.get(q, 0.0) * p.requests for p in parts) / total
            if q <= 0.5
            else max(p.percentiles.get(q, 0.0) for p in parts)
        )
        for q in keys
    }
    socket_errors = sum((Counter(p.socket_errors) for p in parts), Counter[str]())
    failures = sum((Counter(p.failures) for p in parts), Counter[str]())
    return WrkResult(
        name,
        requests=sum(p.requests for p in parts),
        errors=sum(p.errors for p in parts),
        seconds=sum(p.seconds for p in parts),
        latencies=[],
        percentiles=percentiles,
        non_2xx=sum(p.non_2xx for p in parts),
        failures=dict(failures),
        socket_errors=dict(socket_errors),
        pg_connections=max((p.pg_connections or 0) for p in parts),
    )
