# shellcheck shell=bash
# Sourced by scripts/chaos.sh (its settings and globals are in scope).
# The verdict of a run: its audit, its evidence and its answers, judged.

# ------------------------------------------------------------ verdict ---
# judge scenario speed run audit_status recovery took: prints the run's table row, writes
# its verdict (PASS, FAIL, ERROR or FAIL+ERROR) to verdict, the reasons to reasons.txt and
# how the fault met the sale to overlap.json, all in $RUN_DIR.
judge() {
    GW0_URL="http://127.0.0.1:${GW_PORTS[0]}" \
        python3 - "$RUN_DIR" "$1" "${NAME[$1]}" "$2" "$RATE" "$3" "$4" "$5" "$6" "${ALLOW[$1]:-}" "$PAY_HERD_RATE" <<'PY'
import json, os, sys
d, sc, name, speed, rate, run, audit_rc, recovered, took, allowed, pay_herd_rate = sys.argv[1:]
sc, allowed = int(sc), set(allowed.split())
payment = sc in (10, 11, 12, 17, 18)
room = sc == 13
at = lambda f: os.path.join(d, f)
def lines(f):
    return [l.strip() for l in open(at(f))] if os.path.exists(at(f)) else []
def load_json(f):
    try:
        return json.load(open(at(f)))
    except (OSError, ValueError):
        return None
# A promise is kept when its buyer got the unit: confirmed, then maybe paid, or cancelled (not
# paid in time, or by the buyer: the unit went back on sale); or failed for an allowed reason.
KEPT_CANCELS = {"payment_timeout", "buyer_cancelled"}
def kept_outcome(k):
    return (k in ("confirmed", "paid") or (k.startswith("cancelled:") and k[10:] in KEPT_CANCELS)
            or (k.startswith("failed:") and k[7:] in allowed))
crashes = [l for l in lines("crashes.txt") if l]
fails = ["crash: " + c for c in crashes]
errors = [l for l in lines("errors.txt") if l]

# `buyer_cancelled` counts as a kept promise only where the load cancels (scenario 17, which
# matches each such order to a cancel the load logged). Anywhere else no buyer cancelled, so
# such an order is a cancel nobody asked for.
if sc != 17:
    a = load_json("audit.json") or {}
    n = ((a.get("promises") or {}).get("outcomes") or {}).get("cancelled:buyer_cancelled", 0)
    if n:
        fails.append(f"{n} orders cancelled as buyer_cancelled, in a run whose load cancels none")

# Every answer is judged. A run whose fault leaves every service up (1, 10 none; 2, 12, 17,
# 18 the orders, the provider or the buyers) has no 5xx and no request without a readable
# answer; any other has none outside its fault, from its issue to RECOVERY_S after its end.
RECOVERY_S = 10
fault_file = load_json("fault.json") or {}
window = None
if sc not in (1, 2, 10, 12, 17, 18):
    lo, hi = fault_file.get("issued_us") or fault_file.get("start_us"), fault_file.get("end_us")
    window = (lo, hi + RECOVERY_S * 1_000_000) if lo and hi else None
five, cut, first_out = 0, 0, None
for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
    if '"kind":"request"' not in line:
        continue
    o = json.loads(line)
    bad = o.get("status") is None or o.get("error") or o["status"] >= 500
    if not bad or (window and window[0] <= o["recv_at_us"] <= window[1]):
        continue
    if o.get("status") is None or o.get("error"):
        cut += 1
    else:
        five += 1
    first_out = first_out or o["recv_at_us"]
if (five or cut) and window is None and sc in (1, 2, 10, 12, 17, 18):
    fails.append(f"{five} answers 5xx and {cut} requests without a readable answer, in a run whose fault leaves every service up")
elif five or cut:
    where = (f"outside the fault's window and {RECOVERY_S} s of recovery (first at "
             f"{(first_out - window[1]) / 1e6:+.1f} s from its end)") if window else "with no fault window to excuse them"
    fails.append(f"{five} answers 5xx and {cut} requests without a readable answer {where}")

# A 409 sold_out (or not_enough_stock, for an order of q units) is allowed only while no unit
# (fewer than q) is free. The admin samples bracket each 409:
# the last one read before it was sent and the first one read after it was answered. When
# both show units in Redis and in MySQL, the later no more in Redis than the earlier, and no
# unit came back between them (failed and cancelled unchanged), the stores had free units the
# whole time it was refused.
samples = sorted((x for x in (load_json("load.json") or {}).get("admin_samples") or []
                  if x.get("view") and x.get("answered_ms") is not None), key=lambda x: x["at_ms"])
wrong_409, judged_409 = [], 0
if samples:
    import bisect
    answered_at = [x["answered_ms"] for x in samples]
    read_from = [x["at_ms"] for x in samples]
    for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
        if '"status":409' not in line:
            continue
        o = json.loads(line)
        if o.get("kind") != "request":
            continue
        sent, recv = o["sent_at_us"] // 1000, o["recv_at_us"] // 1000
        i = bisect.bisect_right(answered_at, sent) - 1
        j = bisect.bisect_left(read_from, recv)
        if i < 0 or j >= len(samples):
            continue
        judged_409 += 1
        a, b = samples[i]["view"], samples[j]["view"]
        # An order of q units is refused (not_enough_stock) while fewer than q are free.
        q = o.get("quantity", 1)
        if min(a.get("stock_redis") or 0, a.get("stock_db") or 0) >= q \
                and min(b.get("stock_redis") or 0, b.get("stock_db") or 0) >= q \
                and b["stock_redis"] <= a["stock_redis"] \
                and (b.get("failed"), b.get("cancelled")) == (a.get("failed"), a.get("cancelled")):
            wrong_409.append(f"user {o.get('user_id')} at {recv} ms: Redis had {a['stock_redis']} then {b['stock_redis']} units")
if wrong_409:
    fails.append(f"{len(wrong_409)} of {judged_409} buys answered 409 sold_out while Redis had free units all along, e.g. {wrong_409[:2]}")

# The audit: anything missing or unreadable fails the run.
try:
    a = json.load(open(at("audit.json")))
    ok, checks, rows, sold = a["ok"], a["checks"], a["order_rows"], a["sold_out_reached"]
    made, kept, outcomes = a["promises"]["made"], a["promises"]["kept"], a["promises"]["outcomes"]
    # Units (an order may hold several): promised and kept, sold, and left in each store.
    units_made = a["promises"].get("units_made", made)
    units_kept = a["promises"].get("units_kept", kept)
    units_sold = a.get("units_sold", rows)
    left = a.get("units_left") or {}
    settle = a["settle_ms"]
    status = {str(c["id"]): c["status"] for c in checks}
    if ok is not True or audit_rc != "0":
        fails.append(f"audit: ok={ok}, exit status {audit_rc}")
    if any(v not in ("PASS", "SKIP") for v in status.values()):
        fails.append("audit checks: " + ", ".join(f"{k} {v}" for k, v in status.items() if v not in ("PASS", "SKIP")))
    if payment:
        # The sale's end is every unit paid: the load saw it, and the audit's check 12 agrees.
        load = load_json("load.json") or {}
        reached, reached_s = load.get("all_paid_reached"), (load.get("all_paid") or {}).get("reached_s")
        if reached is not True:
            fails.append(f"all paid reached (load.json): {reached}")
        if status.get("12") != "PASS":
            fails.append(f"every unit paid (audit check 12): {status.get('12', 'not run')}")
        sold = reached is True and status.get("12") == "PASS"
    elif sold is not True:
        fails.append(f"sold out reached: {sold}")
    if room:
        # Every unit sold, and the waiting-room checks ran and passed (not skipped).
        if units_sold != a.get("initial_stock"):
            fails.append(f"units sold {units_sold} (order rows {rows}), not the stock {a.get('initial_stock')}: not every unit sold")
        for c in ("13", "14", "15"):
            if status.get(c) != "PASS":
                fails.append(f"waiting-room check {c}: {status.get(c, 'not run')}")
    # The audit's word is checked against its own figures.
    broken = {k: v for k, v in outcomes.items() if v and not kept_outcome(k)}
    if kept != made or broken:
        fails.append(f"promises: {kept} of {made} kept; broken: {broken}")
    paid_or_cancelled = lambda k: k == "paid" or (k.startswith("cancelled:") and k[10:] in KEPT_CANCELS)
    by_reason = ", ".join(f"{k.removeprefix('failed:')} {v}" + (" (allowed)" if k.removeprefix("failed:") in allowed else "")
                          for k, v in sorted(outcomes.items())
                          if k != "confirmed" and not paid_or_cancelled(k) and v) or "none"
    if payment:
        cancels = ", ".join(f"{k[10:]} {v}" for k, v in sorted(outcomes.items()) if v and paid_or_cancelled(k) and k != "paid")
        by_reason += f"; {outcomes.get('paid', 0)} paid, {outcomes.get('confirmed', 0)} confirmed" + (f", cancelled: {cancels}" if cancels else "")
    bad = [k for k in status if status[k] == "FAIL"]
    skip = [k for k in status if status[k] == "SKIP"]
    checks_cell = "; ".join(filter(None, [bad and "fail " + ", ".join(bad), skip and "skip " + ", ".join(skip)])) or "all pass"
    settle_cell = f"{settle['p99']:.0f} / {settle['max']:.0f} ms" if settle else "–"
    sold_cell = {True: "yes", False: "**no**"}.get(sold, "?")
    if payment:
        sold_cell = f"all paid at {reached_s:.1f} s" if sold and reached_s is not None else "**no**" if not sold else "all paid"
    if units_made != made:
        # Orders of several units: each count with its units.
        made, kept = f"{made} ({units_made} units)", f"{kept} ({units_kept} units)"
        rows = f"{rows} ({units_sold} units sold; left redis={left.get('redis')} mysql={left.get('mysql')})"
    if kept != made and units_kept != units_made:
        fails.append(f"units kept {units_kept} of {units_made} promised")
except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
    fails.append(f"audit: no usable audit.json (exit status {audit_rc}; {type(e).__name__}: {e})")
    made = kept = rows = "?"
    outcomes, by_reason, checks_cell, settle_cell, sold_cell = {}, "?", "?", "?", "?"

# The fault: it must have happened as designed and hit the sale.
fault = json.load(open(at("fault.json"))) if os.path.exists(at("fault.json")) else None
overlap = "no fault"
if sc == 2:
    overlap = "whole sale"
    if not outcomes.get("failed:chaos"):
        errors.append("the fail rate failed no order: the fault had no effect")
elif sc == 12:
    # The provider's counters and MySQL's payments show the callbacks came late and twice, and
    # that late successes were turned into refunds.
    stats = load_json("provider-stats.json") or {}
    counts = {}
    for l in lines("mysql-counts.tsv"):
        if l.count("\t") == 2:
            kind, state, n = l.split("\t")
            counts[(kind, state)] = int(n)
    late = stats.get("late", 0)
    decided = stats.get("succeeded", 0) + stats.get("declined", 0)
    twice = stats.get("callbacks_sent", 0) - decided
    refund_due = counts.get(("payment", "refund_due"), 0)
    overlap = (f"whole sale: {stats.get('charges', '?')} charges, {late} late, {twice} callbacks twice, "
               f"{refund_due} refund_due")
    if not stats:
        errors.append("no provider stats: the fault cannot be shown")
    if not late:
        errors.append("the provider planned no late callback: the fault had no effect")
    if twice <= 0:
        errors.append(f"no callback was delivered twice ({stats.get('callbacks_sent')} delivered, {decided} charges decided)")
    if not refund_due:
        errors.append("no payment ended refund_due: no late success reached a gateway")
elif sc == 17:
    # The fault is the buyers' cancels: they went through (200), many first refused as pending
    # (the order not confirmed yet, so the cancel raced its confirmation), and every order
    # MySQL says its buyer cancelled is one the load cancelled, and the other way round.
    c = ((load_json("load.json") or {}).get("payments") or {}).get("cancels") or {}
    ok200 = {}  # ticket -> reason, of each 200
    for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
        o = json.loads(line)
        if o.get("kind") == "cancel" and o.get("status") == 200:
            ok200[o["ticket"]] = o.get("reason")
    orders = {}
    for l in lines("orders.tsv"):
        if l.count("\t") == 2:
            ticket, state, reason = l.split("\t")
            orders[ticket] = (state, reason)
    by_buyer = {t for t, v in orders.items() if v == ("cancelled", "buyer_cancelled")}
    unexplained = sorted(by_buyer - ok200.keys())
    not_in_db = sorted(t for t, r in ok200.items() if r == "buyer_cancelled" and t not in by_buyer)
    # A cancel is idempotent: one that finds the order already cancelled by the expiry (its
    # window closed first) answers 200 with that order, reason payment_timeout, as MySQL has it.
    expired_first = sorted(t for t, r in ok200.items()
                           if r == "payment_timeout" and orders.get(t) == ("cancelled", "payment_timeout"))
    other_200 = sorted(t for t, r in ok200.items()
                       if r != "buyer_cancelled" and t not in expired_first)
    refused = c.get("refused") or {}
    pending = refused.get("pending", 0)
    others = ", ".join(f"{n} {k}" for k, n in sorted(refused.items()) if k != "pending")
    ended = c.get("ended") or {}
    overlap = (f"whole sale: {c.get('buyers_cancelling', '?')} buyers cancelling, "
               f"{c.get('requests', '?')} cancels: {c.get('cancelled', '?')} × 200 "
               f"({ended.get('cancelled_after_pending', '?')} after a pending refusal), "
               f"{pending} × 409 pending" + (f", 409 {others}" if others else "") +
               f", {ended.get('gave_up', '?')} gave up; {len(by_buyer)} buyer_cancelled orders, "
               f"{len(by_buyer) - len(unexplained)} explained" +
               (f"; {len(expired_first)} found their order cancelled by its deadline first"
                if expired_first else ""))
    if not orders:
        errors.append("no orders read from MySQL (orders.tsv): the cancels cannot be explained")
    if not c.get("cancelled"):
        errors.append("no cancel was answered 200: the storm did not happen")
    if not pending:
        errors.append("no cancel was refused as pending: none raced its order's confirmation")
    if len(ok200) != c.get("cancelled"):
        errors.append(f"{len(ok200)} tickets with a 200 cancel in the history, {c.get('cancelled')} in load.json")
    if unexplained:
        fails.append(f"{len(unexplained)} buyer_cancelled orders no cancel of the load explains, e.g. {unexplained[:3]}")
    if not_in_db:
        fails.append(f"{len(not_in_db)} cancels answered 200 whose order MySQL does not have cancelled by its buyer, e.g. {not_in_db[:3]}")
    if other_200:
        fails.append(f"{len(other_200)} cancels answered 200 without reason buyer_cancelled (nor a payment_timeout MySQL agrees with), e.g. {other_200[:3]}")
elif sc == 18:
    # The fault is the buyers' double pays: two keys at once, one of them refused while the
    # other is in progress. MySQL's payments must show no two attempts of one ticket recorded
    # and unsettled at once, and at most one success per ticket.
    p = (load_json("load.json") or {}).get("payments") or {}
    dp = p.get("double_pay") or {}
    in_progress = (p.get("refused") or {}).get("payment_in_progress", 0)
    stats = load_json("provider-stats.json") or {}
    # created_at_ms is the gateway's clock when the request came, before it waited for the
    # order's row lock, so it is a lower bound of when the row was recorded. An upper bound:
    # the 202 that answered it (the load's clock, the same machine), and its decision, at
    # least the provider's fixed delay before the callback settled it (no late callbacks).
    evidence = (fault or {}).get("evidence") or []
    delay = next((int(w.split()[1]) for e in evidence for w in e.split(" --")
                  if w.startswith("delay-ms ")), None)
    answered = {}
    for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
        if '"kind":"pay"' in line:
            o = json.loads(line)
            if o.get("status") == 202 and o.get("payment_id"):
                answered[o["payment_id"]] = min(o["at_ms"], answered.get(o["payment_id"], o["at_ms"]))
    inf = float("inf")
    by = {}
    for l in lines("payments.tsv"):
        if l.count("\t") == 4:
            ticket, pid, state, created, settled = l.split("\t")
            settled = inf if settled == "-" else int(settled)
            latest = min(answered.get(pid, inf), settled - delay if delay is not None else inf)
            by.setdefault(ticket, []).append((int(created), settled, state, pid, latest))
    n_payments = sum(map(len, by.values()))
    unsent = sum(1 for ps in by.values() for x in ps if x[2] == "unsent")
    overlapping, apparent, twice = [], 0, []
    for ticket, ps in sorted(by.items()):
        sent = sorted(x for x in ps if x[2] != "unsent")
        for i, x in enumerate(sent):
            for y in sent[i + 1:]:
                if y[0] < x[1] and x[0] < y[1]:
                    # [created_at_ms, settled_at_ms) overlap; recorded while the other was
                    # unsettled for sure when its latest recording time says so.
                    if y[4] < x[1] and x[4] < y[1]:
                        overlapping.append(f"{ticket}: {x[3]} [{x[0]}, {x[1]}) and {y[3]} recorded by {y[4]}")
                    else:
                        apparent += 1
        if sum(1 for x in ps if x[2] in ("succeeded", "refund_due")) > 1:
            twice.append(ticket)
    overlap = (f"whole sale: {dp.get('pairs', '?')} pairs of keys at once, {in_progress} × 409 "
               f"payment_in_progress, {dp.get('both_accepted', '?')} pairs both 202; MySQL: {n_payments} "
               f"payments of {len(by)} tickets ({unsent} unsent), {len(overlapping)} recorded while "
               f"another was unsettled ({apparent} more overlap by created_at_ms alone, recorded maybe "
               f"after the other settled), {len(twice)} tickets with two successes; provider: "
               f"{stats.get('charges', '?')} charges")
    if not by:
        errors.append("no payments read from MySQL (payments.tsv)")
    if delay is None:
        errors.append("the provider's delay is not in fault.json: overlaps cannot be told")
    if not dp.get("pairs"):
        errors.append("the load paid no pair of keys at once")
    if not in_progress:
        errors.append("no 409 payment_in_progress: no pair met the first payment in progress, the run proves nothing")
    if overlapping:
        fails.append(f"{len(overlapping)} times a payment was recorded while another of its ticket was unsettled, e.g. {overlapping[:2]}")
    if twice:
        fails.append(f"{len(twice)} tickets with more than one succeeded or refund_due payment, e.g. {twice[:3]}")
elif sc not in (1, 10):
    if not fault or not fault["verified"] or not fault["start_us"] or not fault["end_us"]:
        overlap = "**not injected**" if not fault else "**not verified**"
        errors.append("the fault was not injected and verified")
    else:
        start, end = fault["start_us"], fault["end_us"]
        in_flight, buying, inside, answered = set(), 0, 0, 0
        seen = {}  # what the buyers were answered while the fault lasted, by status
        for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
            o = json.loads(line)
            if o.get("kind") == "request":
                if o["sent_at_us"] <= start < o["recv_at_us"]:
                    buying += 1
                    if o.get("status") == 202 and o.get("ticket"):
                        in_flight.add(o["ticket"])
                if o.get("status") is not None and start <= o["recv_at_us"] <= end:
                    answered += 1
                    inside += o.get("status") == 202
                    seen[o["status"]] = seen.get(o["status"], 0) + 1
            elif o.get("kind") == "settled":
                t = o.get("reserved_at_ms")
                t = t * 1000 if t is not None else o.get("answered_at_us")
                c = o.get("confirmed_at_ms")
                done = o.get("status") in ("confirmed", "paid", "cancelled") and c is not None and c * 1000 <= start
                if t is not None and t <= start and not done:
                    in_flight.add(o["ticket"])
        json.dump({"start_us": start, "end_us": end, "reservations_in_flight": len(in_flight),
                   "requests_in_flight": buying, "answered_inside": answered,
                   "answered_202_inside": inside,
                   "answered_inside_by_status": {str(k): v for k, v in sorted(seen.items())},
                   "evidence": fault["evidence"]}, open(at("overlap.json"), "w"), indent=1)
        statuses = ", ".join(f"{n} × {k}" for k, n in sorted(seen.items())) or "none"
        overlap = (f"{len(in_flight)} in flight, {answered} answered ({statuses}) "
                   f"inside {(end - start) / 1e6:.1f} s")
        if sc in (6, 15) and not seen.get(409):
            errors.append("no buy was answered 409 sold_out while ZooKeeper was down: the fault missed the sell-out")
        if sc == 4:
            # The gateway died holding buys it had reserved and not answered: the buyers' side
            # of its own gauge (in the evidence) is requests to it cut without an answer.
            cut = 0
            for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
                o = json.loads(line)
                if (o.get("kind") == "request" and o.get("gateway") == os.environ["GW0_URL"]
                        and o.get("status") is None and o["sent_at_us"] <= start):
                    cut += 1
            overlap = f"{cut} buys to gateway 0 cut by the kill; " + overlap
            if not cut:
                errors.append("no buy to gateway 0 was cut by the kill: none was between its reservation and its answer")
        if sc == 13:
            # The fault is on the admissions: the room was admitting when the gateway died,
            # and buyers were admitted and bought while it was down.
            shown = bought = 0
            for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
                o = json.loads(line)
                if o.get("kind") == "wr_admitted" and start <= o["at_ms"] * 1000 <= end:
                    shown += 1
                elif o.get("kind") == "wr_buy" and o.get("status") in (200, 202) and start <= o["sent_at_us"] <= end:
                    bought += 1
            overlap = ("; ".join(e for e in fault["evidence"] if "gateway 0" in e) + f"; {shown} admissions shown, "
                       f"{bought} buys answered with a ticket; " + overlap)
            if not shown and not bought:
                errors.append("no buyer was admitted or bought while the gateway was down")
            if not any("admitted, not bought" in e and not e.startswith("0 ") for e in fault["evidence"]):
                errors.append("the room was not admitting when the gateway was killed")
            own = [int(e.split(": ")[1].split()[0]) for e in fault["evidence"]
                   if e.startswith("gateway 0's own count: ")]
            if not own or not own[0]:
                errors.append("gateway 0 had handed out no admission token itself when it was killed")
        elif sc == 11:
            # The fault is on the expiries, not the reservations: the victim was cancelling
            # unpaid orders when it was killed, and orders were still cancelled once it was back.
            e = load_json("expiry.json") or {}
            at_restart, at_end = e.get("cancelled_at_restart"), e.get("cancelled_at_end")
            after = e.get("victim_expired_after_restart")
            overlap = (f"worker {e.get('victim')} had cancelled {e.get('victim_expired_at_kill')}; MySQL "
                       f"cancelled {e.get('cancelled_at_kill')} at the kill, {at_restart} at the restart, "
                       f"{at_end} at the end ({after} by the restarted worker); " + overlap)
            if not e.get("victim_expired_at_kill"):
                errors.append("the killed worker had cancelled no unpaid order")
            if at_restart is None or at_end is None or at_end <= at_restart:
                errors.append(f"no order was cancelled after the restart ({at_restart} -> {at_end}): "
                              "the fault missed the expiries")
        elif not in_flight:
            errors.append("no reservation was in flight when the fault started")
        # Buyers met the fault: they were answered while it lasted. While Redis is down the
        # answers are 503s, so a 202 is not required.
        if not answered:
            errors.append("no buy was answered while the fault lasted")

verdict = "+".join(v for v, why in (("FAIL", fails), ("ERROR", errors)) if why) or "PASS"
open(at("verdict"), "w").write(verdict + "\n")
open(at("reasons.txt"), "w").write("".join(f"{r}\n" for r in fails + errors))
crash_cell = "; ".join(crashes) or "0"
speed_cell = f"paced {rate}/s" if speed != "herd" else f"herd ({pay_herd_rate}/s)" if payment else "herd"
if room:
    speed_cell = "waiting room"  # buyers poll as the room tells them: no --rate
cells = [f"{sc} {name}", speed_cell, run,
         " ".join(f"**{v}**" for v in verdict.split("+")) if verdict != "PASS" else "PASS",
         made, kept, by_reason, sold_cell, overlap, crash_cell, settle_cell, checks_cell, rows,
         recovered, took]
print("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
PY
}
