#!/usr/bin/env bash
# The performance figures of the buy path and the drain, each next to a ceiling measured in the
# same run on the same machine (see docs/BENCHMARKS.md for what each figure means).
#
#   scripts/bench.sh                  every figure, then rewrites the results block of
#                                     docs/BENCHMARKS.md
#   scripts/bench.sh --quick          smoke run: 3 s per figure, small N; prints the table only
#   scripts/bench.sh --figures "1 2"  a subset (1..11; wrk runs with 1; (2N), (2E), (2L) and
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
# another order, whose 95 % interval judges the authentication goals, 5), BENCH_BIN (a directory with gateway, worker and seckill-bench to use
# instead of building: before/after comparisons; its seckill-bench must have `report`).
# Gateways listen on 28081.., workers' health on 29191..; every group of figures runs on a
# fresh namespace (Redis prefix, ZooKeeper root, MySQL database sk_<ns>, topic, group), all
# removed at the end. Binaries: release, in CARGO_TARGET_DIR (default target/).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
[[ -f $HOME/.cargo/env ]] && . "$HOME/.cargo/env"

QUICK=0 PROFILE=0 FIGURES="1 2 3 4 5 6 7 8 9 10 11" REPORT=auto
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
: "${BENCH_EXPIRY_N:=10000}" "${BENCH_EXPIRY_WINDOW_SECS:=10}"
: "${BENCH_QUEUE_BUYERS:=100000}" "${BENCH_QUEUE_STOCK:=1000}" "${BENCH_QUEUE_ADMIT_PER_SEC:=1000}"
: "${BENCH_QUEUE_FACTOR:=1.5}" "${BENCH_QUEUE_CONCURRENCY:=256}" "${BENCH_QUEUE_STARTS_IN:=}"
if [[ $REPORT == auto ]]; then
    REPORT=""
    if ((!QUICK && !PROFILE)) && [[ $FIGURES == "1 2 3 4 5 6 7 8 9 10 11" ]]; then
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

# ------------------------------------------------------------ processes ---
declare -A PIDS=()
NAMESPACES=()
stop_proc() { # key
    local pid=${PIDS[$1]:-}
    [[ -n $pid ]] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    unset "PIDS[$1]"
}
cleanup() {
    local k ns
    for k in "${!PIDS[@]}"; do stop_proc "$k"; done
    for ns in "${NAMESPACES[@]}"; do
        mysql_root -e "DROP DATABASE IF EXISTS \`sk_$ns\`" 2>/dev/null || true
        redis-cli -p "$REDIS_PORT" --scan --pattern "sk:{$ns:*" 2>/dev/null |
            xargs -r -n 1000 redis-cli -p "$REDIS_PORT" UNLINK >/dev/null 2>&1 || true
        "$(tansu_bin)" topic delete "orders-$ns" --broker "tcp://127.0.0.1:$KAFKA_PORT" \
            >>"$OUT/tansu.log" 2>&1 || true
    done
}
trap cleanup EXIT

# A fresh namespace: database (migrated), topic; exported for the processes started next.
new_namespace() { # suffix
    NS=$RUN$1
    NAMESPACES+=("$NS")
    mysql_root -e "CREATE DATABASE \`sk_$NS\`"
    export SECKILL_NAMESPACE=$NS SECKILL_MYSQL_URL=$BASE_MYSQL/sk_$NS \
        SECKILL_KAFKA_TOPIC=orders-$NS SECKILL_WORKER_GROUP=workers-$NS \
        SECKILL_ADMIN_TOKEN=$TOKEN SECKILL_LOG_FORMAT=json SECKILL_AUTH_HS256_SECRET=$JWT_SECRET \
        SECKILL_ADMISSION_SECRET=$ADMISSION_SECRET
    "$BIN/worker" migrate >>"$OUT/migrate.log" 2>&1
    ensure_kafka_topic "orders-$NS" "$BENCH_PARTITIONS" >>"$OUT/topics.log" 2>&1
}

# The benchmark gateway's settings: no per-user limit, an admission cap that never binds.
GATEWAY_ENV=(SECKILL_RATE_LIMIT_PER_USER_PER_SEC=0 SECKILL_RATE_LIMIT_PER_ADDRESS_PER_SEC=0
    "SECKILL_MAX_IN_FLIGHT=$BENCH_MAX_IN_FLIGHT")
[[ -z $BENCH_HTTP_WORKERS ]] || GATEWAY_ENV+=("SECKILL_HTTP_WORKERS=$BENCH_HTTP_WORKERS")
[[ -z $BENCH_KAFKA_LINGER_MS ]] || GATEWAY_ENV+=("SECKILL_KAFKA_LINGER_MS=$BENCH_KAFKA_LINGER_MS")

start_gateway() { # index [--flag...] [VAR=value...] (settings override GATEWAY_ENV)
    local i=$1 a flags=() vars=()
    shift
    for a in "$@"; do
        if [[ $a == --* ]]; then flags+=("$a"); else vars+=("$a"); fi
    done
    env "${GATEWAY_ENV[@]}" "${vars[@]}" SECKILL_HTTP_ADDR="127.0.0.1:${GW_PORTS[$i]}" \
        "$BIN/gateway" "${flags[@]}" >>"$OUT/gateway-$i-$SECKILL_NAMESPACE.log" 2>&1 &
    PIDS[g$i]=$!
    wait_for -t 30 -m "gateway $i" curl -fsS "http://127.0.0.1:${GW_PORTS[$i]}/livez"
    # The sold-out marker needs the ZooKeeper session; wait for it on every gateway alike.
    wait_for -t 30 -m "gateway $i's ZooKeeper session" gw_metric_is "$i" \
        seckill_gateway_zookeeper_connected 1
}
start_worker() { # index [VAR=value...]
    local i=$1
    shift
    env "$@" SECKILL_WORKER_HTTP_ADDR="127.0.0.1:${WK_PORTS[$i]}" \
        "$BIN/worker" >>"$OUT/worker-$i-$SECKILL_NAMESPACE.log" 2>&1 &
    PIDS[w$i]=$!
}
gw_metric() { # index name
    curl -fsS "http://127.0.0.1:${GW_PORTS[$1]}/metrics" | awk -v n="$2" '$1 == n { print $2 }'
}
gw_metric_is() { [[ $(gw_metric "$1" "$2") == "$3" ]]; }
# Buyers and calls counted so far by gateway 0's reservation batches ("sum count"; "0 0" for
# a gateway that does not batch). batch_mean FIGURE BEFORE logs the mean since BEFORE.
batch_counts() {
    local s c
    s=$(gw_metric 0 seckill_gateway_reserve_batch_size_sum)
    c=$(gw_metric 0 seckill_gateway_reserve_batch_size_count)
    echo "${s:-0} ${c:-0}"
}
batch_mean() {
    local b0 c0 b1 c1
    read -r b0 c0 <<<"$2"
    read -r b1 c1 <<<"$(batch_counts)"
    python3 -c 'import sys; b, c = float(sys.argv[2]), float(sys.argv[3])
print(f"{sys.argv[1]} buyers per reservation call: " + (f"{b / c:.2f} ({int(c)} calls)" if c else "no batches counted"))' \
        "$1" "$(python3 -c "print(${b1%.*} - ${b0%.*})")" "$(python3 -c "print(${c1%.*} - ${c0%.*})")" | tee -a "$OUT/batches.txt"
}
worker_assigned() { # index partitions
    curl -fsS "http://127.0.0.1:${WK_PORTS[$1]}/healthz" |
        python3 -c 'import json,sys; sys.exit(len(json.load(sys.stdin).get("assigned_partitions") or []) != int(sys.argv[1]))' "$2"
}
admin() { # gateway-index METHOD PATH [BODY]
    curl -fsS -X "$2" "http://127.0.0.1:${GW_PORTS[$1]}$3" -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' ${4:+-d "$4"}
}
json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
# outcome FILE LABEL [count|per-sec]: one number of a load summary (0 when absent).
outcome() {
    "$BIN/seckill-bench" report outcome --file "$1" --outcome "$2" --field "${3:-count}"
}
new_product() { # gateway-index stock -> id (created and preloaded)
    local id
    id=$(admin "$1" POST /admin/products "{\"name\": \"bench $RUN\", \"stock\": $2}" | json_field id)
    admin "$1" POST "/admin/products/$id/preload" >/dev/null
    echo "$id"
}
sql() { mysql_root -N -B "sk_$SECKILL_NAMESPACE" -e "$1"; }

# Where the CPU goes: clock ticks (utime + stime) of every process involved, before and after
# a measurement; the client's own CPU comes from bash's `time`.
cpu_ticks() { # pid
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
    s=${s##*) }
    # shellcheck disable=SC2086 # split the fields after the command name
    set -- $s
    echo $((${12} + ${13}))
}
cpu_snapshot() { # file
    local k pid
    {
        for k in "${!PIDS[@]}"; do echo "$k ${PIDS[$k]} $(cpu_ticks "${PIDS[$k]}")"; done
        for k in redis:$REDIS_PID mysql:$MYSQL_PID kafka:$TANSU_PID zookeeper:$ZK_PID; do
            pid=$(tr -dc '0-9' <"${k#*:}" 2>/dev/null) || continue
            [[ -n $pid ]] && echo "${k%%:*} $pid $(cpu_ticks "$pid")"
        done
        awk '/^cpu / { print "machine 0", $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat
        echo "clock 0 $(date +%s%N)"
    } >"$1"
}
# measure NAME CMD...: runs CMD with CPU accounting (OUT/NAME.cpu0, .cpu1, .time).
measure() {
    local name=$1 rc=0
    shift
    cpu_snapshot "$OUT/$name.cpu0"
    TIMEFORMAT='%R %U %S'
    { time "$@"; } 2>"$OUT/$name.time" || rc=$?
    cpu_snapshot "$OUT/$name.cpu1"
    return $rc
}

LOAD=("$BIN/seckill-bench")
[[ -z $BENCH_THREADS ]] || LOAD+=(--threads "$BENCH_THREADS")
# load_only output-name load-args... LOAD_C: another concurrency. LOAD_HS256=0: without the
# HS256 secret of the environment (no tokens, or --jwt-ed25519-key's; an empty value would be
# an error, so it is unset).
load_only() {
    local name=$1 tool=("${LOAD[@]}")
    shift
    [[ ${LOAD_HS256:-1} == 1 ]] || tool=(env -u SECKILL_AUTH_HS256_SECRET "${tool[@]}")
    "${tool[@]}" load --quiet --json --engine "$BENCH_ENGINE" --concurrency "${LOAD_C:-$C}" "$@" \
        >"$OUT/$name.json" 2>"$OUT/$name.log" || { err "load $name failed: $OUT/$name.log"; return 1; }
}
# Another engineer's chaos run may restart a service: wait until all answer before a figure.
services_ok() { redis_ping && mysql_ping && zk_ping && kafka_ping; }
load() {
    wait_for -t 600 -m "every service to answer" services_ok
    measure "$1" load_only "$@"
}

# perf, attached to a process (or system-wide with -a) while a command runs.
PERF_PID=""
perf_start() { # name pid|-a
    ((PROFILE)) || return 0
    local target=(-p "$2")
    [[ $2 == -a ]] && target=(-a)
    perf record -e cpu-clock -F 499 -g "${target[@]}" -o "$OUT/perf-$1.data" \
        >"$OUT/perf-$1.log" 2>&1 &
    PERF_PID=$!
    sleep 0.5
}
perf_stop() { # name
    ((PROFILE)) || return 0
    kill -INT "$PERF_PID" 2>/dev/null || true
    wait "$PERF_PID" 2>/dev/null || true
    perf report -i "$OUT/perf-$1.data" --no-children --sort comm,dso --stdio 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -40 >"$OUT/perf-$1-by-process.txt" || true
    perf report -i "$OUT/perf-$1.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -80 >"$OUT/perf-$1-symbols.txt" || true
    log "profile of $1: $OUT/perf-$1-*.txt"
}

# ---------------------------------------------------- gateway figures ---
# (1) /livez, wrk, (2) accept path (HS256 tokens), (2N) without authentication, (2E) with EdDSA
# tokens, (2L) with the per-user limit on, (3) sold-out path, (4) sync mode, (5)
# redis-benchmark of the reservation script.
if want 1 || want 2 || want 3 || want 4 || want 5; then
    new_namespace g
    start_gateway 0
    GW0=http://127.0.0.1:${GW_PORTS[0]}
fi

if want 1; then
    ran 1 1w
    log "(1) bare HTTP: GET /livez, ${D} s at concurrency $C"
    load f1 --gateway "$GW0" --path-get /livez --duration "$D"
    log "(1w) the same with wrk"
    measure wrk wrk -t "$(nproc)" -c "$C" -d "${D}s" --latency "$GW0/livez" >"$OUT/wrk.txt"
fi

if want 2; then
    # (2), (2N) and (2E) one after the other, each on a freshly started gateway 0 (its
    # arguments: flags and settings) and a fresh product P, so that their gateway CPU per
    # request compare: the differences are what verifying the tokens costs.
    fresh_accept() {
        stop_proc g0
        start_gateway 0 "$@"
        P=$(new_product 0 1000000000)
    }
    ACCEPT=(--gateway "$GW0" --users 1000000000 --first-user 1 --duration "$D" --settle-timeout 0
        --no-history)
    ran 2
    fresh_accept
    P2=$P
    log "(2) accept path, one HS256 token per buyer: product $P2, unique users, ${D} s"
    perf_start f2 -a
    load f2 "${ACCEPT[@]}" --product "$P2"
    perf_stop f2

    ran 2N
    fresh_accept --dev SECKILL_AUTH_MODE=none
    log "(2N) accept path, authentication off (gateway --dev, SECKILL_AUTH_MODE=none; no tokens): product $P, ${D} s"
    LOAD_HS256=0 load f2n "${ACCEPT[@]}" --product "$P"

    ran 2E
    fresh_accept "SECKILL_AUTH_JWKS_FILE=$JWKS_FILE"
    log "(2E) accept path, one EdDSA token per buyer (key $ED_KID): product $P, ${D} s"
    LOAD_HS256=0 load f2e "${ACCEPT[@]}" --product "$P" --jwt-ed25519-key "$ED_KEY" \
        --jwt-kid "$ED_KID"

    # What authentication costs (2) − (2N), (2E) − (2N) is a few µs per request, less than
    # the gateway's CPU per request moves between runs: more rounds of the three, each round
    # starting one further along (2N, 2E, 2; then 2E, 2, 2N; ...), so that no figure always
    # runs first or last. The report judges those goals on the 95 % interval of the rounds.
    auth_run() { # figure round
        local name
        case $1 in
            2) name=f2-r$2
                fresh_accept
                LOAD_HS256=1 load "$name" "${ACCEPT[@]}" --product "$P" ;;
            2N) name=f2n-r$2
                fresh_accept --dev SECKILL_AUTH_MODE=none
                LOAD_HS256=0 load "$name" "${ACCEPT[@]}" --product "$P" ;;
            2E) name=f2e-r$2
                fresh_accept "SECKILL_AUTH_JWKS_FILE=$JWKS_FILE"
                LOAD_HS256=0 load "$name" "${ACCEPT[@]}" --product "$P" \
                    --jwt-ed25519-key "$ED_KEY" --jwt-kid "$ED_KID" ;;
        esac || warn "($1) round $2 failed: $OUT/$name.log"
    }
    AUTH_ORDER=(2 2N 2E)
    for ((round = 2; round <= BENCH_AUTH_ROUNDS; round++)); do
        log "authentication round $round of $BENCH_AUTH_ROUNDS: (2), (2N), (2E), ${D} s each"
        for ((i = 0; i < 3; i++)); do auth_run "${AUTH_ORDER[(round - 1 + i) % 3]}" "$round"; done
    done

    stop_proc g0
    start_gateway 0
fi

if want 3; then
    ran 3
    P3=$(new_product 0 0)
    # The first 409 comes from Redis and sets the marker (the ZooKeeper session is up). The
    # buyer needs a token: `gateway token` signs one with the environment's HS256 secret.
    tok=$("$BIN/gateway" token --user 1 2>>"$OUT/token.log") || tok=""
    curl -sS -o /dev/null -X POST "$GW0/v1/seckill/$P3" -H 'Content-Type: application/json' \
        ${tok:+-H "Authorization: Bearer $tok"} -d '{"user_id": 1}'
    wait_for -t 10 -m "the sold-out marker" gw_metric_is 0 seckill_gateway_sold_out_markers 1
    hits0=$(gw_metric 0 seckill_gateway_sold_out_marker_hits_total)
    log "(3) sold-out path: product $P3, marker set, ${D} s"
    perf_start f3 -a
    load f3 --gateway "$GW0" --product "$P3" --users 1000000000 --first-user 2 \
        --duration "$D" --settle-timeout 0 --no-history
    perf_stop f3
    hits1=$(gw_metric 0 seckill_gateway_sold_out_marker_hits_total)
    echo "{\"marker_hits\": $((${hits1%.*} - ${hits0%.*})), \"marker_sets\": $(gw_metric 0 seckill_gateway_sold_out_marker_sets_total)}" \
        >"$OUT/f3-marker.json"
fi

if want 2; then
    # The same accept path with the per-user rate limit at its defaults (5/s, burst 10): every
    # user buys once, so it never refuses; the difference is its cost (one more script call).
    ran 2L
    stop_proc g0
    start_gateway 0 SECKILL_RATE_LIMIT_PER_USER_PER_SEC=5
    log "(2L) accept path with the per-user limit on, ${D} s"
    before=$(batch_counts)
    load f2l --gateway "$GW0" --product "$P2" --users 1000000000 --first-user 2000000000 \
        --duration "$D" --settle-timeout 0 --no-history
    # (2S) the same at a concurrency that saturates the machine: the peak where it is CPU-bound.
    ran 2S
    batch_mean "(2L)" "$before"
    log "(2S) accept path with the per-user limit on, concurrency $BENCH_SAT_CONCURRENCY, ${D} s"
    before=$(batch_counts)
    perf_start f2s -a
    LOAD_C=$BENCH_SAT_CONCURRENCY load f2s --gateway "$GW0" --product "$P2" \
        --users 1000000000 --first-user 3000000000 --duration "$D" --settle-timeout 0 --no-history
    perf_stop f2s
    batch_mean "(2S)" "$before"
    if want 1; then
        # (1R) /livez paced at (2L)'s accept rate (an open loop, as many in flight at most): the
        # floor at the accept path's load. At 64 in flight (2L) waits on Kafka's acks and the
        # machine idles between waves, so each request pays for more wake-ups than at (1)'s
        # saturation; (1R) pays them too.
        RATE_2L=$("$BIN/seckill-bench" report outcome --file "$OUT/f2l.json" --outcome 202 --field per-sec 2>/dev/null) || RATE_2L=""
        if [[ -n $RATE_2L ]] && awk -v r="$RATE_2L" 'BEGIN { exit !(r >= 1) }'; then
            ran 1R
            log "(1R) GET /livez paced at (2L)'s $RATE_2L accepts/s, open loop, ${D} s"
            load f1r --gateway "$GW0" --path-get /livez --rate "${RATE_2L%.*}" --open-loop --duration "$D"
        fi
    fi
    stop_proc g0
    start_gateway 0
fi

if want 4; then
    ran 4
    P4=$(new_product 0 1000000000)
    start_gateway 1 SECKILL_GATEWAY_MODE=sync
    log "(4) sync mode (201 after the MySQL write): product $P4, ${D} s"
    load f4 --gateway "http://127.0.0.1:${GW_PORTS[1]}" --product "$P4" --users 1000000000 \
        --duration "$D" --settle-timeout 0 --no-history
    stop_proc g1
fi

if want 5; then
    ran 5
    P5=$(new_product 0 1000000000)
    SHA=$(redis-cli -p "$REDIS_PORT" SCRIPT LOAD "$(cat shared/src/store/{token_bucket,reserve}.lua)")
    K="sk:{$SECKILL_NAMESPACE:$P5}:"
    rb() { # requests -> csv
        redis-benchmark -p "$REDIS_PORT" -c "$C" -n "$1" -r 1000000000 --csv \
            EVALSHA "$SHA" 10 "${K}stock" "${K}meta" "${K}buyers" "${K}pending" \
            "${K}adm" "${K}qdone" "${K}q" "${K}borrowing" "${K}located" "${K}t:$P5-__rand_int__" \
            600 "" "" "" __rand_int__ "$P5-__rand_int__" "$(date +%s%3N)" 0 1
    }
    # The rate of the last line of the CSV ("test","rps",...; no test name holds '","').
    rps_of() { tail -n 1 | awk -F'","' '{ printf "%d\n", $2 }'; }
    stock() { redis-cli -p "$REDIS_PORT" GET "${K}stock"; }
    # Calibrate the request count so that the run lasts about D seconds.
    n=$(rb 20000 | rps_of)
    ((n > 0)) || n=1000
    log "(5) redis-benchmark of reserve.lua: about ${D} s ($((n * D)) calls) at concurrency $C"
    # redis-benchmark counts error replies as calls; the stock counts only the reservations.
    s0=$(stock)
    measure f5 rb $((n * D)) >"$OUT/f5.csv"
    printf '{"requests": %d, "stock_before": %d, "stock_after": %d}\n' \
        $((n * D)) "${s0:-0}" "$(stock || echo 0)" >"$OUT/f5-check.json"
    # (5G) Redis's floor: a plain GET at the same concurrency, for Redis's CPU per GET.
    ran 5G
    gets() { redis-benchmark -p "$REDIS_PORT" -c "$C" -n "$1" -r 1000000 --csv -t get; }
    n=$(gets 100000 | rps_of)
    ((n > 0)) || n=10000
    log "(5G) redis-benchmark GET: about ${D} s ($((n * D)) calls) at concurrency $C"
    measure f5g gets $((n * D)) >"$OUT/f5g.csv"
    echo $((n * D)) >"$OUT/f5g.requests"
    # (5B) reserve.lua as a busy gateway sends it: 8 buyers per call (batch.rs), for Redis's
    # CPU per reservation when calls are batched.
    ran 5B
    P5B=$(new_product 0 1000000000)
    K="sk:{$SECKILL_NAMESPACE:$P5B}:"
    batch_keys=() batch_args=()
    for j in 1 2 3 4 5 6 7 8; do
        batch_keys+=("${K}t:$P5B-$j-__rand_int__")
        batch_args+=("$j$((RANDOM % 9 + 1))__rand_int__" "$P5B-$j-__rand_int__" "$(date +%s%3N)" 0 1)
    done
    rb8() {
        redis-benchmark -p "$REDIS_PORT" -c "$C" -n "$1" -r 1000000000 --csv \
            EVALSHA "$SHA" $((9 + ${#batch_keys[@]})) "${K}stock" "${K}meta" "${K}buyers" \
            "${K}pending" "${K}adm" "${K}qdone" "${K}q" "${K}borrowing" "${K}located" \
            "${batch_keys[@]}" 600 "" "" "" "${batch_args[@]}"
    }
    n=$(rb8 5000 | rps_of)
    ((n > 0)) || n=1000
    log "(5B) redis-benchmark of reserve.lua, 8 buyers per call: about ${D} s ($((n * D)) calls)"
    s0=$(redis-cli -p "$REDIS_PORT" GET "${K}stock")
    measure f5b rb8 $((n * D)) >"$OUT/f5b.csv"
    # The reservations made (a buyer drawn twice in one run finds its ticket instead).
    echo $(( ${s0:-0} - $(redis-cli -p "$REDIS_PORT" GET "${K}stock" || echo 0) )) >"$OUT/f5b.requests"
fi

# ------------------------------------------------------ drain figures ---
drain_rows() { sql "SELECT COUNT(*) FROM orders WHERE product_id = $1"; }
rows_are() { [[ $(drain_rows "$1") -ge $2 ]]; }
# Buys N orders through a gateway with no worker running, then starts one worker with batch
# size BATCH and times the drain into MySQL. Writes OUT/NAME.json.
drain() { # name orders batch worker-env...
    local name=$1 n=$2 batch=$3 p t0 t1 accepted stats metrics rows first last first_done txns settle_s
    shift 3
    ran "${name#f}"
    start_gateway 2
    p=$(new_product 2 "$n")
    load "$name-buy" --gateway "http://127.0.0.1:${GW_PORTS[2]}" --product "$p" --users "$n" \
        --total "$n" --settle-timeout 0 --no-history
    stop_proc g2 # flushes its producer: every order is in Kafka
    accepted=$(outcome "$OUT/$name-buy.json" 202)
    # Fewer than N accepted makes the figure INVALID (the report says so); drain those anyway.
    ((accepted == n)) || warn "($name) $accepted of $n buys were answered 202; see $OUT/$name-buy.json"
    log "($name) $accepted orders queued; starting one worker (batch size $batch, $*)"
    cpu_snapshot "$OUT/$name.cpu0"
    t0=$(date +%s.%N)
    # Nothing may expire while the queue waits (the last resort must not be below the timeout).
    start_worker 0 SECKILL_PENDING_TIMEOUT_MS=3600000 SECKILL_PENDING_LAST_RESORT_MS=3600000 \
        "SECKILL_WORKER_BATCH_SIZE=$batch" "$@"
    perf_start "$name" "${PIDS[w0]}"
    wait_for -t 600 -m "$accepted rows of product $p" rows_are "$p" "$accepted" ||
        warn "($name) the drain did not finish: the figure is INVALID"
    t1=$(date +%s.%N)
    cpu_snapshot "$OUT/$name.cpu1"
    perf_stop "$name"
    metrics=$(curl -fsS "http://127.0.0.1:${WK_PORTS[0]}/metrics" | awk '
        $1 == "seckill_worker_batch_size_count" { n = $2 }
        $1 == "seckill_worker_batch_seconds_sum" { s = $2 }
        END { print n + 0, s + 0 }') || true
    stop_proc w0
    # The queue is full from the start, so every transaction but the last has BATCH orders,
    # and ids grow with commit order (one worker). created_at is the time of the statement,
    # so the row with the BATCH-th id marks the end of the first transaction: the steady
    # rate (computed by the report) counts the orders after it over the time after it.
    stats=$(sql "SELECT COUNT(*), UNIX_TIMESTAMP(MIN(created_at)), UNIX_TIMESTAMP(MAX(created_at)),
                  (SELECT UNIX_TIMESTAMP(created_at) FROM orders WHERE product_id = $p
                   ORDER BY id LIMIT 1 OFFSET $((batch - 1)))
                 FROM orders WHERE product_id = $p")
    read -r rows first last first_done <<<"${stats//NULL/null}"
    read -r txns settle_s <<<"${metrics:-0 0}"
    printf '{"orders": %s, "accepted": %s, "batch": %s, "t0": %s, "t1": %s, "rows": %s, "first": %s, "last": %s, "first_done": %s, "batches": %.0f, "settle_s": %s}\n' \
        "$n" "$accepted" "$batch" "$t0" "$t1" "$rows" "$first" "$last" "$first_done" \
        "$txns" "$settle_s" >"$OUT/$name.json"
}

if want 6 || want 7; then
    new_namespace d
fi
if want 7; then
    ran 7
    log "(7) raw MySQL ceiling: $BENCH_DRAIN_N rows in batches of $BENCH_BATCH"
    measure f7 "${LOAD[@]}" mysql-ceiling --json --product 999999999 --rows "$BENCH_DRAIN_N" \
        --batch "$BENCH_BATCH" >"$OUT/f7.json"
fi
if want 6; then
    drain f6 "$BENCH_DRAIN_N" "$BENCH_BATCH" "SECKILL_WORKER_BATCH_LINGER_MS=$BENCH_LINGER_MS"
fi
if want 8; then
    new_namespace r
    drain f8 "$BENCH_ROW_N" 1 "SECKILL_WORKER_BATCH_LINGER_MS=$BENCH_LINGER_MS"
fi

# ------------------------------------------------- payment expiry (10) ---
# N buyers each buy one unit of a priced product (payment window W s) and never pay. As in (6)
# the buys queue while no worker runs; one worker then confirms them in a wave, so that their
# deadlines fall within about a second of each other: N orders expiring at once.
# `seckill-bench expiry` writes f10-bought.json once every buy is answered (the worker starts
# then), waits for every order's pay_by_ms, polls the Redis stock every 5 ms until every unit
# is back, and cross-checks MySQL and Redis. Writes OUT/f10.json and its summary OUT/f10.txt.
if want 10; then
    ran 10
    new_namespace x
    start_gateway 2
    rm -f "$OUT/f10-bought.json"
    wait_for -t 600 -m "every service to answer" services_ok
    log "(10) payment expiry: $BENCH_EXPIRY_N unpaid orders, window ${BENCH_EXPIRY_WINDOW_SECS} s"
    "${LOAD[@]}" expiry --gateway "http://127.0.0.1:${GW_PORTS[2]}" --orders "$BENCH_EXPIRY_N" \
        --window-secs "$BENCH_EXPIRY_WINDOW_SECS" --concurrency "$C" \
        --bought-file "$OUT/f10-bought.json" \
        --worker-metrics "http://127.0.0.1:${WK_PORTS[0]}/metrics" \
        --out "$OUT/f10.json" >"$OUT/f10.txt" 2>"$OUT/f10.log" &
    xpid=$!
    bought_or_gone() { [[ -f $OUT/f10-bought.json ]] || ! kill -0 "$xpid" 2>/dev/null; }
    wait_for -t 600 -m "the buys of (10)" bought_or_gone || true
    if [[ -f $OUT/f10-bought.json ]]; then
        log "(10) $(json_field accepted <"$OUT/f10-bought.json") orders queued; starting one worker"
        start_worker 0 "SECKILL_WORKER_BATCH_SIZE=$BENCH_BATCH" \
            "SECKILL_WORKER_BATCH_LINGER_MS=$BENCH_LINGER_MS"
    fi
    wait "$xpid" || warn "(10) seckill-bench expiry failed or its run is invalid: $OUT/f10.log"
    cat "$OUT/f10.txt" >&2 || true
    stop_proc w0
    stop_proc g2
fi

# ------------------------------------------------- waiting room (11) ---
# A product with a waiting room (BENCH_QUEUE_STOCK units, BENCH_QUEUE_ADMIT_PER_SEC admissions/s,
# factor BENCH_QUEUE_FACTOR); BENCH_QUEUE_BUYERS buyers join before the start, then each polls at
# its refresh_after_ms and buys once admitted, one worker confirming. Then the same sale without
# a waiting room. The gateway signs admissions (SECKILL_ADMISSION_SECRET) and has no per-user
# limit on joins and polls (one client address, so none per address either). The tool reads the
# Redis CPU from /proc around its phases; `measure` keeps the whole run's (f11.cpu0, .cpu1).
# Writes OUT/f11.json and its summary OUT/f11.txt.
if want 11; then
    new_namespace q
    start_worker 0 "SECKILL_WORKER_BATCH_SIZE=$BENCH_BATCH" "SECKILL_WORKER_BATCH_LINGER_MS=$BENCH_LINGER_MS"
    start_gateway 2 SECKILL_QUEUE_RATE_LIMIT_PER_USER_PER_SEC=0
    wait_for -t 90 -m "the worker to own all $BENCH_PARTITIONS partitions" worker_assigned 0 "$BENCH_PARTITIONS"
    wait_for -t 600 -m "every service to answer" services_ok
    log "(11) waiting room: $BENCH_QUEUE_BUYERS buyers, $BENCH_QUEUE_STOCK units, $BENCH_QUEUE_ADMIT_PER_SEC admissions/s, then the same sale without a waiting room"
    measure f11 "${LOAD[@]}" queue-sale --gateway "http://127.0.0.1:${GW_PORTS[2]}" \
        --buyers "$BENCH_QUEUE_BUYERS" --stock "$BENCH_QUEUE_STOCK" \
        --admit-per-sec "$BENCH_QUEUE_ADMIT_PER_SEC" --max-admitted-factor "$BENCH_QUEUE_FACTOR" \
        --concurrency "$BENCH_QUEUE_CONCURRENCY" ${BENCH_QUEUE_STARTS_IN:+--starts-in "$BENCH_QUEUE_STARTS_IN"} \
        --redis-pid "$(tr -dc '0-9' <"$REDIS_PID")" --clk-tck "$(getconf CLK_TCK)" \
        --out "$OUT/f11.json" >"$OUT/f11.txt" 2>"$OUT/f11.log" ||
        warn "(11) seckill-bench queue-sale failed or its run is invalid: $OUT/f11.log"
    cat "$OUT/f11.txt" >&2 || true
    stop_proc g2
    stop_proc w0
fi

# ---------------------------------------------------- end-to-end (9) ---
if want 9; then
    ran 9
    # The peak of (2): its 202s per second.
    if [[ -n $BENCH_E2E_RATE ]]; then
        peak=0
    elif [[ -f $OUT/f2.json ]]; then
        peak=$(outcome "$OUT/f2.json" 202 per-sec)
    else
        log "(9) needs the peak of (2): measuring it for 3 s"
        new_namespace e
        start_gateway 3
        p=$(new_product 3 1000000000)
        load f9-peak --gateway "http://127.0.0.1:${GW_PORTS[3]}" --product "$p" --users 1000000000 \
            --duration 3 --settle-timeout 0 --no-history
        peak=$(outcome "$OUT/f9-peak.json" 202 per-sec)
        stop_proc g3
    fi
    share_of_peak() { awk -v p="$peak" -v f="$1" 'BEGIN { r = int(p * f + 0.5); print (r < 1 ? 1 : r) }'; }
    rate=$(share_of_peak "$BENCH_E2E_FRACTION")
    if [[ -n $BENCH_E2E_RATE ]]; then rate=$BENCH_E2E_RATE; fi
    # Each rate on its own namespace (fresh topic, worker and gateway), so that one run's
    # backlog in the broker does not weigh on the next.
    e2e() { # name rate
        local p
        new_namespace "$1"
        start_worker 1 "SECKILL_WORKER_BATCH_SIZE=$BENCH_BATCH" "SECKILL_WORKER_BATCH_LINGER_MS=$BENCH_LINGER_MS"
        start_gateway 3
        p=$(new_product 3 1000000000)
        wait_for -t 90 -m "the worker to own all $BENCH_PARTITIONS partitions" worker_assigned 1 "$BENCH_PARTITIONS"
        log "($1) end to end: $2 req/s offered, open loop (at most $BENCH_E2E_MAX_IN_FLIGHT in flight), for ${D} s, one worker"
        LOAD_C=$BENCH_E2E_MAX_IN_FLIGHT load "$1" --gateway "http://127.0.0.1:${GW_PORTS[3]}" \
            --product "$p" --users 1000000000 --rate "$2" --open-loop --duration "$D" \
            --settle-timeout 120 --history "$OUT/$1-history.jsonl"
        stop_proc g3
        stop_proc w1
    }
    e2e f9 "$rate"
    # The same at a lower rate, to show where the latency goal holds on this machine.
    if [[ -z $BENCH_E2E_RATE ]]; then
        ran 9L
        e2e f9l "$(share_of_peak "$BENCH_E2E_LOW_FRACTION")"
    fi
fi

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
for l in "$EXPIRY_LINE" "$QUEUE_LINE" "$CPU_LINE"; do [[ -z $l ]] || NOTE+=${NOTE:+ }$l; done
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
if ((!QUEUE_OK)); then
    err "INVALID: the run of figure 11 does not count; see $OUT/f11.log and $OUT/f11.txt"
    status=1
fi
if ((!EXPIRY_OK)); then
    err "INVALID: the run of figure 10 does not count; see $OUT/f10.log and $OUT/f10.txt"
    status=1
fi
exit "$status"
