# shellcheck shell=bash
# Sourced by scripts/bench.sh (its settings and globals are in scope).
# Figure (14): what an order of several units costs the accept path (issue 38). The accept
# path of (2) on a freshly started gateway, a product sold up to 4 per buyer, with orders of
# 1 unit, of 4, and of 1 to 4 (a seeded draw per buyer), in BENCH_QTY_ROUNDS alternated rounds
# (each round starts one further along). scripts/bench/quantity_line.py prints the gateway's
# and Redis's CPU per accepted order and per unit of each, and 4 ÷ 1 per order with its 95 %
# interval (goal: at most 1.3).

if want 14; then
    new_namespace q
    qty_run() { # mode round
        local name=f14-$1-r$2 mix
        case $1 in
            one) mix=1 ;;
            four) mix=4 ;;
            mix) mix=1-4 ;;
        esac
        stop_proc g0
        start_gateway 0
        local p
        p=$(admin 0 POST /admin/products \
            "{\"name\": \"bench $RUN\", \"stock\": 1000000000, \"max_per_buyer\": 4}" | json_field id)
        admin 0 POST "/admin/products/$p/preload" >/dev/null
        load "$name" --gateway "http://127.0.0.1:${GW_PORTS[0]}" --users 1000000000 \
            --first-user $((1 + $2 * 100000000)) --duration "$D" --settle-timeout 0 \
            --no-history --product "$p" --quantity "$mix" --seed "$2" \
            || warn "(14) $1 round $2 failed: $OUT/$name.log"
    }
    ran 14
    QTY_ORDER=(one four mix)
    for ((round = 1; round <= BENCH_QTY_ROUNDS; round++)); do
        log "(14) quantities round $round of $BENCH_QTY_ROUNDS: 1, 4 and 1-4 units, ${D} s each"
        for ((i = 0; i < 3; i++)); do qty_run "${QTY_ORDER[(round - 1 + i) % 3]}" "$round"; done
    done
    stop_proc g0
fi
