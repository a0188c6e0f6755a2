"""Figure (14)'s line: the gateway's and Redis's CPU per accepted order and per unit with
orders of 1 unit, of 4 and of 1 to 4, and each round's 4-unit order over the same round's
1-unit order as a ratio, with the 95 % interval of the ratios over the rounds (goal: a 4-unit
order costs at most 1.3 × a 1-unit one, the interval's top under 1.3).

Usage: quantity_line.py OUT_DIR CLK_TCK ROUNDS. Exits 1 when a round is missing."""
import json
import statistics
import sys

out, hz, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
MODES = ("one", "four", "mix")


def cpu(name, proc):
    a = {l.split()[0]: int(l.split()[2]) for l in open(f"{out}/{name}.cpu0")}
    b = {l.split()[0]: int(l.split()[2]) for l in open(f"{out}/{name}.cpu1")}
    return (b[proc] - a[proc]) / hz * 1e6


def accepted(name):
    """(orders accepted, their units) from the load's summary."""
    s = json.load(open(f"{out}/{name}.json"))
    orders = next((o["count"] for o in s["outcomes"] if o["outcome"] == "202"), 0)
    return orders, s["tickets"]["units_issued"]


# per[mode][proc]: (per order, per unit) of each round.
per = {m: {p: [] for p in ("g0", "redis")} for m in MODES}
units_per_order = {m: [] for m in MODES}
problems = []
for r in range(1, rounds + 1):
    for m in MODES:
        name = f"f14-{m}-r{r}"
        try:
            orders, units = accepted(name)
            if orders <= 0 or units <= 0:
                raise ValueError("no order accepted")
            units_per_order[m].append(units / orders)
            for p in per[m]:
                c = cpu(name, p)
                per[m][p].append((c / orders, c / units))
        except (OSError, KeyError, ValueError, StopIteration) as e:
            problems.append(f"{name}: {e}")
            for p in per[m]:
                per[m][p].append(None)


def interval(xs):
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return None
    m = statistics.mean(xs)
    h = 1.96 * statistics.stdev(xs) / len(xs) ** 0.5
    return m, m - h, m + h


def mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.mean(xs) if xs else float("nan")


def figure(m, p, i):
    return mean([x[i] if x else None for x in per[m][p]])


s = f"(14) quantities, CPU per accepted order / per unit over {rounds} alternated rounds"
labels = {"one": "1 unit", "four": "4 units", "mix": "1-4 units"}
for m in MODES:
    s += (f"; {labels[m]} ({mean(units_per_order[m]):.2f} per order): gateway "
          f"{figure(m, 'g0', 0):.1f} / {figure(m, 'g0', 1):.1f} µs, Redis "
          f"{figure(m, 'redis', 0):.1f} / {figure(m, 'redis', 1):.1f} µs")
ok = not problems
for p, label in (("g0", "gateway"), ("redis", "Redis")):
    ratios = [f[0] / o[0] if f and o else None for f, o in zip(per["four"][p], per["one"][p])]
    iv = interval(ratios)
    if iv:
        s += f"; {label} per order, 4 ÷ 1: {iv[0]:.3f} (95 % interval {iv[1]:.3f} to {iv[2]:.3f})"
        s += " (goal at most 1.3: met)" if iv[2] <= 1.3 else " (goal at most 1.3: **missed**)"
if problems:
    s += ". **INVALID**: " + "; ".join(problems)
print(s + ".")
sys.exit(0 if ok else 1)
