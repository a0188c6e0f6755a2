"""The cost of an accepted buy with the per-user limit on, as ratios to floors measured in the
same run of scripts/bench.sh (one line, for the results block's note):
- the gateway's CPU per accept of (2L) over its CPU per `/livez` (goal <= 4x): of (1), or of wrk's
  (1w) when that is cheaper, so a slow load tool cannot flatter the ratio (the same floor below);
- Redis's CPU per accept of (2L) over its CPU per GET of (5G), same concurrency (goal <= 4x);
- Redis's CPU per reservation of (5B), the reservation script with 8 buyers per call;
- the whole machine's CPU per accept over its CPU per `/livez` (goal <= 5x);
- (2S), (2L) at a concurrency that saturates the machine: accepts/s over (1)'s req/s, with the
  202's p50 and p99, and the three costs above as ratios to the same floors;
- (2L)'s costs over (1R)'s, /livez paced at (2L)'s accept rate: the floor at the same load.

Usage: accept-cost.py OUT_DIR CLK_TCK SECKILL_BENCH (BENCH_SAT_CONCURRENCY in the environment)."""
import os
import re
import subprocess
import sys

out, hz, tool = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def cpu(name):
    """CPU µs by process key over a measured run (OUT/NAME.cpu0 and .cpu1)."""
    try:
        a = {l.split()[0]: int(l.split()[2]) for l in open(f"{out}/{name}.cpu0")}
        b = {l.split()[0]: int(l.split()[2]) for l in open(f"{out}/{name}.cpu1")}
    except OSError:
        return None
    return {k: (b[k] - a[k]) / hz * 1e6 for k in a if k in b and k != "clock"}


def field(name, label, what):
    """One field of an outcome of a load summary (OUT/NAME.json), as `seckill-bench report
    outcome` reads it: count, per-sec, p50-ms, p99-ms. None when the figure did not run, the
    outcome never happened, or the tool (an older BENCH_BIN) lacks the field."""
    if not os.path.exists(f"{out}/{name}.json"):
        return None
    try:
        r = subprocess.run([tool, "report", "outcome", "--file", f"{out}/{name}.json",
                            "--outcome", label, "--field", what], capture_output=True, text=True)
    except OSError as e:
        print(f"accept-cost.py: {tool}: {e}", file=sys.stderr)
        return None
    if r.returncode != 0:
        print(f"accept-cost.py: {r.stderr.strip()}", file=sys.stderr)
        return None
    v = float(r.stdout)
    return v if v > 0 else None


def per(name, label, proc):
    c, n = cpu(name), field(name, label, "count")
    if not c or not n or proc not in c:
        return None
    return c[proc] / n


def wrk_per(proc):
    """CPU µs of `proc` per request of wrk's /livez run (1w), when it counts: every answer a
    2xx, no socket error (as the report's rule for (1w))."""
    try:
        text = open(f"{out}/wrk.txt").read()
    except OSError:
        return None
    m = re.search(r"(\d+) requests in", text)
    c = cpu("wrk")
    if not m or not c or proc not in c or "Non-2xx" in text or "Socket errors" in text:
        return None
    n = int(m.group(1))
    return c[proc] / n if n > 0 else None


def floor(proc):
    """A process's CPU per /livez: the cheaper of our load tool's (1) and wrk's (1w), so that a
    load tool that costs the gateway more per request cannot flatter a ratio. (value, name)."""
    runs = [(v, name) for v, name in ((per("f1", "200", proc), "(1)"), (wrk_per(proc), "(1w)")) if v]
    return min(runs) if runs else (None, "(1)")


parts = []
(g1, g1n), g2 = floor("g0"), per("f2l", "202", "g0")
if g1 and g2:
    parts.append(f"gateway {g2:.1f} µs per accept (2L) = {g2 / g1:.1f} × its {g1:.1f} µs per /livez {g1n} (goal ≤ 4 ×)")
r2 = per("f2l", "202", "redis")


def redis_per_request(name):
    """Redis's CPU µs per request of a redis-benchmark figure (OUT/NAME.requests)."""
    try:
        return cpu(name)["redis"] / int(open(f"{out}/{name}.requests").read())
    except (OSError, TypeError, KeyError, ValueError, ZeroDivisionError):
        return None


rg = redis_per_request("f5g")
if r2 and rg:
    parts.append(f"Redis {r2:.1f} µs per accept = {r2 / rg:.1f} × its {rg:.1f} µs per GET (5G) (goal ≤ 4 ×)")
elif r2:
    parts.append(f"Redis {r2:.1f} µs per accept; per GET n/a ((5G) did not run)")
rb = redis_per_request("f5b")
if rb and rg:
    parts.append(f"Redis {rb:.1f} µs per reservation in calls of 8 buyers (5B) = {rb / rg:.1f} × a GET")
(m1, m1n), m2 = floor("machine"), per("f2l", "202", "machine")
if m1 and m2:
    parts.append(f"whole machine {m2:.0f} µs per accept = {m2 / m1:.1f} × {m1:.0f} µs per /livez {m1n} (goal ≤ 5 ×)")
s, l = field("f2s", "202", "per-sec"), field("f1", "200", "per-sec")
if s and l:
    parts.append(
        f"(2S) at concurrency {os.environ.get('BENCH_SAT_CONCURRENCY', '?')}: {s:,.0f} accepts/s"
        f" = {s / l:.3f} × (1)'s {l:,.0f} /livez req/s"
    )
    p50, p99 = field("f2s", "202", "p50-ms"), field("f2s", "202", "p99-ms")
    if p50 and p99:
        parts[-1] += f", 202 p50 {p50:.1f} ms, p99 {p99:.1f} ms"
    # The same costs where the accept path is CPU-bound, as its floors are: at (2L)'s
    # concurrency the machine waits on Kafka's acks, and each process pays for waking up more
    # often per request.
    g, r, m = per("f2s", "202", "g0"), per("f2s", "202", "redis"), per("f2s", "202", "machine")
    if g and g1:
        parts[-1] += f", gateway {g:.1f} µs per accept = {g / g1:.1f} × /livez"
    if r and rg:
        parts[-1] += f", Redis {r:.1f} µs = {r / rg:.1f} × a GET"
    if m and m1:
        parts[-1] += f", whole machine {m:.0f} µs per accept = {m / m1:.1f} × /livez"
    elif m:
        parts[-1] += f", whole machine {m:.0f} µs per accept"
# (2L) against the floor at its own load: (1R), /livez paced at (2L)'s accept rate.
g1r, m1r = per("f1r", "200", "g0"), per("f1r", "200", "machine")
if g2 and g1r:
    parts.append(f"at (2L)'s rate, /livez (1R) costs the gateway {g1r:.1f} µs: (2L) = {g2 / g1r:.1f} ×")
    if m2 and m1r:
        parts[-1] += f", the whole machine {m1r:.0f} µs: (2L) = {m2 / m1r:.1f} ×"
if not parts:
    sys.exit(1)  # nothing measured: no line
print("Accept cost, per-user limit on: " + "; ".join(parts) + ".")
