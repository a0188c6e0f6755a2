#!/usr/bin/env python3
"""(12)'s line: live streams against polling, from OUT/f12-<mode>-<round>{.cpu0,.cpu1,-a.json,-b.json},
<mode> one of poll (as advised), poll300 (every 300 ms; optional) and stream.

Usage: live_line.py OUT CLK_TCK BUYERS STOCK ROUNDS
Prints one line; exits 1 when a round is invalid (a buyer errored or timed out, or the
confirmed orders are not the stock).
"""
import json
import os
import sys


def snapshot(path):
    out = {}
    for line in open(path):
        key, _pid, value = line.split()
        out[key] = int(value)
    return out


def main():
    out, tck, buyers, stock, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    modes = {}
    problems = []
    for mode in ("poll", "poll300", "stream"):
        if mode == "poll300" and not any(os.path.exists(f"{out}/f12-poll300-{r}.cpu0") for r in range(1, rounds + 1)):
            continue
        m = {"gateways": 0.0, "redis": 0.0, "machine": 0.0, "requests": 0, "events": 0, "buyers": 0, "delays": []}
        for r in range(1, rounds + 1):
            name = f"{out}/f12-{mode}-{r}"
            try:
                c0, c1 = snapshot(name + ".cpu0"), snapshot(name + ".cpu1")
                parts = [json.load(open(f"{name}-{h}.json")) for h in "ab"]
            except (OSError, ValueError) as e:
                problems.append(f"{mode} round {r}: no result ({e})")
                continue
            us = lambda k: (c1.get(k, 0) - c0.get(k, 0)) * 1e6 / tck
            m["gateways"] += us("g2") + us("g3")
            m["redis"] += us("redis")
            m["machine"] += us("machine")
            confirmed = sum(p["confirmed"] for p in parts)
            bad = sum(p["errors"] + p["timed_out"] for p in parts)
            if bad or confirmed != stock:
                problems.append(f"{mode} round {r}: {confirmed} confirmed of {stock}, {bad} buyers errored or timed out")
            for p in parts:
                m["requests"] += p["requests"]
                m["events"] += p.get("events", 0)
                m["buyers"] += p["buyers"]
                m["delays"] += p["knew_after_ms"]
        m["delays"].sort()
        modes[mode] = m
    if problems:
        print(f"(12) live streams against polling, {buyers:,} buyers: **INVALID**: " + "; ".join(problems) + ".")
        return 1
    per = lambda m, k: m[k] / m["buyers"]
    pct = lambda v, p: v[round((len(v) - 1) * p)] if v else float("nan")
    s = modes["stream"]
    labels = {"poll": "polling as advised", "poll300": "polling every 300 ms"}

    def against(name):
        p = modes[name]
        cpu = ", ".join(
            f"{label} {per(p, k):,.0f} → {per(s, k):,.0f} µs ({per(s, k) / per(p, k):.2f} ×)"
            for label, k in (("gateways", "gateways"), ("Redis", "redis"), ("machine", "machine"))
        )
        return (
            f"{labels[name]} → streams: {cpu}; requests per buyer {per(p, 'requests'):.1f} → "
            f"{per(s, 'requests'):.1f}; confirmation → buyer knows, p50/p99, {labels[name]}: "
            f"{pct(p['delays'], 0.5)}/{pct(p['delays'], 0.99)} ms"
        )

    base = "poll300" if "poll300" in modes else "poll"
    ratio = per(s, "machine") / per(modes[base], "machine")
    p99 = pct(s["delays"], 0.99)
    line = (
        f"(12) live streams against polling, {buyers:,} buyers of {stock:,} units from their join to "
        f"their confirmation, {rounds} alternated rounds each, two gateways; CPU per buyer, "
        + "; ".join(against(m) for m in modes if m != "stream")
        + f"; on streams {per(s, 'events'):.1f} events per buyer, {pct(s['delays'], 0.5)}/{p99} ms (goals: machine CPU under 0.25 × "
        f"{labels[base]}'s: {'met' if ratio < 0.25 else 'missed'}, {ratio:.2f} ×; p99 ≤ 50 ms: "
        f"{'met' if p99 <= 50 else 'missed'})."
    )
    print(line)
    return 0


sys.exit(main())
