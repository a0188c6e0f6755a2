#!/usr/bin/env bash
# The chaos suite: each scenario runs a flash sale on a fresh namespace with two gateways
# and two workers (release builds), injects its fault mid-run, sells out, then audits Redis,
# the tickets and MySQL with `seckill-bench audit`.
#
#   scripts/chaos.sh                     all 8 scenarios once
#   scripts/chaos.sh --runs 3            every scenario 3 times
#   scripts/chaos.sh --scenarios "1 2"   a subset (CI runs 1 and 2)
#   scripts/chaos.sh --report docs/RELIABILITY.md   also write the table there
#
# Scenarios: 1 no fault, 2 SECKILL_CHAOS_FAIL_RATE=0.1, 3 a worker SIGKILLed and restarted,
# 4 a gateway SIGKILLed and restarted, 5 MySQL stopped for 10 s, 6 ZooKeeper stopped for 10 s,
# 7 the broker restarted, 8 Redis restarted, then reconcile.
# Each run: stock $STOCK, $USERS users at concurrency $CONCURRENCY at about $RATE req/s across
# both gateways; the fault once $FAULT_AFTER units are sold; then --until-sold-out; then audit.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
[[ -f $HOME/.cargo/env ]] && . "$HOME/.cargo/env"

RUNS=1 SCENARIOS="1 2 3 4 5 6 7 8" REPORT=""
while (($#)); do
    case $1 in
        --runs) RUNS=$2; shift 2 ;;
        --scenarios) SCENARIOS=$2; shift 2 ;;
        --report) REPORT=$2; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
: "${STOCK:=300}" "${USERS:=3000}" "${CONCURRENCY:=64}" "${RATE:=100}" "${FAULT_AFTER:=100}"
GW_PORTS=(18081 18082) WK_PORTS=(19191 19192)
declare -A NAME=([1]="no fault" [2]="fail rate 0.1" [3]="worker SIGKILL" [4]="gateway SIGKILL"
    [5]="MySQL down 10 s" [6]="ZooKeeper down 10 s" [7]="broker restart" [8]="Redis restart + reconcile")

scripts/dev-up.sh
eval "$(dev_env)"
# PROFILE=debug reuses the test build (CI); release is the default for real runs.
: "${PROFILE:=release}"
log "building ($PROFILE)"
if [[ $PROFILE == release ]]; then
    cargo build --release --bin gateway --bin worker --bin seckill-bench
else
    cargo build --bin gateway --bin worker --bin seckill-bench
fi
BIN=$ROOT/target/$PROFILE
OUT=$DEV_DIR/chaos/$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
BASE_MYSQL=${SECKILL_MYSQL_URL%/*}
TOKEN=chaos-admin-token

declare -A PIDS=()
# Processes run in the run's folder with core dumps on, so a crash leaves a core there.
ulimit -c unlimited 2>/dev/null || true
start_gateway() { # index
    (cd "$RUN_DIR" && exec env SECKILL_HTTP_ADDR=127.0.0.1:${GW_PORTS[$1]} "$BIN/gateway") >>"$RUN_DIR/gateway-$1.log" 2>&1 &
    PIDS[g$1]=$!
    wait_for -t 30 -m "gateway $1" curl -fsS "http://127.0.0.1:${GW_PORTS[$1]}/livez"
}
start_worker() { # index
    (cd "$RUN_DIR" && exec env SECKILL_WORKER_HTTP_ADDR=127.0.0.1:${WK_PORTS[$1]} "$BIN/worker") >>"$RUN_DIR/worker-$1.log" 2>&1 &
    PIDS[w$1]=$!
    wait_for -t 90 -m "worker $1" curl -fsS "http://127.0.0.1:${WK_PORTS[$1]}/livez"
}
stop_all() {
    local p
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    PIDS=()
}
trap 'stop_all' EXIT
admin() { # METHOD PATH [BODY]
    curl -fsS -X "$1" "http://127.0.0.1:${GW_PORTS[0]}$2" -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' ${3:+-d "$3"}
}
json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1]))' "$1"; }
sold() { # units no longer in Redis stock
    local s
    s=$(admin GET "/admin/products/$PRODUCT" 2>/dev/null | json_field stock_redis) || return 1
    [[ $s =~ ^-?[0-9]+$ ]] && ((STOCK - s >= FAULT_AFTER))
}
# A process that died on its own (not by an injected kill) is restarted, as a supervisor such
# as compose's restart policy would, and counted in the table's "crashes" column.
revive() {
    local key kind i
    for key in g0 g1 w0 w1; do
        kind=${key:0:1} i=${key:1}
        [[ -n ${PIDS[$key]:-} ]] && ! kill -0 "${PIDS[$key]}" 2>/dev/null || continue
        echo "$(date -u +%T) $key died on its own; restarting it" >>"$RUN_DIR/crashes.log"
        CRASHES=$((CRASHES + 1))
        if [[ $kind == g ]]; then start_gateway "$i"; else start_worker "$i"; fi
    done
}
revived_and_healthy() { revive; all_healthy; }
all_healthy() {
    local p
    for p in "${GW_PORTS[@]}"; do curl -fsS "http://127.0.0.1:$p/healthz" >/dev/null || return 1; done
    for p in "${WK_PORTS[@]}"; do curl -fsS "http://127.0.0.1:$p/healthz" >/dev/null || return 1; done
}

inject() { # scenario
    case $1 in
        1|2) ;;
        3) kill -KILL "${PIDS[w0]}"; wait "${PIDS[w0]}" 2>/dev/null || true; start_worker 0 ;;
        4) kill -KILL "${PIDS[g0]}"; wait "${PIDS[g0]}" 2>/dev/null || true; start_gateway 0 ;;
        5) stop_mysql; sleep 10; start_mysql ;;
        6) stop_zookeeper; sleep 10; start_zookeeper ;;
        7) restart_kafka ;;
        8) restart_redis; wait_for -t 30 -m "reconcile" admin POST "/admin/products/$PRODUCT/reconcile" ;;
    esac
}

ROWS=()
run_one() { # scenario run
    local sc=$1 run=$2 ns db started fault_at recovered load_pid result
    CRASHES=0
    ns=c${sc}r${run}x$RANDOM
    db=sk_$ns
    RUN_DIR=$OUT/$ns
    mkdir -p "$RUN_DIR"
    log "scenario $sc (${NAME[$sc]}), run $run: namespace $ns, logs in $RUN_DIR"
    mysql_root -e "CREATE DATABASE \`$db\`"
    export SECKILL_NAMESPACE=$ns SECKILL_MYSQL_URL=$BASE_MYSQL/$db SECKILL_KAFKA_TOPIC=orders-$ns \
        SECKILL_WORKER_GROUP=workers-$ns SECKILL_ADMIN_TOKEN=$TOKEN SECKILL_LOG_FORMAT=pretty \
        SECKILL_PENDING_TIMEOUT_MS=5000 SECKILL_KAFKA_DELIVERY_TIMEOUT_MS=2000 SECKILL_CHAOS_FAIL_RATE=0
    [[ $sc == 2 ]] && export SECKILL_CHAOS_FAIL_RATE=0.1
    started=$SECONDS
    start_worker 0; start_worker 1; start_gateway 0; start_gateway 1
    PRODUCT=$(admin POST /admin/products "{\"name\": \"chaos $ns\", \"stock\": $STOCK}" | json_field id)
    admin POST "/admin/products/$PRODUCT/preload" >/dev/null

    "$BIN/seckill-bench" load --quiet --json \
        --gateway "http://127.0.0.1:${GW_PORTS[0]}" --gateway "http://127.0.0.1:${GW_PORTS[1]}" \
        --product "$PRODUCT" --users "$USERS" --concurrency "$CONCURRENCY" --rate "$RATE" \
        --until-sold-out --sold-out-timeout 240 --settle-timeout 120 --timeout 10 \
        --history "$RUN_DIR/history.jsonl" >"$RUN_DIR/load.json" 2>"$RUN_DIR/load.log" &
    load_pid=$!
    result=PASS
    wait_for -t 120 -m "$FAULT_AFTER units sold" sold || result=ERROR
    fault_at=$SECONDS
    inject "$sc" || result=ERROR
    wait_for -t 120 -m "every process healthy again" revived_and_healthy || result=ERROR
    recovered=$((SECONDS - fault_at))
    wait "$load_pid" || warn "load exited non-zero (see $RUN_DIR/load.log)"
    revive

    "$BIN/seckill-bench" audit --json --history "$RUN_DIR/history.jsonl" --product "$PRODUCT" \
        --namespace "$ns" >"$RUN_DIR/audit.json" 2>"$RUN_DIR/audit.log" || result=FAIL
    stop_all
    ROWS+=("$(python3 - "$RUN_DIR/audit.json" "$RUN_DIR/load.json" "$sc" "${NAME[$sc]}" "$run" "$recovered" "$((SECONDS - started))" "$result" "$CRASHES" <<'PY'
import json, sys
audit_path, load_path, sc, name, run, recovered, took, result, crashes = sys.argv[1:]
try:
    audit = json.load(open(audit_path))
    checks = {c["id"]: c for c in audit["checks"]}
    label = {"PASS": "pass", "SKIP": "n/a", "FAIL": "**FAIL**"}
    cells = [label.get(checks[i]["status"], "?") for i in sorted(checks)]
    sold = audit.get("order_rows", "?")
except Exception:  # no audit output at all
    cells, sold = ["?"] * 6, "?"
print("| %s %s | %s | %s | %s | %s s | %s | %s s | %s |" % (sc, name, run, " | ".join(cells), sold, recovered, crashes, took, result))
PY
)")
    echo "${ROWS[-1]}"
    [[ $result == PASS ]] || warn "run failed ($result): $RUN_DIR"
    mysql_root -e "DROP DATABASE \`$db\`" || true
}

for ((run = 1; run <= RUNS; run++)); do
    for sc in $SCENARIOS; do run_one "$sc" "$run"; done
done

HEADER="| scenario | run | 1 not oversold | 2 no double sale | 3 nothing lost | 4 tickets = rows | 5 stock conserved | 6 not undersold | sold | recovery | crashes | run took | audit |
|---|---|---|---|---|---|---|---|---|---|---|---|---|"
TABLE=$(printf '%s\n' "$HEADER" "${ROWS[@]}")
echo
echo "$TABLE"
if [[ -n $REPORT ]]; then
    python3 - "$REPORT" "$TABLE" "$RUNS" "$SCENARIOS" <<'PY'
import sys, datetime, platform, os, subprocess
path, table, runs, scenarios = sys.argv[1:]
cpu = ""
try:
    cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
except Exception:
    pass
text = open(path).read() if os.path.exists(path) else "# Reliability\n"
marker = "<!-- chaos results -->"
head = text.split(marker)[0].rstrip() + "\n\n" + marker + "\n"
body = f"""
## Latest chaos run

{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node()}: {os.cpu_count()} cores, {cpu}, {platform.system()} {platform.release()}.
`scripts/chaos.sh --runs {runs} --scenarios "{scenarios}"`

{table}
"""
open(path, "w").write(head + body)
PY
    log "wrote $REPORT"
fi
grep -q '\*\*FAIL\*\*\|| FAIL |\|| ERROR |' <<<"$TABLE" && { err "some runs failed"; exit 1; }
log "every audit passed"
