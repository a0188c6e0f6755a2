#!/usr/bin/env bash
# The chaos suite: each scenario runs a flash sale on a fresh namespace with two gateways
# and two workers (release builds), injects its fault while reservations are in flight,
# sells out, stops every gateway and worker, then audits Redis, the tickets and MySQL with
# `seckill-bench audit`.
#
#   scripts/chaos.sh                     scenarios 1-13 and 16-19 once, paced
#   scripts/chaos.sh --runs 3            every scenario 3 times
#   scripts/chaos.sh --scenarios "1 2"   a subset (CI runs 1 and 2)
#   scripts/chaos.sh --rate 0            at herd speed: as fast as the gateways answer
#   scripts/chaos.sh --rate 20           paced at 20 req/s
#   scripts/chaos.sh --speeds "paced herd"   each scenario at both speeds
#   scripts/chaos.sh --buckets 4         every product's stock in 4 buckets (not scenario 13,
#                                        whose waiting room keeps one)
#   scripts/chaos.sh --report docs/RELIABILITY.md   also write the table there, with each
#                                        scenario's timeline (run 1) under img/chaos/ beside it
#   scripts/chaos.sh --redis cluster     on a Redis Cluster (3 primaries, each with a replica)
#   scripts/chaos.sh --zk ensemble       on a ZooKeeper ensemble of three
#   scripts/chaos.sh --quantity 1-4      orders of 1 to 4 units, drawn per buyer (the products
#                                        sell up to 4 per buyer; not scenario 13, whose
#                                        waiting room buyers buy one)
#
# Scenarios: 1 no fault, 2 SECKILL_CHAOS_FAIL_RATE=0.1, 3 a worker SIGKILLed and restarted
# $RESTART_AFTER (5) s later, as a supervisor's back-off would, 4 the same for a gateway,
# 5 MySQL SIGKILLed and down for 10 s, 6 ZooKeeper SIGKILLed and down for 10 s (a three-server
# ensemble: stopped), 7 the broker SIGKILLed and started
# again, 8 Redis
# restarted (no reconcile call: the gateways and workers find the loss and rebuild the product),
# 9 the same once the first unit is sold.
# Scenarios 10-12 sell a priced product with a payment window of $PAY_WINDOW (3) s through a
# simulated payment provider (`seckill-bench provider`, port $PROVIDER_PORT (18099), one per
# run, declining 10 % of charges, deciding 200 ms after each): $PAY_RATE (0.7) of the buyers
# pay, the others never do, so their orders are cancelled at the deadline and the units sold
# again, until every unit is paid (`load --until-all-paid`, audited with --expect-all-paid).
# 10 no fault beyond the 30 % who never pay, 11 a worker dead while it cancels expired orders
# (SECKILL_CHAOS_ABORT_AFTER_EXPIRY=1 on worker 0: it SIGKILLs itself right after the MySQL
# commit of its first cancels, before the units go back to Redis; proven by its exit status and
# those orders cancelled with restore_due still set when it is seen gone) and restarted
# $RESTART_AFTER s later, 12 a provider whose callbacks come late (20 %,
# 4 s: after the deadline, so a success must end `refund_due`), twice (30 %), and so out of
# order. Stock $PAY_STOCK (200), $PAY_USERS (300) users then fresh ones, at $RATE req/s paced
# or $PAY_HERD_RATE (400) req/s for herd (the all-paid load needs a rate).
# Paced: stock $STOCK (1000), $USERS (1000) users, then fresh ones until sold out, at $RATE
# (50) req/s, concurrency $CONCURRENCY (64); the fault once $FAULT_AFTER (100) units are sold,
# so about 20 s of sale, nine tenths of it from the fault on. A reservation takes some 35 ms
# from Redis to its confirmation (producer linger 5 ms, batch linger 20 ms, the commit): at
# 50 req/s one is always in flight, at 10 req/s most instants have none.
# Herd: stock $HERD_STOCK (5000), $HERD_USERS (30000) users, no pacing, the same concurrency;
# the fault once $HERD_FAULT_AFTER (500) units are sold.
# Either way the fault waits for a reservation in flight (Redis pending > 0); in scenarios 11
# and 19 it waits for worker 0 to die at its crash point instead.
# Scenario 13 sells through a waiting room: stock $WR_STOCK (200), $WR_USERS (600) buyers join
# through both gateways before the start ($WR_START_IN (8) s after the product is made), then
# poll and buy with their admission tokens (`load --waiting-room`), $WR_ADMIT_PER_SEC (100)
# admissions a second, factor $WR_FACTOR (1.5). Gateway 0 is SIGKILLed once admissions are
# happening (the admin view's waiting_room.admitted > 0) and restarted $RESTART_AFTER s later;
# buyers retry on the other gateway. It passes when every unit is sold (order rows = stock),
# and the audit passes with its waiting-room checks 13-15 (every buyer held a valid admission,
# the cap held in every sample, no place admitted twice).
#
# Scenario 14 (--redis cluster only) SIGKILLs the Redis primary that holds the product's slot;
# its replica takes over (a replica can lag: a small Redis loss), and the killed node rejoins
# $RESTART_AFTER s later. On a cluster, scenarios 8 and 9 restart every node (all data lost).
# Scenario 15 (--zk ensemble only) SIGKILLs the ensemble's leader mid-sale, with 10 % of orders
# failing so that units come back and every gateway's marker must drop through the new
# leader; each gateway must keep its one ZooKeeper session (it may reconnect to a follower).
# Scenario 16: Redis comes back old. On one server: a snapshot (SAVE) once FAULT_AFTER units
# are sold, and at three times that Redis is stopped and started again from it, as a restart
# with RDB snapshots or AOF everysec gives. On a cluster: the replica of the product's primary
# is cut off (a wrong masterauth, its link dropped) at FAULT_AFTER, and at three times that it
# takes over (CLUSTER FAILOVER TAKEOVER), a failover to a replica that lagged. Either way the
# product's state comes back from the first point while orders of the second are in flight;
# nothing is allowed to fail.
# Scenarios 17 and 18 sell the priced product of 10-12 through the same provider, every unit
# to be paid, with buyers who stress the payment window's API instead of a fault. 17, a cancel
# storm: $CANCEL_RATE (0.5) of the buyers cancel (`load --cancel-rate`): from their 202 on,
# `POST /v1/orders/{ticket}/cancel` every 20-50 ms until 200 or a final refusal (refused as
# pending until the order is confirmed), so cancels land between a worker's MySQL commit and
# its Redis confirm; the others pay. It needs cancels answered 200 and refused as pending (else
# ERROR), and each buyer_cancelled order in MySQL must have the load's 200 that cancelled it
# (a `cancel` line of the history), and each such 200 its buyer_cancelled order (else FAIL).
# 18, a double pay: every buyer pays, each attempt as two requests at once with two keys on
# the two gateways (`load --double-pay`). It fails if MySQL's payments show one recorded while
# another of its ticket was unsettled, or more than one success (succeeded or refund_due) for a
# ticket; it needs 409 payment_in_progress answers (else ERROR). A payment's created_at_ms is
# stamped before the gateway waits for the order's row lock, so it only bounds the recording
# from below: a payment counts as recorded by its 202 (the load's clock) or by its settling less
# the provider's delay, whichever is earlier.
# Scenario 19: worker 0 runs with SECKILL_CHAOS_ABORT_AFTER_COMMIT (half of FAULT_AFTER), so it
# SIGKILLs itself right after a MySQL commit and before that batch's Redis confirm: the order is
# in MySQL, its ticket `processing` in Redis, its Kafka offset not committed. It is proven from
# the worker itself (its exit status, and its last words naming the batch's tickets and Redis
# records, checked against MySQL and Redis as it is found gone); FAULT_START is when it was
# seen gone. Restarted $RESTART_AFTER s later; nothing may fail.
#
# Every 409 sold_out is judged against the admin samples around it (FAIL when both show units
# in Redis and none came back between them).
# A run is PASS only if the audit passes (every promise kept: confirmed, paid, cancelled for
# a payment timeout or by its buyer, or failed for an allowed reason), the sale sold out (10-12:
# every unit ended paid), no process crashed (died on its own, exited
# non-zero on SIGTERM, panicked, or left a core), and the fault really hit the sale. FAIL:
# the audit or a crash. ERROR: the fault did not happen as designed (a step failed, it had no
# effect, or it missed the sale), so the run proves nothing. Exit status 1 unless all PASS.
# Each run leaves timeline.svg in its folder (`seckill-bench plot chaos`): tickets accepted,
# confirmed and compensated, and reservations pending, over time, from the admin view the load
# samples every $SAMPLE_MS (250) ms, with the fault's window (fault.json) shaded.
# PROFILE=debug reuses the debug build; BIN_DIR=DIR uses the binaries in DIR, unbuilt.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
[[ -f $HOME/.cargo/env ]] && . "$HOME/.cargo/env"

RUNS=1 SCENARIOS="1 2 3 4 5 6 7 8 9 10 11 12 13 16 17 18 19" REPORT="" SPEEDS=paced
while (($#)); do
    case $1 in
        --runs) RUNS=$2; shift 2 ;;
        --scenarios) SCENARIOS=$2; shift 2 ;;
        --report) REPORT=$2; shift 2 ;;
        --rate)
            [[ $2 =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--rate takes a number (0: herd speed)"
            if [[ $2 =~ ^0+([.]0+)?$ ]]; then SPEEDS=herd; else RATE=$2 SPEEDS=paced; fi
            shift 2 ;;
        --speeds) SPEEDS=$2; shift 2 ;;
        --redis) REDIS_MODE=$2; shift 2 ;;
        --zk) ZK_MODE=$2; shift 2 ;;
        --buckets) BUCKETS=$2; shift 2 ;;
        --quantity) QUANTITY=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
for speed in $SPEEDS; do [[ $speed == paced || $speed == herd ]] || die "unknown speed $speed"; done
[[ ${REDIS_MODE:=single} =~ ^(single|cluster)$ ]] || die "--redis takes single or cluster"
[[ ${ZK_MODE:=single} =~ ^(single|ensemble)$ ]] || die "--zk takes single or ensemble"
[[ ${BUCKETS:=1} =~ ^([1-9]|[1-5][0-9]|6[0-4])$ ]] || die "--buckets takes 1 to 64"
[[ ${QUANTITY:=1} =~ ^[1-9][0-9]?(-[1-9][0-9]?)?$ ]] || die "--quantity takes N or A-B (1 to 99)"
MAX_PER_BUYER=${QUANTITY#*-}
export REDIS_MODE ZK_MODE
for sc in $SCENARIOS; do
    [[ $sc =~ ^([1-9]|1[0-9])$ ]] || die "unknown scenario $sc"
    [[ $sc != 14 || $REDIS_MODE == cluster ]] || die "scenario 14 needs --redis cluster"
    [[ $sc != 15 || $ZK_MODE == ensemble ]] || die "scenario 15 needs --zk ensemble"
done
: "${STOCK:=1000}" "${USERS:=1000}" "${CONCURRENCY:=64}" "${RATE:=50}" "${FAULT_AFTER:=100}"
: "${HERD_STOCK:=5000}" "${HERD_USERS:=30000}" "${HERD_FAULT_AFTER:=500}" "${RESTART_AFTER:=5}"
: "${PAY_STOCK:=200}" "${PAY_USERS:=300}" "${PAY_WINDOW:=3}" "${PAY_RATE:=0.7}" "${PAY_HERD_RATE:=400}"
: "${PROVIDER_PORT:=18099}" "${SAMPLE_MS:=250}"
: "${CANCEL_RATE:=0.5}"
: "${WR_STOCK:=200}" "${WR_USERS:=600}" "${WR_ADMIT_PER_SEC:=100}" "${WR_FACTOR:=1.5}" "${WR_START_IN:=8}"
# CHAOS_PORTS="gw0 gw1 wk0 wk1" moves the processes' own ports, so that two runs (say, one
# server and a cluster, each with its own services' ports) can share a machine.
read -r GW0 GW1 WK0 WK1 <<<"${CHAOS_PORTS:-18081 18082 19191 19192}"
GW_PORTS=("$GW0" "$GW1") WK_PORTS=("$WK0" "$WK1")
declare -A NAME=([1]="no fault" [2]="fail rate 0.1" [3]="worker SIGKILL" [4]="gateway SIGKILL"
    [5]="MySQL down 10 s" [6]="ZooKeeper down 10 s" [7]="broker restart" [8]="Redis restart"
    [9]="Redis restart in the first second" [10]="30 % never pay" [11]="worker SIGKILL while expiring"
    [12]="late, duplicated, reordered callbacks" [13]="gateway SIGKILL mid-admission"
    [14]="Redis primary SIGKILL" [15]="ZooKeeper leader SIGKILL" [16]="Redis comes back old")
NAME+=([17]="a cancel storm" [18]="a double pay" [19]="worker dies between commit and confirm")
# Scenarios 10-12, 17 and 18: a priced product with a payment window, a provider, buyers who pay.
is_payment() { [[ $1 == 1[0-2] || $1 == 1[78] ]]; }
# Failure reasons each scenario allows; any other failed promise fails the run.
# Scenario 7 is a stand-in limitation, not a property of the design: the local broker (tansu)
# keeps messages in memory, so a restart loses messages it had acknowledged, which Kafka with
# acks=all and replication would not. Their tickets end `expired` (swept) or `lost`.
declare -A ALLOW=([2]="chaos" [7]="expired lost" [15]="chaos")
KNOWN_CRASH_7="confluentinc/librdkafka#5280"

# Processes run in the run's folder with core dumps on, so a crash leaves a core there.
ulimit -c unlimited 2>/dev/null || true
# That needs cores allowed and a core_pattern that writes `core...` into the process's own
# folder: a pipe (apport, systemd-coredump) or a path elsewhere would hide every crash's core
# from scan_crashes. CORE_PATTERN_FILE reads another file (to try this check).
check_cores() {
    local pattern limit
    pattern=$(cat "${CORE_PATTERN_FILE:-/proc/sys/kernel/core_pattern}" 2>/dev/null) || pattern=""
    limit=$(ulimit -c)
    [[ $pattern == core* && $pattern != */* ]] ||
        die "core dumps go to '${pattern:-?}', not into the run's folder, so a crashed process's core would not be found." \
            "As root: echo core > /proc/sys/kernel/core_pattern"
    [[ $limit == unlimited || $limit -gt 0 ]] || die "core dumps are off (ulimit -c $limit) and cannot be turned on"
}
check_cores
scripts/dev-up.sh
eval "$(dev_env)"
# PROFILE=debug reuses the test build (CI); release is the default for real runs.
: "${PROFILE:=release}"
if [[ -n ${BIN_DIR:-} ]]; then
    BIN=$(cd "$BIN_DIR" && pwd -P)
    BUILD="binaries from $BIN"
    log "using the binaries in $BIN (not built)"
else
    log "building ($PROFILE)"
    if [[ $PROFILE == release ]]; then
        cargo build --release --bin gateway --bin worker --bin seckill-bench
    else
        cargo build --bin gateway --bin worker --bin seckill-bench
    fi
    BIN=$ROOT/target/$PROFILE
    BUILD="$PROFILE build"
fi
OUT=$DEV_DIR/chaos/$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
BASE_MYSQL=${SECKILL_MYSQL_URL%/*}
TOKEN=chaos-admin-token-of-at-least-32-bytes
# Buyers are authenticated as in production: the load tool signs one HS256 token per buyer.
JWT_SECRET=chaos-hs256-secret-of-at-least-32-bytes
# The gateways sign waiting-room admissions with it (scenario 13).
ADMISSION_SECRET=chaos-admission-secret-of-at-least-32-bytes
# A stop that stops nothing is an error (see lib.sh).
# shellcheck disable=SC2034 # read by lib.sh
STOP_STRICT=1

now_us() { date +%s%6N; }
# alive PID: running and not a zombie.
alive() {
    local state
    state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n $state && ${state:0:1} != Z ]]
}

# The parts of the suite, in the order they were written in one file.
CHAOS_PARTS=$ROOT/scripts/chaos
# shellcheck source=chaos/processes.sh
. "$CHAOS_PARTS/processes.sh"
# shellcheck source=chaos/readiness.sh
. "$CHAOS_PARTS/readiness.sh"
# shellcheck source=chaos/faults.sh
. "$CHAOS_PARTS/faults.sh"
# shellcheck source=chaos/verdict.sh
. "$CHAOS_PARTS/verdict.sh"

# --------------------------------------------------------------- runs ---
ROWS=() NOT_PASS=0 PAY_ENV=0
WEBHOOK_SECRET=chaos-webhook-secret
# Scenarios 10-12, after the audit: MySQL's payments by status and orders by status and
# cancel reason, to mysql-counts.tsv (kind, state, count) for the judge.
mysql_counts() { # db
    mysql_root -N -B -e "SELECT 'payment', status, COUNT(*) FROM \`$1\`.payments GROUP BY status;
        SELECT 'order', CONCAT(status, IFNULL(CONCAT(':', cancel_reason), '')), COUNT(*)
        FROM \`$1\`.orders GROUP BY 2" >"$RUN_DIR/mysql-counts.tsv" ||
        run_error "counting payments and orders in MySQL failed"
}
# Scenarios 17 and 18, after the audit, for the judge: each order's ticket, status and cancel
# reason ('-' for none) to orders.tsv (17); each payment's ticket, id, status, created_at_ms
# and settled_at_ms ('-' while unsettled) to payments.tsv (18).
mysql_rows() { # db scenario
    local what=orders query="SELECT ticket, status, IFNULL(cancel_reason, '-') FROM \`$1\`.orders"
    if [[ $2 == 18 ]]; then
        what=payments
        query="SELECT ticket, payment_id, status, created_at_ms, IFNULL(settled_at_ms, '-')
            FROM \`$1\`.payments ORDER BY ticket, created_at_ms"
    fi
    mysql_root -N -B -e "$query" >"$RUN_DIR/$what.tsv" || run_error "reading the $what from MySQL failed"
}
# Scenarios 17 and 18, once the load is over: what the buyers did, from load.json, one line.
buyers_evidence() { # scenario
    python3 - "$RUN_DIR/load.json" "$1" <<'PY2'
import json, sys
p = json.load(open(sys.argv[1]))["payments"]
if sys.argv[2] == "17":
    c = p["cancels"]
    print(f"{c['buyers_cancelling']} buyers cancelling from their 202 on: {c['cancelled']} cancels "
          f"answered 200, {c['refused'].get('pending', 0)} refused as pending before")
else:
    d = p["double_pay"]
    print(f"{d['pairs']} pairs of keys paid at once: {p['refused'].get('payment_in_progress', 0)} "
          f"answered 409 payment_in_progress, {d['both_accepted']} pairs both 202")
PY2
}
# Scenario 11, once the load is over: the expiries around the kill, to expiry.json.
write_expiry_json() {
    local at_end after
    at_end=$(db_cancelled) || at_end=""
    after=$(worker_expired "$EXPIRY_VICTIM") || after=""
    python3 - "$RUN_DIR/expiry.json" "$EXPIRY_VICTIM" "$EXPIRED_AT_KILL" "${CANCELLED_AT_KILL:-}" \
        "${CANCELLED_AT_RESTART:-}" "$at_end" "$after" <<'PY2'
import json, sys
path, *v = sys.argv[1:]
num = lambda s: int(s) if s else None
keys = ["victim", "victim_expired_at_kill", "cancelled_at_kill", "cancelled_at_restart",
        "cancelled_at_end", "victim_expired_after_restart"]
json.dump(dict(zip(keys, map(num, v))), open(path, "w"), indent=1)
PY2
}
# The run's timeline to RUN_DIR/timeline.svg. Run 1 of each scenario and speed goes into the
# report: TIMELINES holds "scenario|speed|verdict|svg" for it. A run whose timeline cannot be
# drawn is judged all the same (the plot is not evidence).
TIMELINES=()
speed_text() { # speed scenario
    if [[ $1 == herd ]]; then is_payment "$2" && echo "herd ($PAY_HERD_RATE/s)" || echo herd
    elif [[ $2 == 13 ]]; then echo "waiting room"
    else echo "paced $RATE/s"; fi
}
plot_run() { # scenario speed run verdict
    local title
    title="Scenario $1: ${NAME[$1]}, $(speed_text "$2" "$1"), run $3: $4"
    if "$BIN/seckill-bench" plot chaos --run-dir "$RUN_DIR" --out "$RUN_DIR/timeline.svg" \
        --title "$title" 2>"$RUN_DIR/plot.log"; then
        (($3 == 1)) && TIMELINES+=("$1|$2|$4|$RUN_DIR/timeline.svg")
    else
        warn "no timeline for this run: $(tail -n 1 "$RUN_DIR/plot.log")"
    fi
    return 0
}
run_one() { # scenario speed run
    local sc=$1 speed=$2 run=$3 ns db started fault_at recovered=- load_pid rate_args=() allow_args=() r
    local body sale_args=() audit_args=() odds=() seed ready=ready_for_fault
    SC=$sc
    ns=c${sc}${speed:0:1}r${run}x$RANDOM
    db=sk_$ns
    RUN_DIR=$OUT/$ns
    mkdir -p "$RUN_DIR"
    : >"$RUN_DIR/crashes.txt"
    : >"$RUN_DIR/errors.txt"
    if [[ $speed == herd ]]; then
        RUN_STOCK=$HERD_STOCK RUN_USERS=$HERD_USERS RUN_FAULT_AFTER=$HERD_FAULT_AFTER
    else
        RUN_STOCK=$STOCK RUN_USERS=$USERS RUN_FAULT_AFTER=$FAULT_AFTER rate_args=(--rate "$RATE")
    fi
    [[ $sc == 9 ]] && RUN_FAULT_AFTER=1
    W0_ABORT=""
    # Scenario 19: worker 0 commits about half of the orders.
    [[ $sc == 19 ]] && W0_ABORT=SECKILL_CHAOS_ABORT_AFTER_COMMIT=$((RUN_FAULT_AFTER / 2)) ready=aborted_now
    # Scenarios 6 and 15 land near the sell-out, so that it comes while ZooKeeper is down (its
    # stop takes about 1 s) or without a leader: paced, with 3 s (6) or 1 s (15) of the sale
    # left; at herd speed the whole herd takes about 2 s.
    if [[ $sc == 6 || $sc == 15 ]]; then
        ready=near_sell_out NEAR_OUT=$RUN_STOCK
        [[ $speed == paced ]] && { NEAR_OUT=$((RATE * 3)); [[ $sc == 15 ]] && NEAR_OUT=$RATE; }
    fi
    for r in ${ALLOW[$sc]:-}; do allow_args+=(--allow-failure "$r"); done
    FAULT_START="" FAULT_END="" FAULT_ISSUED="" FREEZE_START="" EVIDENCE=()
    local services_at_start
    services_at_start=$(service_pids)
    body="{\"name\": \"chaos $ns\", \"stock\": $RUN_STOCK, \"buckets\": $BUCKETS, \"max_per_buyer\": $MAX_PER_BUYER}"
    sale_args=(--until-sold-out --sold-out-timeout 120) audit_args=(--until-sold-out)
    if is_payment "$sc"; then
        # The all-paid load needs a rate: herd speed is a high one.
        RUN_STOCK=$PAY_STOCK RUN_USERS=$PAY_USERS
        [[ $speed == herd ]] && rate_args=(--rate "$PAY_HERD_RATE")
        seed=$((RANDOM * 32768 + RANDOM))
        body="{\"name\": \"chaos $ns\", \"stock\": $RUN_STOCK, \"price\": 499900, \"currency\": \"CNY\", \"payment_window_secs\": $PAY_WINDOW, \"buckets\": $BUCKETS, \"max_per_buyer\": $MAX_PER_BUYER}"
        # 17 and 18: every buyer who does not cancel pays.
        local pay_rate=$PAY_RATE
        [[ $sc == 17 || $sc == 18 ]] && pay_rate=1
        sale_args=(--pay-rate "$pay_rate" --seed "$seed" --until-all-paid --all-paid-wait-secs 150)
        [[ $sc == 17 ]] && sale_args+=(--cancel-rate "$CANCEL_RATE")
        [[ $sc == 18 ]] && sale_args+=(--double-pay)
        audit_args=(--expect-all-paid)
        odds=(--decline-rate 0.1 --delay-ms 200 --late-rate 0 --duplicate-rate 0)
        [[ $sc == 12 ]] && odds=(--decline-rate 0.1 --delay-ms 200 --late-rate 0.2 --late-delay-ms 4000 --duplicate-rate 0.3)
        # Scenario 11: worker 0 dies right after committing its first payment-timeout cancels.
        # (At herd speed the other worker takes most rounds: in one run worker 0 cancelled
        # once in 14, so a higher count was never reached.)
        [[ $sc == 11 ]] && W0_ABORT=SECKILL_CHAOS_ABORT_AFTER_EXPIRY=1 ready=aborted_now
        EXPIRY_VICTIM="" EXPIRED_AT_KILL="" CANCELLED_AT_KILL="" CANCELLED_AT_RESTART=""
    fi
    if [[ $sc == 13 ]]; then
        # A waiting room: buyers join before the start, then poll and buy when admitted. The
        # load paces itself by the room's refresh_after_ms: no --rate.
        RUN_STOCK=$WR_STOCK RUN_USERS=$WR_USERS rate_args=()
        sale_args=(--waiting-room --until-sold-out --wr-timeout 150)
        ready=admitting_now ADMITTED_AT_KILL="" G0_ADMITTED=""
    fi
    log "scenario $sc (${NAME[$sc]}), $speed, run $run: namespace $ns, logs in $RUN_DIR"
    mysql_root -e "CREATE DATABASE \`$db\`"
    export SECKILL_NAMESPACE=$ns SECKILL_MYSQL_URL=$BASE_MYSQL/$db SECKILL_KAFKA_TOPIC=orders-$ns \
        SECKILL_WORKER_GROUP=workers-$ns SECKILL_ADMIN_TOKEN=$TOKEN SECKILL_LOG_FORMAT=pretty \
        SECKILL_AUTH_HS256_SECRET=$JWT_SECRET SECKILL_RATE_LIMIT_PER_ADDRESS_PER_SEC=0 \
        SECKILL_ADMISSION_SECRET=$ADMISSION_SECRET \
        SECKILL_PENDING_TIMEOUT_MS=5000 SECKILL_PENDING_LAST_RESORT_MS=30000 \
        SECKILL_KAFKA_DELIVERY_TIMEOUT_MS=2000 SECKILL_CHAOS_FAIL_RATE=0
    [[ $sc == 2 || $sc == 15 ]] && export SECKILL_CHAOS_FAIL_RATE=0.1
    # The gateways take payments through the provider and its callbacks on gateway 0. Scenarios
    # 1-9 run with the caller's environment, as before.
    if is_payment "$sc"; then
        export SECKILL_PAYMENT_PROVIDER_URL=http://127.0.0.1:$PROVIDER_PORT \
            SECKILL_PAYMENT_CALLBACK_URL=http://127.0.0.1:${GW_PORTS[0]}/v1/payments/callback \
            SECKILL_PAYMENT_WEBHOOK_SECRET=$WEBHOOK_SECRET
        PAY_ENV=1
    elif ((PAY_ENV)); then
        unset SECKILL_PAYMENT_PROVIDER_URL SECKILL_PAYMENT_CALLBACK_URL SECKILL_PAYMENT_WEBHOOK_SECRET
        PAY_ENV=0
    fi
    started=$SECONDS
    if ! { start_worker 0 && start_worker 1 && start_gateway 0 && start_gateway 1; }; then
        die "the services did not start; see $RUN_DIR"
    fi
    # The sale starts once the group has settled: every partition assigned to one of the two
    # workers (otherwise the first seconds' orders wait for the rebalance, which measures the
    # start-up, not the fault).
    wait_for -t 60 -m "every partition assigned" all_assigned || die "the workers did not share the partitions; see $RUN_DIR"
    if is_payment "$sc"; then
        echo "$seed" >"$RUN_DIR/seed"
        start_provider "${odds[@]}" --seed "$seed" || die "the payment provider did not start; see $RUN_DIR/provider.log"
    fi
    if [[ $sc == 13 ]]; then
        body="{\"name\": \"chaos $ns\", \"stock\": $RUN_STOCK, \"starts_at\": \"$(date -u -d "+$WR_START_IN seconds" +%Y-%m-%dT%H:%M:%SZ)\", \"waiting_room\": {\"admit_per_sec\": $WR_ADMIT_PER_SEC, \"max_admitted_factor\": $WR_FACTOR}}"
    fi
    PRODUCT=$(admin POST /admin/products "$body" | json_field id)
    admin POST "/admin/products/$PRODUCT/preload" >/dev/null

    "$BIN/seckill-bench" load --quiet --json \
        --gateway "http://127.0.0.1:${GW_PORTS[0]}" --gateway "http://127.0.0.1:${GW_PORTS[1]}" \
        --product "$PRODUCT" --users "$RUN_USERS" --concurrency "$CONCURRENCY" "${rate_args[@]}" \
        --quantity "$([[ $sc == 13 ]] && echo 1 || echo "$QUANTITY")" \
        "${sale_args[@]}" --settle-timeout 60 --timeout 10 --sample-admin-ms "$SAMPLE_MS" \
        --history "$RUN_DIR/history.jsonl" >"$RUN_DIR/load.json" 2>"$RUN_DIR/load.log" &
    load_pid=$!
    if [[ $sc == 2 || $sc == 12 || $sc == 17 || $sc == 18 ]]; then
        FAULT_START=$(now_us) # the fault is the whole sale
    elif [[ $sc != 1 && $sc != 10 ]]; then
        if ! wait_ready_for_fault "$ready"; then
            if [[ $sc == 11 || $sc == 19 ]]; then
                run_error "worker 0 did not reach its crash point within 120 s: no fault injected"
            elif [[ $sc == 13 ]]; then
                run_error "gateway 0 handed out no admission token itself (or the admin view showed nobody admitted) within 120 s: no fault injected"
            else
                run_error "no reservation in flight after $RUN_FAULT_AFTER units sold within 120 s: no fault injected"
            fi
        else
            fault_at=$SECONDS
            case $sc in
                3) freeze_until_sold 10 w0 ;;
                4|5|6|7|8|9|14|15) freeze_until_sold 1 w0 w1 ;;
            esac
            if inject "$sc"; then
                write_fault_json "$sc" 1
            else
                run_error "the fault (${NAME[$sc]}) did not happen as designed"
                write_fault_json "$sc" 0
                restore_services
            fi
            thaw
            if wait_for -t 120 -m "every process healthy again" revived_and_healthy; then
                recovered="$((SECONDS - fault_at)) s"
            else
                run_error "not every gateway and worker was healthy again within 120 s of the fault"
            fi
        fi
    fi
    # Revive crashed processes while the load finishes, so the sale can finish.
    while kill -0 "$load_pid" 2>/dev/null; do revive; sleep 0.5; done
    wait "$load_pid" || run_error "the load exited non-zero (see $RUN_DIR/load.log)"
    if [[ $sc == 2 || $sc == 12 || $sc == 17 || $sc == 18 ]]; then
        FAULT_END=$(now_us)
        [[ $sc == 12 || $sc == 18 ]] && EVIDENCE+=("provider ${odds[*]}")
        if [[ $sc == 17 || $sc == 18 ]]; then
            local said
            if said=$(buyers_evidence "$sc"); then EVIDENCE+=("$said")
            else run_error "no payments summary in load.json"; fi
        fi
        write_fault_json "$sc" 1
    fi
    [[ $sc == 11 && -n $EXPIRY_VICTIM && -n $CANCELLED_AT_RESTART ]] && write_expiry_json
    revive
    # A still world: nothing settles underneath the audit.
    stop_services
    stop_provider
    scan_crashes
    scan_services "$services_at_start"

    if [[ $sc == 7 && -n $FAULT_START && -n $FAULT_END ]]; then
        local fitted
        fitted=$(fault_allowance) && [[ -n $fitted ]] ||
            run_error "could not fit scenario 7's allowance to its fault"
        # shellcheck disable=SC2206 # two flags and their values, no spaces inside
        allow_args+=($fitted)
    fi
    local audit_rc=0
    "$BIN/seckill-bench" audit --json --history "$RUN_DIR/history.jsonl" --product "$PRODUCT" \
        --namespace "$ns" --initial-stock "$RUN_STOCK" "${audit_args[@]}" "${allow_args[@]}" \
        >"$RUN_DIR/audit.json" 2>"$RUN_DIR/audit.log" || audit_rc=$?
    is_payment "$sc" && mysql_counts "$db"
    [[ $sc == 17 || $sc == 18 ]] && mysql_rows "$db" "$sc"
    ROWS+=("$(judge "$sc" "$speed" "$run" "$audit_rc" "$recovered" "$((SECONDS - started)) s")")
    echo "${ROWS[-1]}"
    local verdict
    verdict=$(cat "$RUN_DIR/verdict")
    plot_run "$sc" "$speed" "$run" "$verdict"
    if [[ $verdict != PASS ]]; then
        NOT_PASS=$((NOT_PASS + 1))
        warn "run $verdict: $RUN_DIR"
        sed 's/^/    | /' "$RUN_DIR/reasons.txt" >&2
    fi
    mysql_root -e "DROP DATABASE \`$db\`" || true
}

for ((run = 1; run <= RUNS; run++)); do
    for speed in $SPEEDS; do
        for sc in $SCENARIOS; do run_one "$sc" "$speed" "$run"; done
    done
done

HEADER="| scenario | speed | run | verdict | promises made | kept | failures by reason (10-12, 17, 18: and payments) | sold out (10-12, 17, 18: all paid) | fault hit the sale | crashes | settle p99 / max | checks | order rows | recovery | run took |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
TABLE=$(printf '%s\n' "$HEADER" "${ROWS[@]}")
echo
echo "$TABLE"
if [[ -n $REPORT ]]; then
    SETTINGS="Paced: stock $STOCK, $USERS users then fresh ones until sold out, $RATE req/s, fault once $FAULT_AFTER units are sold. Herd: stock $HERD_STOCK, $HERD_USERS users, unpaced, fault once $HERD_FAULT_AFTER units are sold. Concurrency $CONCURRENCY. Every fault waits for a reservation in flight, with the workers frozen (SIGSTOP) until 1 more unit is reserved (scenario 3: its victim alone, until 10 more) and thawed once the faulted process or service is seen gone, which is when the fault's window starts, so that orders are in flight when it lands (scenarios 6 and 15 wait until the sale is near its sell-out, which must come while ZooKeeper is down: 409 sold_out answered inside the window); a killed process is restarted $RESTART_AFTER s later. Allowed failures: scenario 2 \`chaos\`; scenario 7 \`expired\` and \`lost\`, a stand-in limitation (tansu keeps messages in memory, so a restart loses messages it acknowledged; Kafka with acks=all would not). \"Fault hit the sale\": reservations in flight when the fault started, and buys answered while it lasted. A crash fails the run; ERROR means the fault did not happen as designed. Scenarios 10-12: stock $PAY_STOCK at a price, a $PAY_WINDOW s payment window, $PAY_USERS users then fresh ones until every unit is paid (\`--until-all-paid\`; herd is $PAY_HERD_RATE req/s), $PAY_RATE of the buyers pay; a simulated provider declines 10 % of charges and decides 200 ms after each; in 12 also 20 % late (4 s, after the deadline) and 30 % of callbacks twice. Paid and cancelled (\`payment_timeout\`, \`buyer_cancelled\`) count as kept promises; the run passes only when every unit ends paid (the load saw it, and audit check 12 with \`--expect-all-paid\`). Scenario 11: worker 0 SIGKILLs itself (\`SECKILL_CHAOS_ABORT_AFTER_EXPIRY=1\`) right after the MySQL commit of payment-timeout cancels, before their units go back to Redis, proven by its exit status and those orders cancelled with \`restore_due\` set when it is seen gone; its \"fault hit the sale\" counts the cancellations before and after. Scenario 12 must show late and twice-sent callbacks and at least one \`refund_due\` payment. Scenario 13: a waiting room (stock $WR_STOCK, $WR_USERS buyers joining before the start through both gateways, $WR_ADMIT_PER_SEC admissions/s, factor $WR_FACTOR; \`load --waiting-room --until-sold-out\`); gateway 0 SIGKILLed once buyers are admitted, restarted $RESTART_AFTER s later; it passes when every unit is sold and audit checks 13-15 pass (every buyer held a valid admission, the cap held in every admin-view sample, no place admitted twice). Scenario 16, Redis comes back old: on one server a snapshot once the fault is due and a restart from it at three times as many units; on a cluster the product's replica cut off then, and failed over to (\`CLUSTER FAILOVER TAKEOVER\`) at three times as many; nothing may fail. Scenarios 17 and 18: the product, provider and end of 10 (every unit paid), with every buyer paying but these: 17, a cancel storm: $CANCEL_RATE of the buyers cancel from their \`202\` on (\`load --cancel-rate\`: \`POST /v1/orders/{ticket}/cancel\` every 20-50 ms while refused as pending, until 200 or a final refusal), so cancels land as their orders are confirmed; it needs cancels answered 200 and refused as pending first (else ERROR), and fails unless every \`buyer_cancelled\` order in MySQL has the load's 200 cancel in the history and the other way round. 18, a double pay: each payment attempt is two requests at once with two \`Idempotency-Key\`s, one per gateway (\`load --double-pay\`); it fails if MySQL's payments show one recorded while another of its ticket was unsettled (recorded by its \`202\` or by its settling less the provider's 200 ms delay: \`created_at_ms\` is stamped before the row lock) or a ticket has more than one \`succeeded\` or \`refund_due\` payment, and needs \`409 payment_in_progress\` answers (else ERROR). Scenario 19: worker 0 SIGKILLs itself (\`SECKILL_CHAOS_ABORT_AFTER_COMMIT\`, half the fault's units) right after a MySQL commit, before the Redis confirm; proven by its exit status, and its last batch in MySQL and still \`processing\` in Redis when it is seen gone; restarted $RESTART_AFTER s later; nothing may fail. Stock buckets: $BUCKETS$( ((BUCKETS > 1)) && echo " (scenario 13 keeps 1)" || true). Units per order: $QUANTITY$([[ $QUANTITY != 1 ]] && echo " (drawn per buyer; every product sells up to $MAX_PER_BUYER per buyer; the promise, kept and order-row cells give units too; scenario 13's buyers buy one)" || true). Redis: $REDIS_MODE$([[ $REDIS_MODE == cluster ]] && echo " (3 primaries, each with a replica; scenarios 8-9 restart every node; 14 SIGKILLs the product's primary, its replica takes over, the node rejoins $RESTART_AFTER s later)" || true). ZooKeeper: $ZK_MODE$([[ $ZK_MODE == ensemble ]] && echo " (three servers; 15 SIGKILLs the leader with 10 % of orders failing, and fails if a gateway loses its session)" || true)."
    # The timelines next to the report, under img/chaos/ (the previous run's are removed).
    IMG_DIR=$(dirname "$REPORT")/img/chaos
    mkdir -p "$IMG_DIR"
    rm -f "$IMG_DIR"/*.svg
    GALLERY=""
    for t in "${TIMELINES[@]}"; do
        IFS='|' read -r sc speed verdict svg <<<"$t"
        cp "$svg" "$IMG_DIR/$sc-$speed.svg"
        GALLERY+="**$sc ${NAME[$sc]}**, $(speed_text "$speed" "$sc"), run 1: $verdict"$'\n\n'
        GALLERY+="![scenario $sc, $speed: tickets accepted, confirmed, compensated and pending over time](img/chaos/$sc-$speed.svg)"$'\n\n'
    done
    python3 - "$REPORT" "$TABLE" "$RUNS" "$SCENARIOS" "$SPEEDS" "$SETTINGS" "$BUILD" "$GALLERY" <<'PY'
import sys, datetime, platform, os
path, table, runs, scenarios, speeds, settings, build, gallery = sys.argv[1:]
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
`scripts/chaos.sh --runs {runs} --scenarios "{scenarios}" --speeds "{speeds}"`, {build}.

{settings}

{table}
"""
if gallery:
    body += f"""
### Timelines

One per scenario and speed (its run 1), drawn by `seckill-bench plot chaos` from the run's folder.
Top: tickets so far: accepted (the `202`s the load tool received, wide pale line), confirmed, and
compensated (failed, the unit given back), and paid and cancelled in the payment scenarios; from the
admin view (`GET /admin/products/{{id}}`, Redis's counters) sampled every few hundred ms. Bottom:
reservations pending, and a cross at 0 for each look at the admin view that got no answer. The
shaded band is the fault, from its start to its end (a kill: until the restart; an outage: until the
service is started again; scenarios 2 and 12: the whole sale). Time runs from the load's start.

{gallery.rstrip()}
"""
open(path, "w").write(head + body)
PY
    log "wrote $REPORT"
fi
if ((NOT_PASS > 0)); then
    err "$NOT_PASS run(s) not PASS; see $OUT"
    exit 1
fi
log "every run passed"
