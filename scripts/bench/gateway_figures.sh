# shellcheck shell=bash
# Sourced by scripts/bench.sh (its settings and globals are in scope).
# Figures (1) to (5): bare HTTP, the accept path, the sold-out path, sync mode, Redis.

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
    SHA=$(redis-cli -p "$REDIS_PORT" SCRIPT LOAD "$(cat shared/src/reservation/{token_bucket,reserve}.lua)")
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
