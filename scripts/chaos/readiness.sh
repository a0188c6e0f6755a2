# shellcheck shell=bash
# Sourced by scripts/chaos.sh (its settings and globals are in scope).
# Reading the sale through the admin API and metrics, and waiting until a fault is due.

# ------------------------------------------------------------- admin ---
admin() { # METHOD PATH [BODY]
    curl -fsS -X "$1" "http://127.0.0.1:${GW_PORTS[0]}$2" -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' ${3:+-d "$3"}
}
json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1]))' "$1"; }
# Units reserved so far (the admin view's stock_redis against RUN_STOCK), in SOLD.
units_sold() {
    local body
    body=$(admin GET "/admin/products/$PRODUCT" 2>/dev/null) || return 1
    [[ $body =~ \"stock_redis\":(-?[0-9]+) ]] || return 1
    SOLD=$((RUN_STOCK - BASH_REMATCH[1]))
}
sold_past() { units_sold && ((SOLD >= $1)); }
# Orders in flight when the fault comes, for sure: a fault seen to be due (a reservation
# pending) lands milliseconds later, while at a paced rate an order settles in about 30 ms, so
# it could find none. So the workers are frozen (SIGSTOP) until more units are reserved, and
# thawed once the fault is seen to have landed (`seen_down`): frozen, they settle nothing. Scenario 3 freezes
# only its victim, which dies frozen, until 10 more units: orders that all miss its half of
# the partitions come about once in 1,000 runs.
FROZEN=()
# With -o (scenario 16), a sale already sold out at the freeze will do: at herd speed it can
# sell out between the poll that found the fault due and the freeze. The fault then lands with
# no reservation in flight, which the evidence says.
freeze_until_sold() { # [-o] units key...
    local or_out=0 n key
    [[ $1 == -o ]] && { or_out=1; shift; }
    n=$1
    shift
    units_sold || { run_error "no admin view before the freeze"; return 1; }
    if ((or_out && SOLD >= RUN_STOCK)); then
        EVIDENCE+=("every unit ($SOLD) reserved before the freeze: the workers were not frozen, so orders may have settled before the fault")
        return 0
    fi
    FREEZE_START=$(now_us)
    for key; do
        kill -STOP "${PIDS[$key]}" || { thaw; run_error "kill -STOP ${PIDS[$key]} failed"; return 1; }
        FROZEN+=("$key")
    done
    if ! wait_for -t 30 -m "$n more units reserved while the workers are frozen" sold_past $((SOLD + n)); then
        thaw
        run_error "the sale did not go on while $* were frozen"
        return 1
    fi
    EVIDENCE+=("$(for key; do label "$key"; done | paste -sd, -) frozen (SIGSTOP) until $n more units were reserved")
}
thaw() { # [key]: SIGCONT the frozen workers but key (a victim, killed frozen)
    local key
    for key in "${FROZEN[@]}"; do
        [[ $key == "${1:-}" ]] || kill -CONT "${PIDS[$key]}" 2>/dev/null || true
    done
    FROZEN=()
}
VICTIM=""
fault_starts() { # [victim]: the fault is issued (FAULT_START until seen_down moves it)
    FAULT_START=$(now_us) VICTIM=${1:-}
}
# The faulted process or service is seen gone: the fault's start from now on (the judge's
# "in flight at the fault" and the timeline's shading), not when it was issued. The frozen
# workers (but a victim) are thawed now, so that what they held is still in flight then.
seen_down() {
    local issued=$FAULT_START
    FAULT_ISSUED=$issued
    FAULT_START=$(now_us)
    thaw "$VICTIM"
    EVIDENCE+=("seen down $(((FAULT_START - issued) / 1000)) ms after the fault was issued")
}
# At least FAULT_AFTER units taken from Redis stock and at least one reservation pending
# (reserved, not yet confirmed or failed): the moment to hit the sale.
# Parsed in bash, not python: the fault should follow the poll within milliseconds.
ready_for_fault() {
    local body
    body=$(admin GET "/admin/products/$PRODUCT" 2>/dev/null) || return 1
    [[ $body =~ \"stock_redis\":(-?[0-9]+) ]] || return 1
    ((RUN_STOCK - BASH_REMATCH[1] >= RUN_FAULT_AFTER)) || return 1
    [[ $body =~ \"pending\":([0-9]+) ]] && ((BASH_REMATCH[1] > 0))
}
# metric_of PORT PATTERN: the sum of the samples whose name (with labels) matches the awk
# regular expression PATTERN on the /metrics of the process on PORT; fails when none does.
metric_of() {
    curl -fsS "http://127.0.0.1:$1/metrics" |
        awk -v pat="$2" '$1 ~ pat { n += $2; seen = 1 } END { if (!seen) exit 1; print n }'
}
# Admission tokens gateway (index) has handed out itself: its own
# seckill_gateway_requests_total{outcome="admitted"} on joins and polls.
gateway_admitted() {
    metric_of "${GW_PORTS[$1]}" '^seckill_gateway_requests_total[{]outcome="admitted",'
}
# Scenario 13: gateway 0 itself has handed out admission tokens (its own counter, in
# G0_ADMITTED), and the room has buyers admitted and not bought (the admin view's
# waiting_room.admitted, in ADMITTED_AT_KILL).
admitting_now() {
    local body
    G0_ADMITTED=$(gateway_admitted 0) && ((G0_ADMITTED > 0)) || return 1
    body=$(admin GET "/admin/products/$PRODUCT" 2>/dev/null) || return 1
    [[ $body =~ \"admitted\":([0-9]+) ]] && ((BASH_REMATCH[1] > 0)) || return 1
    ADMITTED_AT_KILL=${BASH_REMATCH[1]}
}
# Scenario 11: MySQL's cancelled orders of the product (the admin view's orders_db).
db_cancelled() {
    admin GET "/admin/products/$PRODUCT" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["orders_db"]["cancelled"])'
}
# Scenario 11: orders a worker (index) has cancelled for want of payment since it started.
worker_expired() {
    metric_of "${WK_PORTS[$1]}" '^seckill_worker_orders_expired_total$'
}
# Scenarios 11 and 19: worker 0 is gone (it killed itself at its crash point); FAULT_START is
# when it was seen gone.
aborted_now() {
    alive "${PIDS[w0]}" && return 1
    FAULT_START=$(now_us)
}
wait_ready_for_fault() { # [predicate]: polls every 50 ms, reviving crashed processes on the way
    local deadline=$((SECONDS + 120)) ready=${1:-ready_for_fault}
    until "$ready"; do
        ((SECONDS < deadline)) || return 1
        revive
        sleep 0.05
    done
}
