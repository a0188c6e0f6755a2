"""The cost of an accepted buy with the per-user limit on, as ratios to floors measured in the
same run of scripts/bench.sh (one line, for the results block's note):
- the gateway's CPU per accept of (2L) over its CPU per `/livez` of (1) (goal <= 4x);
- Redis's CPU per accept of (2L) over its CPU per GET of (5G), same concurrency (goal <= 4x);
- the whole machine's CPU per accept over its CPU per `/livez` (goal <= 5x);
- (2S), (2L) at a concurrency that saturates the machine: accepts/s over (1)'s req/s, with the
  202's p50 and p99.

Usage: accept-cost.py OUT_DIR CLK_TCK SECKILL_BENCH (BENCH_SAT_CONCURRENCY in the environment)."""
import os
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


def outcome(name, label):
    """One outcome's count, rate and latency from a load summary (OUT/NAME.json), as
    `seckill-bench report outcome` reads it; None when the figure did not run."""
    if not os.path.exists(f"{out}/{name}.json"):
        return None
    stat = {}
    for field in ("count", "per-sec", "p50-ms", "p99-ms"):
        r = subprocess.run([tool, "report", "outcome", "--file", f"{out}/{name}.json",
                            "--outcome", label, "--field", field], capture_output=True, text=True)
        if r.returncode != 0:
            return None
        stat[field.replace("-", "_")] = float(r.stdout)
    return stat


def per(name, label, proc):
    c, o = cpu(name), outcome(name, label)
    if not c or not o or not o["count"] or proc not in c:
        return None
    return c[proc] / o["count"]


parts = []
g1, g2 = per("f1", "200", "g0"), per("f2l", "202", "g0")
if g1 and g2:
    parts.append(f"gateway {g2:.1f} µs per accept (2L) = {g2 / g1:.1f} × its {g1:.1f} µs per /livez (1) (goal ≤ 4 ×)")
r2 = per("f2l", "202", "redis")
try:
    rg = cpu("f5g")["redis"] / int(open(f"{out}/f5g.requests").read())
    parts.append(f"Redis {r2:.1f} µs per accept = {r2 / rg:.1f} × its {rg:.1f} µs per GET (5G) (goal ≤ 4 ×)")
except (OSError, TypeError, KeyError, ValueError, ZeroDivisionError):
    parts.append("Redis per GET n/a ((5G) did not run)")
m1, m2 = per("f1", "200", "machine"), per("f2l", "202", "machine")
if m1 and m2:
    parts.append(f"whole machine {m2:.0f} µs per accept = {m2 / m1:.1f} × {m1:.0f} µs per /livez (goal ≤ 5 ×)")
s, l = outcome("f2s", "202"), outcome("f1", "200")
if s and l and l["per_sec"]:
    parts.append(
        f"(2S) at concurrency {os.environ.get('BENCH_SAT_CONCURRENCY', '?')}: {s['per_sec']:,.0f} accepts/s"
        f" = {s['per_sec'] / l['per_sec']:.3f} × (1)'s {l['per_sec']:,.0f} /livez req/s,"
        f" 202 p50 {s['p50_ms']:.1f} ms, p99 {s['p99_ms']:.1f} ms"
    )
    m = per("f2s", "202", "machine")
    if m:
        parts[-1] += f", whole machine {m:.0f} µs per accept"
print("Accept cost, per-user limit on: " + "; ".join(parts) + ".")
