# shellcheck shell=bash
# Sourced by scripts/bench.sh (its settings and globals are in scope).
# The processes and probes of a bench run: gateways, workers, products, CPU readings.

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
