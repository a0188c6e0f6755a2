#!/usr/bin/env bash
# The performance figures of the buy path and the drain, each next to a ceiling measured in the
# same run on the same machine (see docs/BENCHMARKS.md for what each figure means).
#
#   scripts/bench.sh                  every figure, then rewrites the results block of
#                                     docs/BENCHMARKS.md
#   scripts/bench.sh --quick          smoke run: 3 s per figure, small N; prints the table only
#   scripts/bench.sh --figures "1 2"  a subset (1..13; wrk runs with 1; (2N), (2E), (2L) and
#                                     (2S) with 2; (1R) with both); prints the table only
#   scripts/bench.sh --profile        perf-record the gateway during (2), (2S) and (3) and the worker
#                                     during (6); the figures are then perturbed: no doc rewrite
#   scripts/bench.sh --report FILE    write the results block to FILE (any mode)
#   scripts/bench.sh --no-report      never write the doc
#
# The figures: (1) bare HTTP (`GET /livez`; (1w) with wrk); (2) the accept path as buyers use
# it, one HS256 token each, next to (2N) the same with authentication off (gateway --dev,
# SECKILL_AUTH_MODE=none; no tokens) and (2E) with EdDSA tokens (key ed-1 of
# testdata/jwt/jwks.json, SECKILL_AUTH_JWKS_FILE), each of the three on a freshly started
# gateway and a fresh product; the report prints (2) − (2N) and (2E) − (2N), the gateway CPU per
# request that verifying a token costs (goals: HS256 ≤ 5 µs; EdDSA ≤ one Ed25519 verify, from
# criterion, + 5 µs; judged on the 95 % interval of BENCH_AUTH_ROUNDS alternated rounds); (2L) (2) with the per-user limit on, and (2S) the same at
# BENCH_SAT_CONCURRENCY (512), where the machine is CPU-bound; with (1), (1R) /livez paced at
# (2L)'s accept rate, the floor at (2L)'s load; (3) the sold-out path; (4) sync
# mode; (5) the Redis ceiling (one buyer per call; (5B) 8 per call), and (5G) Redis's floor, a
# GET at the same concurrency; scripts/accept-cost.py prints (2L)'s and (2S)'s costs as ratios
# to these floors; (6) the
# batched drain, (7) the raw MySQL ceiling, (8) the row-at-a-time drain; (9) end to end, (9L)
# at a lower rate; (10) the payment deadline: from each unpaid order's pay_by_ms to its unit
# back on sale in Redis (p50, p99; goal p99 ≤ 1 s at
# 10,000 expiring orders) and the expiry throughput next to the drain rate of (6). (10) is not
# a row of the table (`seckill-bench report` does not know it yet): its line follows the table
# and goes into the results block's note. (11) the waiting room: BENCH_QUEUE_BUYERS buyers join a
# product's line (1,000 units), then poll it until admitted, sold out or bought
# (`seckill-bench queue-sale`); the polls per second the gateway sustains, as a ratio to (1)
# /livez when (1) ran; the Redis CPU per poll (from /proc/<redis pid>/stat over the polling
# phase); and the time from the start until the last unit is sold, next to the same sale
# without a waiting room. Like (10), its line follows the table and goes into the note.
# (12) live streams against polling: BENCH_LIVE_BUYERS buyers of a waiting-room product from
# their join to their confirmation, through two gateways (`seckill-bench live-sale`, two
# processes at once), polling as advised, polling every 300 ms and on streams, in
# BENCH_LIVE_ROUNDS alternated rounds each (admissions at BENCH_LIVE_ADMIT_PER_SEC): CPU
# per buyer of the gateways, Redis and the machine, requests per buyer, and the time from a
# confirmation to its buyer knowing it (p50, p99), drawn by percentile to plots/f12.svg. Its
# line follows the table and goes into the note too.
# (13) traces: the accept path of (2) with traces off, at 1 % and at 100 %, exported over
# OTLP/HTTP to a sink, in BENCH_TRACE_ROUNDS alternated rounds on a fresh gateway each: its
# CPU per accept, and each "on" over "off" with the 95 % interval over the rounds (goal: 1 %
# under 1.03). Its line follows the table and goes into the note too.
# (14) quantities: the accept path of (2) with orders of 1 unit, of 4 and of 1 to 4 (a product
# sold up to 4 per buyer), in BENCH_QTY_ROUNDS alternated rounds on a fresh gateway each: the
# gateway's and Redis's CPU per accepted order and per unit, and 4 ÷ 1 per order with the 95 %
# interval over the rounds (goal: at most 1.3). Its line follows the table and goes into the
# note too.
#
# Each load-style figure ((1), (2), (2N), (2E), (2L), (3), (4), (9), (9L)) is also drawn over
# time (`seckill-bench plot load` of its summary: answers per second and latency p50/p99 per
# outcome) to OUT/plots/f<figure>.svg; when the doc is rewritten, they are copied to img/bench/
# next to it and the table links them. The drains, (5), (7), (10) and (11) have no time series.
#
# A figure counts only when its run was valid (`seckill-bench report table`, rules in
# bench/src/report/rules.rs): otherwise it shows INVALID with the reason, never met, and the
# script exits 1. (1) counts only 200s; (2), (2N), (2E) and (2L) only 202s, from buyers with the
# figure's tokens (HS256, none, EdDSA, HS256); (3) only 409s with at least
# 99 % from the marker, (4) only 201s (any 503, error or timeout voids a run); (5) counts only
# calls that reserved a unit; (6) and (8) need every order as one row; (9) and (9L) need only
# 202s, every ticket confirmed, and an open loop (constant arrival rate whatever the answers,
# as wrk2) that achieved its offered rate within 5 % without running out of in-flight slots.
# (10) counts only when every buy was accepted, every order was confirmed before the first
# deadline, every unit came back, and MySQL and Redis agree at the end (`seckill-bench expiry`).
#
# Settings (environment): BENCH_QUEUE_BUYERS (buyers of (11), 100000), BENCH_QUEUE_STOCK (1000),
# BENCH_QUEUE_ADMIT_PER_SEC (1000), BENCH_QUEUE_FACTOR (1.5), BENCH_QUEUE_CONCURRENCY (256),
# BENCH_QUEUE_STARTS_IN (s from the product's creation to the start; default: the tool's),
# BENCH_DURATION (s per figure, 10), BENCH_CONCURRENCY (64),
# BENCH_ENGINE (hyper), BENCH_THREADS (load tool threads; default one per CPU),
# BENCH_DRAIN_N (orders of (6) and (7), 20000), BENCH_ROW_N (orders of (8), 2000),
# BENCH_BATCH (worker batch size of (6) and (7), 500), BENCH_LINGER_MS (worker batch linger, 20),
# BENCH_HTTP_WORKERS (gateway actix workers; default: the gateway's own default),
# BENCH_MAX_IN_FLIGHT (100000), BENCH_E2E_FRACTION (rate of (9) as a share of (2), 0.5),
# BENCH_E2E_RATE (a fixed rate for (9) instead, req/s), BENCH_E2E_LOW_FRACTION (the rate of
# (9L), a second run of (9) at a lower rate, 0.15), BENCH_E2E_MAX_IN_FLIGHT (the open loop's
# in-flight slots in (9), 512), BENCH_EXPIRY_N (expiring orders of (10), 10000),
# BENCH_EXPIRY_WINDOW_SECS (their payment window, 10: the buys and the confirmations must fit
# in it), BENCH_ED25519_VERIFY_US (one Ed25519 verify, µs, for (2E)'s
# goal; default: criterion's estimate in $CARGO_TARGET_DIR/criterion/ed25519_verify, left by
# `cargo bench -p seckill-gateway --bench auth`, if there is one), BENCH_KAFKA_LINGER_MS
# (gateway producer linger; default: the gateway's own default), BENCH_SAT_CONCURRENCY (the
# concurrency of (2S), 512), BENCH_AUTH_ROUNDS (rounds of (2), (2N) and (2E), each round in
# another order, whose 95 % interval judges the authentication goals, 5), BENCH_TRACE_ROUNDS
# (rounds of (13), 5), BENCH_BIN (a directory with gateway, worker and seckill-bench to use
# instead of building: before/after comparisons; its seckill-bench must have `report`).
# Gateways listen on 28081.., workers' health on 29191..; every group of figures runs on a
# fresh namespace (Redis prefix, ZooKeeper root, MySQL database sk_<ns>, topic, group), all
# removed at the end. Binaries: release, in CARGO_TARGET_DIR (default target/).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
[[ -f $HOME/.cargo/env ]] && . "$HOME/.cargo/env"

QUICK=0 PROFILE=0 FIGURES="1 2 3 4 5 6 7 8 9 10 11 12 13 14" REPORT=auto
while (($#)); do
    case $1 in
        --quick) QUICK=1; shift ;;
        --profile) PROFILE=1; shift ;;
        --figures) FIGURES=$2; shift 2 ;;
        --report) REPORT=$2; shift 2 ;;
        --no-report) REPORT=""; shift ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { print }' "$0"; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
if ((QUICK)); then
    : "${BENCH_DURATION:=3}" "${BENCH_DRAIN_N:=5000}" "${BENCH_ROW_N:=500}" "${BENCH_EXPIRY_N:=2000}"
    : "${BENCH_QUEUE_BUYERS:=10000}"
fi
: "${BENCH_DURATION:=10}" "${BENCH_CONCURRENCY:=64}" "${BENCH_ENGINE:=hyper}" "${BENCH_THREADS:=}"
: "${BENCH_DRAIN_N:=20000}" "${BENCH_ROW_N:=2000}" "${BENCH_BATCH:=500}" "${BENCH_LINGER_MS:=20}"
: "${BENCH_HTTP_WORKERS:=}" "${BENCH_MAX_IN_FLIGHT:=100000}" "${BENCH_E2E_FRACTION:=0.5}"
: "${BENCH_KAFKA_LINGER_MS:=}" "${BENCH_E2E_RATE:=}" "${BENCH_E2E_LOW_FRACTION:=0.15}" "${BENCH_PARTITIONS:=8}"
: "${BENCH_E2E_MAX_IN_FLIGHT:=512}" "${BENCH_ED25519_VERIFY_US:=}" "${BENCH_SAT_CONCURRENCY:=512}"
: "${BENCH_AUTH_ROUNDS:=5}"
: "${BENCH_TRACE_ROUNDS:=5}" "${BENCH_QTY_ROUNDS:=5}"
: "${BENCH_EXPIRY_N:=10000}" "${BENCH_EXPIRY_WINDOW_SECS:=10}"
: "${BENCH_QUEUE_BUYERS:=100000}" "${BENCH_QUEUE_STOCK:=1000}" "${BENCH_QUEUE_ADMIT_PER_SEC:=1000}"
: "${BENCH_QUEUE_FACTOR:=1.5}" "${BENCH_QUEUE_CONCURRENCY:=256}" "${BENCH_QUEUE_STARTS_IN:=}"
: "${BENCH_LIVE_BUYERS:=20000}" "${BENCH_LIVE_STOCK:=1000}" "${BENCH_LIVE_ROUNDS:=2}"
: "${BENCH_LIVE_ADMIT_PER_SEC:=50}"
if [[ $REPORT == auto ]]; then
    REPORT=""
    if ((!QUICK && !PROFILE)) && [[ $FIGURES == "1 2 3 4 5 6 7 8 9 10 11 12 13 14" ]]; then
        REPORT=docs/BENCHMARKS.md
    fi
fi
want() { [[ " $FIGURES " == *" $1 "* ]]; }
D=$BENCH_DURATION C=$BENCH_CONCURRENCY
GW_PORTS=(28081 28082 28083 28084) WK_PORTS=(29191 29192)
TOKEN=bench-admin-token-of-at-least-32-bytes
ADMISSION_SECRET=bench-admission-secret-of-at-least-32-bytes
# Buyers send real tokens (the load tool signs one per buyer), so figures pay verification.
JWT_SECRET=bench-hs256-secret-of-at-least-32-bytes
# (2E): EdDSA tokens signed with ed-1, whose public key the gateway reads from the JWKS file.
JWKS_FILE=$ROOT/testdata/jwt/jwks.json ED_KEY=$ROOT/testdata/jwt/ed-1.pem ED_KID=ed-1

for tool in wrk redis-benchmark python3 curl; do
    command -v "$tool" >/dev/null || die "$tool is missing: scripts/dev-up.sh installs it"
done
if ((PROFILE)); then
    command -v perf >/dev/null || die "perf is missing (Debian package linux-perf)"
fi
if pgrep -f 'scripts/chaos\.sh' >/dev/null; then
    warn "scripts/chaos.sh is running: it shares the CPUs and restarts services; figures will be low"
fi

scripts/dev-up.sh
eval "$(dev_env)"
if [[ -n ${BENCH_BIN:-} ]]; then
    BIN=$(cd "$BENCH_BIN" && pwd -P)
    log "using the binaries in $BIN (BENCH_BIN); not building"
else
    log "building (release)"
    cargo build --release --bin gateway --bin worker --bin seckill-bench
    BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
fi
"$BIN/seckill-bench" report --help >/dev/null 2>&1 ||
    die "$BIN/seckill-bench has no 'report' subcommand: copy a current target/release/seckill-bench there"
RUN=b$(date +%H%M%S)x$RANDOM
OUT=$DEV_DIR/bench/$RUN
mkdir -p "$OUT"
BASE_MYSQL=${SECKILL_MYSQL_URL%/*}
log "run $RUN: logs and raw results in $OUT"

# The rows the report shows: each figure's labels, added as it starts. A figure that started
# and left no result is INVALID.
RAN=()
ran() { RAN+=("$@"); }

# The figures, in the order they run; each file runs in this shell.
# shellcheck source=bench/processes.sh
. "$ROOT/scripts/bench/processes.sh"
# shellcheck source=bench/gateway_figures.sh
. "$ROOT/scripts/bench/gateway_figures.sh"
# shellcheck source=bench/trace_figures.sh
. "$ROOT/scripts/bench/trace_figures.sh"
# shellcheck source=bench/quantity_figures.sh
. "$ROOT/scripts/bench/quantity_figures.sh"
# shellcheck source=bench/drain_figures.sh
. "$ROOT/scripts/bench/drain_figures.sh"
# shellcheck source=bench/end_to_end.sh
. "$ROOT/scripts/bench/end_to_end.sh"

# --------------------------------------------------------------- table ---
for k in "${!PIDS[@]}"; do stop_proc "$k"; done
SETTINGS="duration ${D} s per figure, concurrency $C, engine $BENCH_ENGINE, load tool threads ${BENCH_THREADS:-$(nproc) (one per CPU)}; \
gateway SECKILL_RATE_LIMIT_PER_USER_PER_SEC=0 SECKILL_RATE_LIMIT_PER_ADDRESS_PER_SEC=0 SECKILL_MAX_IN_FLIGHT=$BENCH_MAX_IN_FLIGHT\
${BENCH_HTTP_WORKERS:+ SECKILL_HTTP_WORKERS=$BENCH_HTTP_WORKERS}${BENCH_KAFKA_LINGER_MS:+ SECKILL_KAFKA_LINGER_MS=$BENCH_KAFKA_LINGER_MS}; \
buyers: one HS256 token each ((2N): none, gateway --dev SECKILL_AUTH_MODE=none; (2E): EdDSA, key $ED_KID of testdata/jwt/jwks.json); \
worker SECKILL_WORKER_BATCH_SIZE=$BENCH_BATCH SECKILL_WORKER_BATCH_LINGER_MS=$BENCH_LINGER_MS; \
(6)/(7) $BENCH_DRAIN_N orders, (8) $BENCH_ROW_N orders; (9) open loop at ${BENCH_E2E_RATE:-$BENCH_E2E_FRACTION x the 202s/s of (2)}${BENCH_E2E_RATE:+ req/s}, at most $BENCH_E2E_MAX_IN_FLIGHT in flight; \
binaries ${BENCH_BIN:+from $BENCH_BIN, }release build of commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- gateway worker shared bench || echo ' with local changes')"
CHAOS_NOTE=""
if pgrep -f 'scripts/chaos\.sh' >/dev/null; then CHAOS_NOTE="scripts/chaos.sh was running during this run."; fi
# (10)'s line, next to the drain rate of (6) when it ran (its steady rate, as the report
# computes it: the rows after the first transaction over the time after it). EXPIRY_OK=0 when
# (10) ran and its run does not count.
EXPIRY_LINE="" EXPIRY_OK=1
if want 10; then
    EXPIRY_LINE=$(python3 - "$OUT/f10.json" "$OUT/f6.json" "$BENCH_EXPIRY_N" <<'EOF'
import json, sys
try:
    x = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print(f"(10) payment expiry, {sys.argv[3]} unpaid orders: **INVALID**: no result (see f10.log).")
    sys.exit(1)
try:
    d = json.load(open(sys.argv[2]))
    span = d["last"] - d["first_done"]
    drain = (d["rows"] - d["batch"]) / span if span > 0 else None
except (OSError, ValueError, KeyError, TypeError):
    drain = None
lag, rate = x.get("lag_ms"), x.get("orders_per_s")
ms = lambda v: f"{v:,.1f} ms"
goal = {True: "met", False: "**no**", None: "not judged"}[x.get("goal_met")]
s = (f"(10) payment expiry, {x['orders']:,} unpaid orders (window {x['window_secs']} s, "
     f"deadlines over {x['deadline_span_s']:.2f} s): pay_by → unit back on sale in Redis ")
s += f"p50 {ms(lag['p50'])}, p99 {ms(lag['p99'])}, max {ms(lag['max'])}" if lag else "n/a"
s += f" (goal p99 ≤ 1 s: {goal}); expiry "
s += f"{rate:,.0f} orders/s over {x['expiry_s']:.2f} s" if rate else "throughput n/a"
if rate and drain:
    s += f" = {rate / drain:.2f} × (6)'s steady drain ({drain:,.0f} orders/s)"
elif rate:
    s += " ((6) did not run)"
w = x.get("worker_lag")
if w and w.get("count"):
    le = lambda v: "n/a" if v is None else f"≤ {v} s"
    s += f"; the worker's own histogram: p50 {le(w.get('p50_le_s'))}, p99 {le(w.get('p99_le_s'))}"
if not x.get("ok"):
    bad = x.get("problems", []) + [
        f"{c['name']}: {c['found']}" for c in x.get("checks", []) if not c["ok"]
    ]
    s += ". **INVALID**: " + "; ".join(bad)
print(s + ".")
sys.exit(0 if x.get("ok") else 1)
EOF
) || EXPIRY_OK=0
fi
# (11)'s line: polls/s as a ratio to (1)'s /livez when (1) ran. QUEUE_OK=0 when (11) ran and
# its run does not count.
QUEUE_LINE="" QUEUE_OK=1
if want 11; then
    livez=0
    [[ -f $OUT/f1.json ]] && livez=$(outcome "$OUT/f1.json" 200 per-sec)
    QUEUE_LINE=$(python3 - "$OUT/f11.json" "$livez" "$BENCH_QUEUE_BUYERS" <<'EOF'
import json, sys
try:
    q = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print(f"(11) waiting room, {sys.argv[3]} buyers: **INVALID**: no result (see f11.log).")
    sys.exit(1)
livez = float(sys.argv[2] or 0)
pps = q.get("polls_per_s")
s = (f"(11) waiting room, {q['joined']:,} buyers in line (joined at {q['joins_per_s']:,.0f}/s), "
     f"{q['stock']:,} units (admit {q['admit_per_sec']:g}/s, factor {q['max_admitted_factor']:g}): ")
s += f"{pps:,.0f} polls/s sustained" if pps else "polls/s n/a"
if pps and livez > 0:
    s += f" = {pps / livez:.2f} × (1)'s /livez ({livez:,.0f} req/s)"
elif pps:
    s += " ((1) did not run)"
cpu = q.get("redis_cpu_us_per_poll")
s += f"; Redis {cpu:.1f} µs CPU per poll" if cpu is not None else "; Redis CPU n/a"
sec = lambda ms: "n/a" if ms is None else f"{ms / 1000:.2f} s"
s += f"; start → last unit sold {sec(q.get('sold_out_ms'))}"
b = q.get("baseline")
if b:
    s += f", against {sec(b.get('sold_out_ms'))} without a waiting room"
    if q.get("sold_out_ms") and b.get("sold_out_ms"):
        s += f" ({q['sold_out_ms'] / b['sold_out_ms']:.1f} ×)"
if not q.get("ok"):
    s += ". **INVALID**: " + "; ".join(q.get("problems", []))
print(s + ".")
sys.exit(0 if q.get("ok") else 1)
EOF
) || QUEUE_OK=0
fi
# (12)'s line, and its plot: the confirmation → buyer delay by percentile, polling against
# streams. LIVE_OK=0 when (12) ran and a round does not count.
LIVE_LINE="" LIVE_OK=1
if want 12; then
    LIVE_LINE=$(python3 scripts/bench/live_line.py "$OUT" "$(getconf CLK_TCK)" "$BENCH_LIVE_BUYERS" \
        "$BENCH_LIVE_STOCK" "$BENCH_LIVE_ROUNDS") || LIVE_OK=0
    mkdir -p "$OUT/plots"
    "$BIN/seckill-bench" plot live $(for f in "$OUT"/f12-poll-*-?.json; do echo --poll "$f"; done) \
        $(for f in "$OUT"/f12-poll300-*-?.json; do echo --poll-fixed "$f"; done) \
        $(for f in "$OUT"/f12-stream-*-?.json; do echo --stream "$f"; done) \
        --title "(12) confirmation → buyer knows: polling against live streams" \
        --out "$OUT/plots/f12.svg" || warn "(12) no plot"
fi
# (13)'s line: what traces cost an accept. TRACE_OK=0 when (13) ran and a round is missing.
TRACE_LINE="" TRACE_OK=1
if want 13; then
    TRACE_LINE=$(python3 scripts/bench/trace_line.py "$OUT" "$(getconf CLK_TCK)" "$BIN/seckill-bench" \
        "$BENCH_TRACE_ROUNDS") || TRACE_OK=0
    [[ -z $TRACE_LINE ]] || log "$TRACE_LINE"
fi
# (14)'s line: what an order of several units costs an accept. QTY_OK=0 when (14) ran and a
# round is missing.
QTY_LINE="" QTY_OK=1
if want 14; then
    QTY_LINE=$(python3 scripts/bench/quantity_line.py "$OUT" "$(getconf CLK_TCK)" \
        "$BENCH_QTY_ROUNDS") || QTY_OK=0
    [[ -z $QTY_LINE ]] || log "$QTY_LINE"
fi
# The cost of an accept with the per-user limit on, as ratios to floors measured in this run
# (scripts/accept-cost.py): gateway CPU per accept of (2L) ÷ per /livez of (1), Redis CPU per
# accept ÷ per GET of (5G) at the same concurrency, the whole machine's, (2S)'s peak ÷ (1) with
# its costs as ratios to the same floors, and (2L)'s costs ÷ (1R)'s.
CPU_LINE=""
if want 2 && want 1; then
    CPU_LINE=$(BENCH_SAT_CONCURRENCY=$BENCH_SAT_CONCURRENCY python3 scripts/accept-cost.py "$OUT" "$(getconf CLK_TCK)" "$BIN/seckill-bench") || CPU_LINE=""
    [[ -z $CPU_LINE ]] || log "$CPU_LINE"
fi
NOTE=$CHAOS_NOTE
for l in "$EXPIRY_LINE" "$QUEUE_LINE" "$LIVE_LINE" "$TRACE_LINE" "$QTY_LINE" "$CPU_LINE"; do [[ -z $l ]] || NOTE+=${NOTE:+ }$l; done
MODE=full
((QUICK)) && MODE=quick
((PROFILE)) && MODE=profile
# The table, the drain details and the CPU table; with REPORT, the results block of that file
# too. Exits 1 when a figure's run was invalid, and so does this script then.
# (2E)'s goal: one Ed25519 verify, as given or as criterion measured it on this machine.
ED25519=()
CRITERION_ED25519=${CARGO_TARGET_DIR:-$ROOT/target}/criterion/ed25519_verify/new/estimates.json
if ! want 2; then
    :
elif [[ -n $BENCH_ED25519_VERIFY_US ]]; then
    ED25519=(--ed25519-verify-us "$BENCH_ED25519_VERIFY_US")
elif [[ -f $CRITERION_ED25519 ]]; then
    ED25519=(--ed25519-criterion "$CRITERION_ED25519")
else
    warn "(2E) is not judged: no Ed25519 verify cost (run 'cargo bench -p seckill-gateway --bench auth' or set BENCH_ED25519_VERIFY_US)"
fi
# The time series of the load-style figures that ran, titled as in the table.
declare -A PLOT_TITLE=([f1]="(1) bare HTTP, GET /livez" [f2]="(2) accept path, HS256 tokens"
    [f2n]="(2N) accept path, authentication off" [f2e]="(2E) accept path, EdDSA tokens"
    [f2l]="(2L) accept path, per-user limit on" [f3]="(3) sold-out path, marker set"
    [f4]="(4) sync mode" [f9]="(9) end to end, open loop" [f9l]="(9L) end to end, lower rate")
PLOTS=$OUT/plots PLOT_ARGS=()
mkdir -p "$PLOTS"
# (BENCH_BIN's seckill-bench may be from before `plot`: then no time series.)
"$BIN/seckill-bench" plot --help >/dev/null 2>&1 && PLOT_ARGS=(--plots "$PLOTS")
for f in f1 f2 f2n f2e f2l f3 f4 f9 f9l; do
    [[ -f $OUT/$f.json && ${#PLOT_ARGS[@]} -gt 0 ]] || continue
    "$BIN/seckill-bench" plot load --summary "$OUT/$f.json" --out "$PLOTS/$f.svg" \
        --title "${PLOT_TITLE[$f]}" 2>>"$OUT/plots.log" || warn "no time series for $f: see $OUT/plots.log"
done
if [[ -n $REPORT ]]; then
    # Next to the doc, replacing the previous run's.
    IMG_DIR=$(dirname "$REPORT")/img/bench
    mkdir -p "$IMG_DIR"
    rm -f "$IMG_DIR"/f*.svg
    cp "$PLOTS"/*.svg "$IMG_DIR"/ 2>/dev/null || true
    PLOTS=$IMG_DIR
    ((${#PLOT_ARGS[@]} == 0)) || PLOT_ARGS=(--plots "$PLOTS")
fi
((${#PLOT_ARGS[@]} == 0)) || log "time series in $PLOTS"
status=0
"$BIN/seckill-bench" report table --dir "$OUT" --figures "${RAN[*]}" --settings "$SETTINGS" \
    --mode "$MODE" --note "$NOTE" --clk-tck "$(getconf CLK_TCK)" ${REPORT:+--doc "$REPORT"} \
    "${PLOT_ARGS[@]}" "${ED25519[@]}" || status=$?
if [[ -n $EXPIRY_LINE ]]; then
    echo
    echo "$EXPIRY_LINE"
fi
if [[ -n $QUEUE_LINE ]]; then
    echo
    echo "$QUEUE_LINE"
fi
if [[ -n $LIVE_LINE ]]; then
    echo
    echo "$LIVE_LINE"
fi
if [[ -n $TRACE_LINE ]]; then
    echo
    echo "$TRACE_LINE"
fi
if ((!LIVE_OK)); then
    err "INVALID: the run of figure 12 does not count; see $OUT/f12.log and $OUT/f12.txt"
    status=1
fi
if [[ -n $QTY_LINE ]]; then
    echo
    echo "$QTY_LINE"
fi
if ((!QTY_OK)); then
    err "INVALID: the run of figure 14 does not count; see $OUT/f14-*.log"
    status=1
fi
if ((!TRACE_OK)); then
    err "INVALID: the run of figure 13 does not count; see $OUT/f13-*.log"
    status=1
fi
if ((!QUEUE_OK)); then
    err "INVALID: the run of figure 11 does not count; see $OUT/f11.log and $OUT/f11.txt"
    status=1
fi
if ((!EXPIRY_OK)); then
    err "INVALID: the run of figure 10 does not count; see $OUT/f10.log and $OUT/f10.txt"
    status=1
fi
exit "$status"
