"""Figure (13)'s line: the gateway's CPU per accept with traces off, at 1 % and at 100 %,
each round's "on" over the same round's "off" as a ratio, and the 95 % interval of the ratios
over the rounds (goal: 1 % costs under 3 % more, so the interval's top is under 1.03).

Usage: trace_line.py OUT_DIR CLK_TCK SECKILL_BENCH ROUNDS. Exits 1 when a round is missing."""
import json
import statistics
import subprocess
import sys

out, hz, tool, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])


def cpu(name, proc):
    a = {l.split()[0]: int(l.split()[2]) for l in open(f"{out}/{name}.cpu0")}
    b = {l.split()[0]: int(l.split()[2]) for l in open(f"{out}/{name}.cpu1")}
    return (b[proc] - a[proc]) / hz * 1e6


def accepts(name):
    r = subprocess.run([tool, "report", "outcome", "--file", f"{out}/{name}.json", "--outcome",
                        "202", "--field", "count"], capture_output=True, text=True, check=True)
    return float(r.stdout)


per = {m: [] for m in ("off", "1", "100")}
problems = []
for r in range(1, rounds + 1):
    for m in per:
        name = f"f13-{m}-r{r}"
        try:
            n = accepts(name)
            per[m].append(cpu(name, "g0") / n if n > 0 else None)
        except (OSError, KeyError, subprocess.CalledProcessError, ValueError) as e:
            problems.append(f"{name}: {e}")
            per[m].append(None)


def interval(xs):
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return None
    m = statistics.mean(xs)
    h = 1.96 * statistics.stdev(xs) / len(xs) ** 0.5
    return m, m - h, m + h


def ratios(m):
    return [o / f if o and f else None for o, f in zip(per[m], per["off"])]


mean = lambda xs: statistics.mean([x for x in xs if x is not None] or [float("nan")])
s = (f"(13) traces, gateway CPU per accept over {rounds} alternated rounds: off {mean(per['off']):.1f} µs, "
     f"1 % {mean(per['1']):.1f} µs, 100 % {mean(per['100']):.1f} µs")
for m, label in (("1", "1 %"), ("100", "100 %")):
    iv = interval(ratios(m))
    if iv:
        s += f"; {label} ÷ off {iv[0]:.3f} (95 % interval {iv[1]:.3f} to {iv[2]:.3f})"
try:
    sink = json.load(open(f"{out}/f13-sink.json"))
    s += f"; the sink got {sink['requests']} exports, {sink['bytes'] / 1e6:.1f} MB"
except (OSError, ValueError):
    s += "; the sink got nothing"
ok = not problems
if problems:
    s += ". **INVALID**: " + "; ".join(problems)
print(s + ".")
sys.exit(0 if ok else 1)
