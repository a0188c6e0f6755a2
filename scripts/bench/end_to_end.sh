# shellcheck shell=bash
# Sourced by scripts/bench.sh (its settings and globals are in scope).
# Figure (9): end to end.

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
