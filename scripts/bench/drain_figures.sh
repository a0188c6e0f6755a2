# shellcheck shell=bash
# Sourced by scripts/bench.sh (its settings and globals are in scope).
# Figures (6) to (8), (10) and (11): the drain, the MySQL ceiling, payment expiry, the waiting room.

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

# --------------------------------------- live streams against polling (12) ---
# BENCH_LIVE_BUYERS (20000) buyers of a waiting-room product (BENCH_LIVE_STOCK units, 1000;
# BENCH_LIVE_ADMIT_PER_SEC admissions/s, 50, so that the line moves for about 20 s as on a sale
# day; factor 1.5), from their join to their order's confirmation, through two gateways and one
# worker, three ways: polling as advised (`poll`: the entry at its refresh_after_ms, the ticket
# every 300 ms), polling every 300 ms (`poll300`: the entry too, the issue's baseline), and live
# streams (`stream`: `…/events`). BENCH_LIVE_ROUNDS (2) alternated rounds each, each round
# on a fresh product. Two load processes of half the buyers each, at once: a process holds at
# most 20,000 sockets here. `measure` reads the CPU of every process and of the machine around
# each round (OUT/f12-<mode>-<round>.cpu0, .cpu1); the tools write OUT/f12-<mode>-<round>-{a,b}.json.
live_round() { # mode round
    local mode=$1 round=$2 half=$((BENCH_LIVE_BUYERS / 2)) product starts how
    case $mode in
    poll300) how=(--mode poll --queue-poll-ms 300) ;;
    *) how=(--mode "$mode") ;;
    esac
    starts=$(date -u -d "@$(($(date +%s) + 5 + BENCH_LIVE_BUYERS / 2500))" +%Y-%m-%dT%H:%M:%SZ)
    product=$(curl -fsS -X POST "http://127.0.0.1:${GW_PORTS[2]}/admin/products" \
        -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
        -d "{\"name\": \"live $mode $round\", \"stock\": $BENCH_LIVE_STOCK, \"starts_at\": \"$starts\", \"waiting_room\": {\"admit_per_sec\": $BENCH_LIVE_ADMIT_PER_SEC, \"max_admitted_factor\": 1.5}}" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
    curl -fsS -X POST "http://127.0.0.1:${GW_PORTS[2]}/admin/products/$product/preload" \
        -H "Authorization: Bearer $TOKEN" >/dev/null
    log "(12) round $round, $mode: product $product, $BENCH_LIVE_BUYERS buyers"
    live_pair() {
        local rc=0
        "${LOAD[@]}" live-sale "${how[@]}" --product "$product" --buyers "$half" --first-user 1 \
            --gateway "http://127.0.0.1:${GW_PORTS[2]}" --gateway "http://127.0.0.1:${GW_PORTS[3]}" \
            --out "$OUT/f12-$mode-$round-a.json" >>"$OUT/f12.txt" 2>>"$OUT/f12.log" &
        local a=$!
        "${LOAD[@]}" live-sale "${how[@]}" --product "$product" --buyers "$half" \
            --first-user $((half + 1)) \
            --gateway "http://127.0.0.1:${GW_PORTS[2]}" --gateway "http://127.0.0.1:${GW_PORTS[3]}" \
            --out "$OUT/f12-$mode-$round-b.json" >>"$OUT/f12.txt" 2>>"$OUT/f12.log" || rc=$?
        wait "$a" || rc=$?
        return $rc
    }
    measure "f12-$mode-$round" live_pair || warn "(12) round $round ($mode) is invalid: $OUT/f12.log"
}
if want 12; then
    new_namespace l
    start_worker 0 "SECKILL_WORKER_BATCH_SIZE=$BENCH_BATCH" "SECKILL_WORKER_BATCH_LINGER_MS=$BENCH_LINGER_MS"
    for g in 2 3; do
        start_gateway "$g" SECKILL_QUEUE_RATE_LIMIT_PER_USER_PER_SEC=0 \
            SECKILL_SSE_MAX_STREAMS=$BENCH_LIVE_BUYERS
    done
    wait_for -t 90 -m "the worker to own all $BENCH_PARTITIONS partitions" worker_assigned 0 "$BENCH_PARTITIONS"
    wait_for -t 600 -m "every service to answer" services_ok
    for round in $(seq 1 "$BENCH_LIVE_ROUNDS"); do
        live_round poll "$round"
        live_round poll300 "$round"
        live_round stream "$round"
    done
    cat "$OUT/f12.txt" >&2 || true
    stop_proc g2
    stop_proc g3
    stop_proc w0
fi
