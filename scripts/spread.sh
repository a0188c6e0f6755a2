#!/usr/bin/env bash
# Stock buckets' spread: one hot product sold out with its stock in 1, 2 and 4 buckets on a
# Redis Cluster of three primaries, and in 4 buckets on four primaries, with the CPU time of
# each primary read from /proc over the whole sale (reservations, the per-user limit, the
# workers' claim and confirm, the live figures). Each cluster is this script's own (no replicas,
# ports 7101-7104, data under .dev/spread/); the other services are dev-up's.
#
#   scripts/spread.sh                 writes .dev/spread/<time>/spread.md and prints it
#   STOCK=20000 CONCURRENCY=64 scripts/spread.sh
#
# Per run: accepts (202s), Redis CPU per accept on each primary (µs), and the busiest primary's
# share of all Redis CPU. The issue's goal: with N buckets on N primaries, the busiest carries
# at most 1.25 ÷ N of the Redis work.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
[[ -f $HOME/.cargo/env ]] && . "$HOME/.cargo/env"

: "${STOCK:=20000}" "${CONCURRENCY:=64}" "${RUNS:=3:1 3:2 3:4 4:4}" "${BASE_PORT:=7101}"
TOKEN=spread-admin-token-of-at-least-32-bytes JWT_SECRET=spread-hs256-secret-of-at-least-32-bytes
ADMISSION_SECRET=spread-admission-secret-of-at-least-32-bytes
GW_PORT=18181 WK_PORT=19291

scripts/dev-up.sh >&2
eval "$(dev_env)"
log "building (release)"
cargo build --release -q -p seckill-gateway -p seckill-worker -p seckill-bench
BIN=$ROOT/target/release
OUT=$ROOT/.dev/spread/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
BASE_MYSQL=${SECKILL_MYSQL_URL%/*}
RUN=s$(date +%s)
PIDS=()

cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for p in $(seq "$BASE_PORT" $((BASE_PORT + 3))); do
        redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
    done
}
trap cleanup EXIT

cpu_ticks() { # pid -> utime + stime
    awk '{ print $14 + $15 }' "/proc/$1/stat"
}

start_cluster() { # primaries
    local n=$1 p dir nodes=()
    for p in $(seq "$BASE_PORT" $((BASE_PORT + 3))); do
        redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
    done
    for p in $(seq "$BASE_PORT" $((BASE_PORT + n - 1))); do
        dir=$OUT/redis-$n-$p
        mkdir -p "$dir"
        redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
            --cluster-config-file "$dir/nodes.conf" --dir "$dir" --save '' --appendonly no \
            --pidfile "$dir/redis.pid" --daemonize yes --logfile "$dir/redis.log"
        wait_for -t 20 -m "redis $p" redis_node_ping "$p"
        nodes+=("127.0.0.1:$p")
    done
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$OUT/create-$n.log"
    wait_for -t 30 -m "cluster of $n" cluster_ok "$n"
}
cluster_ok() { # primaries
    local p
    for p in $(seq "$BASE_PORT" $((BASE_PORT + $1 - 1))); do
        redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok' || return 1
    done
}
cluster_url() { # primaries
    local p urls=()
    for p in $(seq "$BASE_PORT" $((BASE_PORT + $1 - 1))); do urls+=("127.0.0.1:$p"); done
    echo "redis+cluster://$(IFS=,; echo "${urls[*]}")"
}

admin() { # METHOD PATH [BODY]
    curl -fsS -X "$1" "http://127.0.0.1:$GW_PORT$2" -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' ${3:+-d "$3"}
}
json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

ROWS=()
one_run() { # primaries buckets
    local n=$1 b=$2 ns=$RUN-$1-$2 url gw wk id p t0s t1s
    url=$(cluster_url "$n")
    mysql_root -e "CREATE DATABASE \`sk_$ns\`"
    export SECKILL_NAMESPACE=$ns SECKILL_MYSQL_URL=$BASE_MYSQL/sk_$ns SECKILL_REDIS_URL=$url \
        SECKILL_KAFKA_TOPIC=orders-$ns SECKILL_WORKER_GROUP=workers-$ns SECKILL_ADMIN_TOKEN=$TOKEN \
        SECKILL_LOG_FORMAT=json SECKILL_AUTH_HS256_SECRET=$JWT_SECRET \
        SECKILL_ADMISSION_SECRET=$ADMISSION_SECRET \
        SECKILL_RATE_LIMIT_PER_ADDRESS_PER_SEC=0 SECKILL_MAX_IN_FLIGHT=100000
    "$BIN/worker" migrate >>"$OUT/migrate.log" 2>&1
    ensure_kafka_topic "orders-$ns" 8 >>"$OUT/topics.log" 2>&1
    SECKILL_HTTP_ADDR=127.0.0.1:$GW_PORT "$BIN/gateway" >"$OUT/gateway-$n-$b.log" 2>&1 &
    gw=$!
    SECKILL_WORKER_HTTP_ADDR=127.0.0.1:$WK_PORT "$BIN/worker" >"$OUT/worker-$n-$b.log" 2>&1 &
    wk=$!
    PIDS+=("$gw" "$wk")
    wait_for -t 30 -m "the gateway" curl -fsS "http://127.0.0.1:$GW_PORT/livez"
    id=$(admin POST /admin/products "{\"name\": \"spread $n-$b\", \"stock\": $STOCK, \"buckets\": $b}" | json_field id)
    admin POST "/admin/products/$id/preload" >/dev/null
    for p in $(seq "$BASE_PORT" $((BASE_PORT + n - 1))); do
        echo "$p $(cpu_ticks "$(cat "$OUT/redis-$n-$p/redis.pid")")"
    done >"$OUT/cpu0-$n-$b"
    "$BIN/seckill-bench" load --quiet --json --gateway "http://127.0.0.1:$GW_PORT" \
        --product "$id" --users "$STOCK" --until-sold-out --concurrency "$CONCURRENCY" \
        --settle-timeout 120 --history "$OUT/history-$n-$b.jsonl" \
        >"$OUT/load-$n-$b.json" 2>"$OUT/load-$n-$b.log"
    for p in $(seq "$BASE_PORT" $((BASE_PORT + n - 1))); do
        echo "$p $(cpu_ticks "$(cat "$OUT/redis-$n-$p/redis.pid")")"
    done >"$OUT/cpu1-$n-$b"
    admin GET "/admin/products/$id" >"$OUT/view-$n-$b.json"
    kill "$gw" "$wk"
    wait "$gw" "$wk" 2>/dev/null || true
    "$BIN/seckill-bench" audit --history "$OUT/history-$n-$b.jsonl" --product "$id" \
        --initial-stock "$STOCK" --until-sold-out >"$OUT/audit-$n-$b.txt" 2>&1 ||
        die "the audit of $n primaries, $b buckets failed: $OUT/audit-$n-$b.txt"
    ROWS+=("$n $b $("$BIN/seckill-bench" report outcome --file "$OUT/load-$n-$b.json" --outcome 202 --field count)")
}

for run in $RUNS; do
    n=${run%%:*} b=${run##*:}
    if [[ ${STARTED:-} != "$n" ]]; then
        start_cluster "$n"
        STARTED=$n
    fi
    log "$n primaries, $b buckets: selling $STOCK units"
    one_run "$n" "$b"
done

hz=$(getconf CLK_TCK)
{
    echo "Stock $STOCK, one product sold out by fresh buyers (one HS256 token each, the per-user"
    echo "limit on), concurrency $CONCURRENCY; Redis CPU from /proc over the whole sale and drain."
    echo
    echo "| primaries | buckets | accepts | borrowed | 202/s | 202 p50 / p99 (ms) | Redis CPU per accept, each primary (µs) | all primaries (µs) | busiest primary's share | goal (N on N) |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    # A field of the 202 outcome of the row's load run (n, b).
    outcome_field() { "$BIN/seckill-bench" report outcome --file "$OUT/load-$n-$b.json" --outcome 202 --field "$1"; }
    for row in "${ROWS[@]}"; do
        read -r n b accepts <<<"$row"
        python3 - "$OUT/cpu0-$n-$b" "$OUT/cpu1-$n-$b" "$hz" "$n" "$b" "$accepts" "$OUT/view-$n-$b.json" \
            "$(outcome_field per-sec)" "$(outcome_field p50-ms)" "$(outcome_field p99-ms)" <<'EOF'
import json, sys
try:
    lent = sum(b["lent"] for b in json.load(open(sys.argv[7]))["buckets"])
except Exception:
    lent = "?"
c0 = dict(l.split() for l in open(sys.argv[1]))
c1 = dict(l.split() for l in open(sys.argv[2]))
hz, n, b, acc = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
per_sec, p50, p99 = (float(x) for x in sys.argv[8:11])
used = {p: (int(c1[p]) - int(c0[p])) / hz * 1e6 for p in c0}
total = sum(used.values())
per = " / ".join(f"{used[p] / acc:.1f}" for p in sorted(used))
share = max(used.values()) / total if total else 0
goal = f"≤ {1.25 / b:.2f}: {'met' if share <= 1.25 / b else 'NOT met'}" if b <= n else "n/a (more buckets than primaries)"
print(f"| {n} | {b} | {acc} | {lent} | {per_sec:.0f} | {p50:.1f} / {p99:.1f} | {per} | {total / acc:.1f} | {share:.2f} | {goal} |")
EOF
    done
} | tee "$OUT/spread.md"
log "written: $OUT/spread.md"
