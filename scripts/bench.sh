#!/usr/bin/env bash
# The performance figures of the buy path and the drain, each next to a ceiling measured in the
# same run on the same machine (see docs/BENCHMARKS.md for what each figure means).
#
#   scripts/bench.sh                  every figure, then rewrites the results block of
#                                     docs/BENCHMARKS.md
#   scripts/bench.sh --quick          smoke run: 3 s per figure, small N; prints the table only
#   scripts/bench.sh --figures "1 2"  a subset (1..9; wrk runs with 1); prints the table only
#   scripts/bench.sh --profile        perf-record the gateway during (2) and (3) and the worker
#                                     during (6); the figures are then perturbed: no doc rewrite
#   scripts/bench.sh --report FILE    write the results block to FILE (any mode)
#   scripts/bench.sh --no-report      never write the doc
#
# Settings (environment): BENCH_DURATION (s per figure, 10), BENCH_CONCURRENCY (64),
# BENCH_ENGINE (hyper), BENCH_THREADS (load tool threads; default one per CPU),
# BENCH_DRAIN_N (orders of (6) and (7), 20000), BENCH_ROW_N (orders of (8), 2000),
# BENCH_BATCH (worker batch size of (6) and (7), 500), BENCH_LINGER_MS (worker batch linger, 20),
# BENCH_HTTP_WORKERS (gateway actix workers; default: the gateway's own default),
# BENCH_MAX_IN_FLIGHT (100000), BENCH_E2E_FRACTION (rate of (9) as a share of (2), 0.5),
# BENCH_E2E_RATE (a fixed rate for (9) instead, req/s), BENCH_E2E_LOW_FRACTION (the rate of
# (9L), a second run of (9) at a lower rate, 0.15),
# BENCH_KAFKA_LINGER_MS (gateway producer linger; default: the gateway's own default),
# BENCH_BIN (a directory with gateway, worker and seckill-bench to use instead of building:
# before/after comparisons).
# Gateways listen on 28081.., workers' health on 29191..; every group of figures runs on a
# fresh namespace (Redis prefix, ZooKeeper root, MySQL database sk_<ns>, topic, group), all
# removed at the end. Binaries: release, in CARGO_TARGET_DIR (default target/).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
[[ -f $HOME/.cargo/env ]] && . "$HOME/.cargo/env"

QUICK=0 PROFILE=0 FIGURES="1 2 3 4 5 6 7 8 9" REPORT=auto
while (($#)); do
    case $1 in
        --quick) QUICK=1; shift ;;
        --profile) PROFILE=1; shift ;;
        --figures) FIGURES=$2; shift 2 ;;
        --report) REPORT=$2; shift 2 ;;
        --no-report) REPORT=""; shift ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
if ((QUICK)); then
    : "${BENCH_DURATION:=3}" "${BENCH_DRAIN_N:=5000}" "${BENCH_ROW_N:=500}"
fi
: "${BENCH_DURATION:=10}" "${BENCH_CONCURRENCY:=64}" "${BENCH_ENGINE:=hyper}" "${BENCH_THREADS:=}"
: "${BENCH_DRAIN_N:=20000}" "${BENCH_ROW_N:=2000}" "${BENCH_BATCH:=500}" "${BENCH_LINGER_MS:=20}"
: "${BENCH_HTTP_WORKERS:=}" "${BENCH_MAX_IN_FLIGHT:=100000}" "${BENCH_E2E_FRACTION:=0.5}"
: "${BENCH_KAFKA_LINGER_MS:=}" "${BENCH_E2E_RATE:=}" "${BENCH_E2E_LOW_FRACTION:=0.15}" "${BENCH_PARTITIONS:=8}"
if [[ $REPORT == auto ]]; then
    REPORT=""
    if ((!QUICK && !PROFILE)) && [[ $FIGURES == "1 2 3 4 5 6 7 8 9" ]]; then
        REPORT=docs/BENCHMARKS.md
    fi
fi
want() { [[ " $FIGURES " == *" $1 "* ]]; }
D=$BENCH_DURATION C=$BENCH_CONCURRENCY
GW_PORTS=(28081 28082 28083 28084) WK_PORTS=(29191 29192)
TOKEN=bench-admin-token

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
RUN=b$(date +%H%M%S)x$RANDOM
OUT=$DEV_DIR/bench/$RUN
mkdir -p "$OUT"
BASE_MYSQL=${SECKILL_MYSQL_URL%/*}
log "run $RUN: logs and raw results in $OUT"

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
        SECKILL_ADMIN_TOKEN=$TOKEN SECKILL_LOG_FORMAT=json
    "$BIN/worker" migrate >>"$OUT/migrate.log" 2>&1
    ensure_kafka_topic "orders-$NS" "$BENCH_PARTITIONS" >>"$OUT/topics.log" 2>&1
}

# The benchmark gateway's settings: no per-user limit, an admission cap that never binds.
GATEWAY_ENV=(SECKILL_RATE_LIMIT_PER_USER_PER_SEC=0 "SECKILL_MAX_IN_FLIGHT=$BENCH_MAX_IN_FLIGHT")
[[ -z $BENCH_HTTP_WORKERS ]] || GATEWAY_ENV+=("SECKILL_HTTP_WORKERS=$BENCH_HTTP_WORKERS")
[[ -z $BENCH_KAFKA_LINGER_MS ]] || GATEWAY_ENV+=("SECKILL_KAFKA_LINGER_MS=$BENCH_KAFKA_LINGER_MS")

start_gateway() { # index [VAR=value...] (overrides GATEWAY_ENV)
    local i=$1
    shift
    env "${GATEWAY_ENV[@]}" "$@" SECKILL_HTTP_ADDR="127.0.0.1:${GW_PORTS[$i]}" \
        "$BIN/gateway" >>"$OUT/gateway-$i-$SECKILL_NAMESPACE.log" 2>&1 &
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
worker_assigned() { # index partitions
    curl -fsS "http://127.0.0.1:${WK_PORTS[$1]}/healthz" |
        python3 -c 'import json,sys; sys.exit(len(json.load(sys.stdin).get("assigned_partitions") or []) != int(sys.argv[1]))' "$2"
}
admin() { # gateway-index METHOD PATH [BODY]
    curl -fsS -X "$2" "http://127.0.0.1:${GW_PORTS[$1]}$3" -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' ${4:+-d "$4"}
}
json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
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
load_only() { # output-name load-args...
    local name=$1
    shift
    "${LOAD[@]}" load --quiet --json --engine "$BENCH_ENGINE" --concurrency "$C" "$@" \
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
# (1) /livez, wrk, (2) accept path, (2L) with the per-user limit on, (3) sold-out path,
# (4) sync mode, (5) redis-benchmark of the reservation script.
if want 1 || want 2 || want 3 || want 4 || want 5; then
    new_namespace g
    start_gateway 0
    GW0=http://127.0.0.1:${GW_PORTS[0]}
fi

if want 1; then
    log "(1) bare HTTP: GET /livez, ${D} s at concurrency $C"
    load f1 --gateway "$GW0" --path-get /livez --duration "$D"
    log "(1w) the same with wrk"
    measure wrk wrk -t "$(nproc)" -c "$C" -d "${D}s" --latency "$GW0/livez" >"$OUT/wrk.txt"
fi

if want 2; then
    P2=$(new_product 0 1000000000)
    log "(2) accept path: product $P2, unique users, ${D} s"
    perf_start f2 -a
    load f2 --gateway "$GW0" --product "$P2" --users 1000000000 --first-user 1 \
        --duration "$D" --settle-timeout 0 --no-history
    perf_stop f2
fi

if want 3; then
    P3=$(new_product 0 0)
    # The first 409 comes from Redis and sets the marker (the ZooKeeper session is up).
    curl -sS -o /dev/null -X POST "$GW0/v1/seckill/$P3" -H 'Content-Type: application/json' \
        -d '{"user_id": 1}'
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
    stop_proc g0
    start_gateway 0 SECKILL_RATE_LIMIT_PER_USER_PER_SEC=5
    log "(2L) accept path with the per-user limit on, ${D} s"
    load f2l --gateway "$GW0" --product "$P2" --users 1000000000 --first-user 2000000000 \
        --duration "$D" --settle-timeout 0 --no-history
    stop_proc g0
    start_gateway 0
fi

if want 4; then
    P4=$(new_product 0 1000000000)
    start_gateway 1 SECKILL_GATEWAY_MODE=sync
    log "(4) sync mode (201 after the MySQL write): product $P4, ${D} s"
    load f4 --gateway "http://127.0.0.1:${GW_PORTS[1]}" --product "$P4" --users 1000000000 \
        --duration "$D" --settle-timeout 0 --no-history
    stop_proc g1
fi

if want 5; then
    P5=$(new_product 0 1000000000)
    SHA=$(redis-cli -p "$REDIS_PORT" SCRIPT LOAD "$(cat shared/src/store/reserve.lua)")
    K="sk:{$SECKILL_NAMESPACE:$P5}:"
    rb() { # requests -> csv
        redis-benchmark -p "$REDIS_PORT" -c "$C" -n "$1" -r 1000000000 --csv \
            EVALSHA "$SHA" 5 "${K}stock" "${K}meta" "${K}buyers" "${K}pending" \
            "${K}t:$P5-__rand_int__" __rand_int__ "$P5-__rand_int__" "$(date +%s%3N)" 600 "$P5"
    }
    rps_of() { python3 -c 'import csv,sys; r=list(csv.reader(sys.stdin)); print(int(float(r[-1][1])))'; }
    # Calibrate the request count so that the run lasts about D seconds.
    n=$(rb 20000 | rps_of)
    log "(5) redis-benchmark of reserve.lua: about ${D} s ($((n * D)) calls) at concurrency $C"
    measure f5 rb $((n * D)) >"$OUT/f5.csv"
fi

# ------------------------------------------------------ drain figures ---
drain_rows() { sql "SELECT COUNT(*) FROM orders WHERE product_id = $1"; }
rows_are() { [[ $(drain_rows "$1") -ge $2 ]]; }
# Buys N orders through a gateway with no worker running, then starts one worker with batch
# size BATCH and times the drain into MySQL. Writes OUT/NAME.json.
drain() { # name orders batch worker-env...
    local name=$1 n=$2 batch=$3 p t0 t1 stats metrics
    shift 3
    start_gateway 2
    p=$(new_product 2 "$n")
    load "$name-buy" --gateway "http://127.0.0.1:${GW_PORTS[2]}" --product "$p" --users "$n" \
        --total "$n" --settle-timeout 0 --no-history
    stop_proc g2 # flushes its producer: every order is in Kafka
    local accepted
    accepted=$(python3 -c 'import json,sys; print(sum(o["count"] for o in json.load(open(sys.argv[1]))["outcomes"] if o["outcome"] == "202"))' "$OUT/$name-buy.json")
    [[ $accepted == "$n" ]] || die "($name) $accepted of $n buys were answered 202; see $OUT/$name-buy.json"
    log "($name) $n orders queued; starting one worker (batch size $batch, $*)"
    cpu_snapshot "$OUT/$name.cpu0"
    t0=$(date +%s.%N)
    start_worker 0 SECKILL_PENDING_TIMEOUT_MS=3600000 "SECKILL_WORKER_BATCH_SIZE=$batch" "$@"
    perf_start "$name" "${PIDS[w0]}"
    wait_for -t 600 -m "$n rows of product $p" rows_are "$p" "$n"
    t1=$(date +%s.%N)
    cpu_snapshot "$OUT/$name.cpu1"
    perf_stop "$name"
    metrics=$(curl -fsS "http://127.0.0.1:${WK_PORTS[0]}/metrics" | awk '
        $1 == "seckill_worker_batch_size_count" { n = $2 }
        $1 == "seckill_worker_batch_seconds_sum" { s = $2 }
        END { print n + 0, s + 0 }')
    stop_proc w0
    # The queue is full from the start, so every transaction but the last has BATCH orders,
    # and ids grow with commit order (one worker). created_at is the time of the statement,
    # so the row with the BATCH-th id marks the end of the first transaction: the steady
    # rate counts the orders after it over the time after it.
    stats=$(sql "SELECT COUNT(*), UNIX_TIMESTAMP(MIN(created_at)), UNIX_TIMESTAMP(MAX(created_at)),
                  (SELECT UNIX_TIMESTAMP(created_at) FROM orders WHERE product_id = $p
                   ORDER BY id LIMIT 1 OFFSET $((batch - 1)))
                 FROM orders WHERE product_id = $p")
    # shellcheck disable=SC2086 # $stats and $metrics are numbers
    python3 - "$OUT/$name.json" "$n" "$batch" "$t0" "$t1" $stats $metrics <<'PY'
import json, sys
path, n, batch, t0, t1, rows, first, last, first_done, txns, settle_s = sys.argv[1:]
n, batch, rows, txns = int(n), int(batch), int(rows), int(float(txns))
t0, t1, first, last, first_done, settle_s = map(float, (t0, t1, first, last, first_done, settle_s))
steady = (rows - batch) / (last - first_done) if last > first_done else None
json.dump({"orders": n, "rows": rows, "batches": txns, "settle_s": settle_s,
           "from_start_s": t1 - t0, "from_start_per_s": rows / (t1 - t0),
           "start_to_first_row_s": first - t0,
           "drain_s": last - first_done, "per_s": steady}, open(path, "w"))
PY
}

if want 6 || want 7; then
    new_namespace d
fi
if want 7; then
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

# ---------------------------------------------------- end-to-end (9) ---
if want 9; then
    if [[ -n $BENCH_E2E_RATE ]]; then
        peak=0
    elif [[ -f $OUT/f2.json ]]; then
        peak=$(json_field req_per_s <"$OUT/f2.json")
    else
        log "(9) needs the peak of (2): measuring it for 3 s"
        new_namespace e
        start_gateway 3
        p=$(new_product 3 1000000000)
        load f9-peak --gateway "http://127.0.0.1:${GW_PORTS[3]}" --product "$p" --users 1000000000 \
            --duration 3 --settle-timeout 0 --no-history
        peak=$(json_field req_per_s <"$OUT/f9-peak.json")
        stop_proc g3
    fi
    rate=$(python3 -c "print(round($peak * $BENCH_E2E_FRACTION))")
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
        log "($1) end to end: $2 req/s offered (open loop) for ${D} s, one worker"
        load "$1" --gateway "http://127.0.0.1:${GW_PORTS[3]}" --product "$p" --users 1000000000 \
            --rate "$2" --duration "$D" --settle-timeout 120 --history "$OUT/$1-history.jsonl"
        stop_proc g3
        stop_proc w1
    }
    e2e f9 "$rate"
    # The same at a lower rate, to show where the latency goal holds on this machine.
    if [[ -z $BENCH_E2E_RATE ]]; then
        e2e f9l "$(python3 -c "print(max(1, round($peak * $BENCH_E2E_LOW_FRACTION)))")"
    fi
fi

# --------------------------------------------------------------- table ---
for k in "${!PIDS[@]}"; do stop_proc "$k"; done
SETTINGS="duration ${D} s per figure, concurrency $C, engine $BENCH_ENGINE, load tool threads ${BENCH_THREADS:-$(nproc) (one per CPU)}; \
gateway SECKILL_RATE_LIMIT_PER_USER_PER_SEC=0 SECKILL_MAX_IN_FLIGHT=$BENCH_MAX_IN_FLIGHT\
${BENCH_HTTP_WORKERS:+ SECKILL_HTTP_WORKERS=$BENCH_HTTP_WORKERS}${BENCH_KAFKA_LINGER_MS:+ SECKILL_KAFKA_LINGER_MS=$BENCH_KAFKA_LINGER_MS}; \
worker SECKILL_WORKER_BATCH_SIZE=$BENCH_BATCH SECKILL_WORKER_BATCH_LINGER_MS=$BENCH_LINGER_MS; \
(6)/(7) $BENCH_DRAIN_N orders, (8) $BENCH_ROW_N orders; (9) at ${BENCH_E2E_RATE:-$BENCH_E2E_FRACTION x (2)}${BENCH_E2E_RATE:+ req/s}; \
binaries ${BENCH_BIN:+from $BENCH_BIN, }release build of commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- gateway worker shared bench || echo ' with local changes')"
CHAOS_NOTE=""
if pgrep -f 'scripts/chaos\.sh' >/dev/null; then CHAOS_NOTE="scripts/chaos.sh was running during this run."; fi
python3 - "$OUT" "$REPORT" "$SETTINGS" "$QUICK" "$PROFILE" "$CHAOS_NOTE" "$*" <<'PY'
import datetime, json, os, platform, re, subprocess, sys
out, report, settings, quick, profile, chaos_note, _ = sys.argv[1:]

def load(name):
    p = os.path.join(out, name)
    try:
        return json.load(open(p))
    except Exception:
        return None

def outcome(summary, label):
    for o in (summary or {}).get("outcomes", []):
        if o["outcome"] == label:
            return o
    return None

def fmt(x, unit=""):
    if x is None:
        return "n/a"
    return f"{x:,.1f}{unit}" if x < 100 else f"{x:,.0f}{unit}"

rows = []  # (figure, what, value, p99, ratio text, goal, met)
f1, f2, f2l, f3, f4 = (load(f"{n}.json") for n in ("f1", "f2", "f2l", "f3", "f4"))
f6, f7, f8, f9 = (load(f"{n}.json") for n in ("f6", "f7", "f8", "f9"))
v1 = f1 and f1["req_per_s"]
wrk_rps = wrk_p99 = None
try:
    w = open(os.path.join(out, "wrk.txt")).read()
    wrk_rps = float(re.search(r"Requests/sec:\s*([\d.]+)", w).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", w)
    if m:
        wrk_p99 = float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]
except Exception:
    pass
v5 = None
try:
    import csv
    r = list(csv.reader(open(os.path.join(out, "f5.csv"))))
    v5 = float(r[-1][1])
    v5_p99 = float(r[-1][r[0].index("p99_latency_ms")]) if "p99_latency_ms" in r[0] else None
except Exception:
    v5_p99 = None

def ok(summary, label):
    o = outcome(summary, label)
    return (o["per_sec"], o["p99_ms"]) if o else (None, None)

v2, p2 = ok(f2, "202")
v2l, p2l = ok(f2l, "202")
v3, p3 = ok(f3, "409")
v4, p4 = ok(f4, "201")
def ratio(a, b):
    return a / b if a is not None and b else None
def met(r, goal):
    return None if r is None else r >= goal

def unexpected(summary, ok_label):
    """Answers other than the figure's own, e.g. '503 × 12, error × 3'."""
    if not summary:
        return ""
    bad = [f"{o['outcome']} × {o['count']}" for o in summary.get("outcomes", []) if o["outcome"] != ok_label]
    return f" ⚠ also {', '.join(bad)}" if bad else ""

def row(fig, what, value, unit, p99, ratio_text, goal, good):
    mark = {True: "yes", False: "**no**", None: "n/a"}[good] if goal else ""
    rows.append(f"| {fig} | {what} | {fmt(value)} {unit} | {'' if p99 is None else f'{p99:.2f} ms'} | {ratio_text} | {goal} | {mark} |")

def rt(r, label):
    return "n/a" if r is None else f"{r:.2f} × {label}"

row("1", "bare HTTP: `GET /livez` (seckill-bench)" + unexpected(f1, "200"), v1, "req/s", f1 and f1["all"]["p99_ms"], "ceiling", "", None)
row("1w", "bare HTTP: `GET /livez` (wrk)", wrk_rps, "req/s", wrk_p99, rt(ratio(wrk_rps, v1), "(1)"), "", None)
row("2", "accept path: `202`, unique users" + unexpected(f2, "202"), v2, "req/s", p2, rt(ratio(v2, v1), "(1)"), "≥ 0.5 × (1)", met(ratio(v2, v1), 0.5))
row("2L", "(2) with the per-user limit on (5/s)" + unexpected(f2l, "202"), v2l, "req/s", p2l, rt(ratio(v2l, v2), "(2)"), "", None)
marker = load("f3-marker.json")
what3 = "sold-out path: `409` from the marker"
if marker and f3:
    what3 += f" ({marker['marker_hits'] / max(1, f3['requests']):.1%} marker hits)"
row("3", what3 + unexpected(f3, "409"), v3, "req/s", p3, rt(ratio(v3, v1), "(1)"), "≥ 0.9 × (1)", met(ratio(v3, v1), 0.9))
row("4", "sync mode: `201` after the MySQL write" + unexpected(f4, "201"), v4, "req/s", p4, "(2) = " + rt(ratio(v2, v4), "(4)"), "(2) ≥ 10 × (4)", met(ratio(v2, v4), 10))
row("5", "Redis ceiling: `redis-benchmark` EVALSHA reserve.lua", v5, "calls/s", v5_p99, "(2) = " + rt(ratio(v2, v5), "(5)"), "report", None)
v6 = f6 and f6["per_s"]
v7 = f7 and f7["rows_per_s"]
v8 = f8 and f8["per_s"]
r67, r68 = ratio(v6, v7), ratio(v6, v8)
def from_start(d):
    return f"; {d['from_start_per_s']:,.0f}/s counting from the worker's start" if d else ""
row("6", f"worker drain, batched ({f6['orders'] if f6 else '?'} orders, steady rate{from_start(f6)})", v6, "orders/s",
    None, f"{rt(r67, '(7)')}; {rt(r68, '(8)')}", "≥ 0.5 × (7), ≥ 20 × (8)",
    None if r67 is None or r68 is None else (r67 >= 0.5 and r68 >= 20))
row("7", "raw MySQL ceiling: multi-row INSERT loop", v7, "rows/s", f7 and f7["batch_p99_ms"], "ceiling", "", None)
row("8", f"row-at-a-time worker ({f8['orders'] if f8 else '?'} orders, steady rate{from_start(f8)})", v8, "orders/s", None, "baseline", "", None)
e2e = (f9 or {}).get("e2e") or {}
v9_rate = f9 and f9["req_per_s"]
what9 = "end to end: `202` → confirmed"
if f9:
    t = f9["tickets"]
    what9 += f" at {v9_rate:,.0f} req/s offered-and-served; p50 {e2e.get('p50_ms', 0):.1f} ms ({e2e.get('count', 0)}/{t['issued']} tickets confirmed)"
what9 += unexpected(f9, "202")
p99_9 = e2e.get("p99_ms") if e2e else None
row("9", what9, None if p99_9 is None else p99_9, "ms p99", None, "", "p99 ≤ 50 ms", None if p99_9 is None else p99_9 <= 50)
f9l = load("f9l.json")
if f9l:
    e = f9l.get("e2e") or {}
    t = f9l["tickets"]
    p99l = e.get("p99_ms")
    row("9L", f"(9) at {f9l['req_per_s']:,.0f} req/s; p50 {e.get('p50_ms', 0):.1f} ms ({e.get('count', 0)}/{t['issued']} confirmed)" + unexpected(f9l, "202"),
        p99l, "ms p99", None, "", "(for reference)", None)

drain_notes = []
for name, d in (("6", f6), ("8", f8)):
    if d:
        drain_notes.append(f"({name}): {d['rows']} rows in {d['batches']} transactions ({d['settle_s']:.2f} s settling); "
                           f"steady rate after the first transaction: {d['per_s'] or 0:,.0f} orders/s over {d['drain_s']:.2f} s; "
                           f"from worker start {d['from_start_s']:.2f} s ({d['from_start_per_s']:,.0f} orders/s, incl. "
                           f"{d['start_to_first_row_s']:.2f} s start-up and group join)")

# Where the CPU goes, per request (µs of CPU time per request served, by process).
tck = os.sysconf("SC_CLK_TCK")
def cpu_rows():
    def snap(path):
        d = {}
        for line in open(path):
            k, pid, v = line.split()
            d[k] = (pid, int(v))
        return d
    def requests_of(name):
        if name == "wrk":
            m = re.search(r"(\d+) requests in", open(os.path.join(out, "wrk.txt")).read())
            return int(m.group(1)) if m else None
        d = load(f"{name}.json")
        if d is None:
            return None
        return d.get("requests") or d.get("rows")
    labels = {"f1": "(1) /livez", "wrk": "(1w) /livez, wrk", "f2": "(2) accept", "f2l": "(2L) accept, limiter on",
              "f3": "(3) sold out", "f4": "(4) sync", "f5": "(5) redis-benchmark", "f6": "(6) drain, batched", "f7": "(7) raw MySQL inserts",
              "f8": "(8) drain, row at a time", "f9": "(9) end to end", "f9l": "(9L) end to end, lower rate"}
    cols = ["gateway", "worker", "redis", "kafka", "mysql", "client", "machine"]
    out_rows = []
    for name, label in labels.items():
        p0, p1 = os.path.join(out, f"{name}.cpu0"), os.path.join(out, f"{name}.cpu1")
        if not (os.path.exists(p0) and os.path.exists(p1)):
            continue
        a, b = snap(p0), snap(p1)
        wall = (b["clock"][1] - a["clock"][1]) / 1e9
        per = {c: 0.0 for c in cols}
        for k, (pid, v) in b.items():
            if k in ("clock",):
                continue
            before = a.get(k)
            base = before[1] if before and before[0] == pid else 0
            role = {"g": "gateway", "w": "worker"}.get(k[0], k) if k[1:].isdigit() else k
            if role in per:
                per[role] += (v - base) / tck
        try:
            real, user, sys_ = (float(x) for x in open(os.path.join(out, f"{name}.time")).read().split()[-3:])
            per["client"] = user + sys_
        except Exception:
            pass
        n = requests_of(name)
        if name == "f5" and v5 is not None:
            n = int(v5 * wall)  # calls: rate × the run's length
        if not n:
            continue
        listed = sum(per[c] for c in cols if c != "machine")
        per["other"] = max(0.0, per["machine"] - listed)
        cells = [f"{per[c] * 1e6 / n:.0f}" for c in cols[:-1] + ["other", "machine"]]
        busy = per["machine"] / (wall * int(nproc)) if wall > 0 else 0
        out_rows.append(f"| {label} | {n:,} | " + " | ".join(cells) + f" | {busy:.0%} |")
    if not out_rows:
        return ""
    return ("| figure | requests | gateway | worker | Redis | Kafka (tansu) | MySQL | load tool | other | whole machine | machine busy |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(out_rows))

header = "| # | figure | value | p99 | ratio | goal | met |\n|---|---|---|---|---|---|---|"
table = header + "\n" + "\n".join(rows)
cpu = ""
try:
    cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
except Exception:
    pass
nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
import csv
try:
    cpu_table = cpu_rows()
except Exception as e:  # never lose the main table over this one
    cpu_table = f"(CPU accounting failed: {e})"
now = datetime.datetime.now(datetime.timezone.utc)
mode = "quick smoke run (--quick)" if quick == "1" else ("profiled run (--profile): figures perturbed by perf" if profile == "1" else "full run")
block = f"""<!-- bench:begin (generated by scripts/bench.sh; edit outside this block) -->
## Latest results

{now:%Y-%m-%d %H:%M} UTC, {mode}, on {platform.node()}: `nproc` = {nproc}, {cpu}, {platform.system()} {platform.release()}.
Settings: {settings}.
{chaos_note}

{table}

{chr(10).join('- ' + n for n in drain_notes)}

CPU time per request (µs), by process, over each figure's run (`/proc/<pid>/stat`; the load tool
from `time`; "other" is everything else that ran, the kernel's softirq work on loopback traffic
included; "whole machine" is all of it):

{cpu_table}

- Raw results: `{os.path.relpath(out)}` (removed by `scripts/dev-down.sh --purge`).
<!-- bench:end -->
"""
print()
print(table)
for n in drain_notes:
    print(n)
print()
print(cpu_table)
if report:
    text = open(report).read() if os.path.exists(report) else "# Benchmarks\n\n"
    if "<!-- bench:begin" in text and "<!-- bench:end -->" in text:
        head = text[: text.index("<!-- bench:begin")]
        tail = text[text.index("<!-- bench:end -->") + len("<!-- bench:end -->\n"):]
        text = head + block + tail
    else:
        text = text.rstrip() + "\n\n" + block
    open(report, "w").write(text)
    print(f"wrote {report}", file=sys.stderr)
PY
