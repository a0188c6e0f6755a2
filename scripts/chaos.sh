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
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
for speed in $SPEEDS; do [[ $speed == paced || $speed == herd ]] || die "unknown speed $speed"; done
[[ ${REDIS_MODE:=single} =~ ^(single|cluster)$ ]] || die "--redis takes single or cluster"
[[ ${ZK_MODE:=single} =~ ^(single|ensemble)$ ]] || die "--zk takes single or ensemble"
[[ ${BUCKETS:=1} =~ ^([1-9]|[1-5][0-9]|6[0-4])$ ]] || die "--buckets takes 1 to 64"
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

# --------------------------------------------------------- processes ---
declare -A PIDS=()
start_gateway() { # index
    (cd "$RUN_DIR" && exec env SECKILL_HTTP_ADDR="127.0.0.1:${GW_PORTS[$1]}" "$BIN/gateway") >>"$RUN_DIR/gateway-$1.log" 2>&1 &
    PIDS[g$1]=$!
    wait_for -t 30 -m "gateway $1" curl -fsS "http://127.0.0.1:${GW_PORTS[$1]}/livez"
}
# Scenarios 11 and 19: worker 0 starts with a crash point, W0_ABORT (NAME=N), until it died.
W0_ABORT=""
start_worker() { # index
    local extra=()
    [[ $1 == 0 && -n $W0_ABORT ]] && extra=("$W0_ABORT")
    (cd "$RUN_DIR" && exec env SECKILL_WORKER_HTTP_ADDR="127.0.0.1:${WK_PORTS[$1]}" "${extra[@]}" "$BIN/worker") >>"$RUN_DIR/worker-$1.log" 2>&1 &
    PIDS[w$1]=$!
    wait_for -t 90 -m "worker $1" curl -fsS "http://127.0.0.1:${WK_PORTS[$1]}/livez"
}
label() { [[ ${1:0:1} == g ]] && echo "gateway ${1:1}" || echo "worker ${1:1}"; }
# exit_text STATUS: "exit 1" or "SIGSEGV".
exit_text() { if (($1 > 128)); then echo "SIG$(kill -l $(($1 - 128)))"; else echo "exit $1"; fi; }
# The services a run relies on, one "name=pid" line each ("gone" for none).
service_pids() {
    local port id
    if [[ $REDIS_MODE == cluster ]]; then
        for port in $(redis_cluster_ports); do
            echo "redis:$port=$(pid_running "$(redis_node_pid "$port")" redis-server || echo gone)"
        done
    else
        echo "redis=$(pid_running "$REDIS_PID" redis-server || echo gone)"
    fi
    echo "mysql=$(pid_running "$MYSQL_PID" "$MYSQL_CNF" || echo gone)"
    if [[ $ZK_MODE == ensemble ]]; then
        for id in $(zke_ids); do
            echo "zookeeper:$id=$(pid_running "$(zke_pid "$id")" "$(zke_cfg "$id")" || echo gone)"
        done
    else
        echo "zookeeper=$(pid_running "$ZK_PID" "$ZK_CFG" || echo gone)"
    fi
    echo "kafka=$(pid_running "$TANSU_PID" tansu || echo gone)"
}
# The service scenario $1 stops, kills or restarts on purpose.
faulted_service() {
    case $1 in
        5) echo mysql ;;
        6|15) echo zookeeper ;;
        7) echo kafka ;;
        8|9|14|16) echo redis ;;
        *) echo none ;;
    esac
}
# A service that went, or came back as another process, during a run whose scenario leaves it
# alone crashed (or someone restarted it): the run did not test what it says.
scan_services() { # the service_pids of the run's start
    local name pid after faulted now
    faulted=$(faulted_service "$SC")
    now=$(service_pids)
    while IFS='=' read -r name pid; do
        [[ ${name%%:*} == "$faulted" ]] && continue
        after=$(sed -n "s/^$name=//p" <<<"$now")
        [[ $pid == "$after" && $after != gone ]] ||
            crash "$name went or restarted during the run (pid $pid -> ${after:-?}), which scenario $SC does not do"
    done <<<"$1"
}
crash() { # text: one line in crashes.txt (and in the table); any line fails the run
    err "crash: $*"
    echo "$*" >>"$RUN_DIR/crashes.txt"
}
# died_text KEY STATUS: how a process died; in scenario 7 a worker's SIGSEGV names the known
# upstream crash (scan_crashes confirms it from the core's stack when gdb can read it).
died_text() {
    local text
    text=$(exit_text "$2")
    [[ $SC == 7 && ${1:0:1} == w && $text == SIGSEGV ]] && text+=", cf. $KNOWN_CRASH_7"
    echo "$text"
}
run_error() { # text: the run did not do what it should; any line makes it an ERROR
    err "$*"
    echo "$*" >>"$RUN_DIR/errors.txt"
}
# A process that died on its own is a crash. It is restarted, as a supervisor such as
# compose's restart policy would, so the sale can finish; the run fails all the same.
revive() {
    local key pid rc
    for key in g0 g1 w0 w1; do
        pid=${PIDS[$key]:-}
        if [[ -z $pid ]] || alive "$pid"; then continue; fi
        # Worker 0 of scenarios 11 and 19 dies at its crash point on purpose: inject takes it
        # from there.
        [[ $key == w0 && -n $W0_ABORT ]] && continue
        rc=0
        wait "$pid" 2>/dev/null || rc=$?
        log "$(label "$key") (pid $pid) died on its own at $(date -u +%T)"
        crash "$(label "$key") died on its own ($(died_text "$key" "$rc"))"
        if [[ ${key:0:1} == g ]]; then start_gateway "${key:1}"; else start_worker "${key:1}"; fi || true
    done
}
all_healthy() {
    local p
    for p in "${GW_PORTS[@]}" "${WK_PORTS[@]}"; do
        curl -fsS "http://127.0.0.1:$p/healthz" >/dev/null || return 1
    done
}
revived_and_healthy() { revive; all_healthy; }
# Stop every gateway and worker: SIGTERM, wait, and a crash for each one that had died
# already, did not stop within 60 s, or exited non-zero.
stop_services() {
    local key pid rc deadline=$((SECONDS + 60)) termed=()
    for key in "${!PIDS[@]}"; do
        pid=${PIDS[$key]}
        if alive "$pid"; then
            kill -TERM "$pid" 2>/dev/null && termed+=("$key") && continue
        fi
        rc=0
        wait "$pid" 2>/dev/null || rc=$?
        crash "$(label "$key") died on its own before the stop ($(died_text "$key" "$rc"))"
    done
    for key in "${termed[@]}"; do
        pid=${PIDS[$key]}
        while alive "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
        if alive "$pid"; then
            crash "$(label "$key") still running 60 s after SIGTERM (SIGKILLed)"
            kill -KILL "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            continue
        fi
        rc=0
        wait "$pid" 2>/dev/null || rc=$?
        ((rc == 0)) || crash "$(label "$key") did not exit 0 on SIGTERM ($(exit_text "$rc"))"
    done
    PIDS=()
}
# On any exit: no gateway, worker or provider left behind.
kill_all() {
    local p
    for p in "${PIDS[@]}" ${PROVIDER_PID:-}; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}" ${PROVIDER_PID:-}; do wait "$p" 2>/dev/null || true; done
    PIDS=() PROVIDER_PID=""
}
# The simulated payment provider of scenarios 10-12, one per run (args: its odds). It is a
# tool of the test, not part of the system: when it fails the run proves nothing (an ERROR).
PROVIDER_PID=""
start_provider() {
    check_port_free provider "$PROVIDER_PORT" || return 1
    (cd "$RUN_DIR" && exec "$BIN/seckill-bench" provider --listen "127.0.0.1:$PROVIDER_PORT" "$@") \
        >>"$RUN_DIR/provider.log" 2>&1 &
    PROVIDER_PID=$!
    wait_for -t 30 -m "the payment provider" curl -fsS "http://127.0.0.1:$PROVIDER_PORT/stats"
}
# Its counters to provider-stats.json, then SIGTERM and wait.
stop_provider() {
    local rc=0 deadline=$((SECONDS + 30))
    [[ -n $PROVIDER_PID ]] || return 0
    curl -fsS "http://127.0.0.1:$PROVIDER_PORT/stats" >"$RUN_DIR/provider-stats.json" ||
        run_error "the payment provider did not answer GET /stats at the end"
    if alive "$PROVIDER_PID"; then
        kill -TERM "$PROVIDER_PID" 2>/dev/null || true
        while alive "$PROVIDER_PID" && ((SECONDS < deadline)); do sleep 0.2; done
        if alive "$PROVIDER_PID"; then
            run_error "the payment provider still ran 30 s after SIGTERM (SIGKILLed)"
            kill -KILL "$PROVIDER_PID" 2>/dev/null || true
        fi
        wait "$PROVIDER_PID" 2>/dev/null || rc=$?
        ((rc == 0)) || run_error "the payment provider did not exit 0 on SIGTERM ($(exit_text "$rc"))"
    else
        wait "$PROVIDER_PID" 2>/dev/null || rc=$?
        run_error "the payment provider died during the run ($(exit_text "$rc"); see provider.log)"
    fi
    PROVIDER_PID=""
}
trap 'kill_all' EXIT
# Panics in the logs and core dumps in the run's folder. A core is read with gdb when there
# is one, to name a known upstream crash.
scan_crashes() {
    local f n core exe bt known
    for f in "$RUN_DIR"/gateway-*.log "$RUN_DIR"/worker-*.log; do
        [[ -f $f ]] || continue
        n=$(grep -c 'panicked at' "$f" || true)
        ((n == 0)) || crash "$n panic(s) in $(basename "$f"): $(grep -m1 -o 'panicked at .*' "$f" | cut -c1-100)"
    done
    for core in "$RUN_DIR"/core*; do
        [[ -f $core && $core != *.bt.txt ]] || continue
        exe=$(file -b "$core" 2>/dev/null | sed -n "s/.*execfn: '\([^']*\)'.*/\1/p")
        known=""
        if command -v gdb >/dev/null && [[ -x ${exe:-} ]]; then
            bt=$core.bt.txt
            timeout 120 gdb -batch -ex 'thread apply all bt' "$exe" "$core" >"$bt" 2>&1 || true
            grep -q rd_kafka_metadata_update_op "$bt" && known=", in rd_kafka_metadata_update_op: known upstream, $KNOWN_CRASH_7"
        fi
        crash "core dump $(basename "$core") of $(basename "${exe:-unknown}")$known"
    done
}

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

# ------------------------------------------------------------- faults ---
# Each fault sets FAULT_START and FAULT_END (µs since the epoch), adds evidence that it took
# effect to EVIDENCE, and returns 1 after a run_error when any step fails or has no effect.
# Every step checks its own status: inject runs with `set -e` off (it is called in `if`).
EVIDENCE=()
kill_process() { # key: SIGKILL one of ours, and make sure it is gone
    local key=$1 pid=${PIDS[$1]} rc=0
    alive "$pid" || { run_error "$(label "$key") (pid $pid) was not running when the fault came"; return 1; }
    fault_starts "$key"
    kill -KILL "$pid" || { run_error "kill -KILL $pid failed"; return 1; }
    wait "$pid" 2>/dev/null || rc=$?
    if alive "$pid" || ((rc != 137)); then
        run_error "$(label "$key") (pid $pid) survived SIGKILL (wait: $(exit_text "$rc"))"
        return 1
    fi
    seen_down
    EVIDENCE+=("$(label "$key") pid $pid gone ($(exit_text "$rc"))")
}
# Scenarios 6 and 15: the sold-out markers both gateways have set and dropped so far, "sets drops".
marker_moves() {
    local i body sets=0 drops=0
    for i in 0 1; do
        body=$(curl -fsS "http://127.0.0.1:${GW_PORTS[$i]}/metrics") || return 1
        sets=$((sets + $(awk '$1 == "seckill_gateway_sold_out_marker_sets_total" { n = $2 } END { print int(n) }' <<<"$body")))
        drops=$((drops + $(awk '$1 ~ /^seckill_gateway_sold_out_marker_drops_total/ { n += $2 } END { print int(n) }' <<<"$body")))
    done
    echo "$sets $drops"
}
# What the gateways did with their sold-out markers during a ZooKeeper fault (their own
# counters, from the fault's start to now). A gateway that is not watching ZooKeeper sets no
# marker (it could not hear a unit come back), so a sale that sells out while ZooKeeper is
# down shows 0 set; the judge needs that sell-out (409 sold_out answered inside the window).
markers_moved() { # the marker_moves of the fault's start
    local now s0 d0 s1 d1
    now=$(marker_moves) || { run_error "no gateway metrics after the fault"; return 1; }
    read -r s0 d0 <<<"$1"
    read -r s1 d1 <<<"$now"
    EVIDENCE+=("the gateways set $((s1 - s0)) and dropped $((d1 - d0)) sold-out markers during the fault")
}
# Scenarios 6 and 15: ready_for_fault, and at most NEAR_OUT units left in Redis, so that the
# sale sells out while ZooKeeper is down or without a leader.
near_sell_out() {
    local body
    body=$(admin GET "/admin/products/$PRODUCT" 2>/dev/null) || return 1
    [[ $body =~ \"stock_redis\":(-?[0-9]+) ]] || return 1
    ((BASH_REMATCH[1] <= NEAR_OUT)) || return 1
    [[ $body =~ \"pending\":([0-9]+) ]] && ((BASH_REMATCH[1] > 0))
}
# Orders gateway (index) has handed to Kafka whose delivery report has not come back.
gateway_awaiting() {
    metric_of "${GW_PORTS[$1]}" '^seckill_gateway_awaiting_kafka$'
}
# Scenario 4: SIGKILL gateway (index) while buys it reserved in Redis await Kafka's ack. The
# broker is frozen (SIGSTOP) until the gateway's own gauge shows one, at most 1.5 s (less than
# the 2 s delivery timeout, so none is given up on), the gateway killed, the broker thawed.
kill_awaiting_ack() {
    local i=$1 n=0 broker deadline rc=0
    broker=$(pid_running "$TANSU_PID" tansu) || { run_error "no broker of ours runs"; return 1; }
    kill -STOP "$broker" || { run_error "kill -STOP $broker failed"; return 1; }
    deadline=$(($(now_us) + 1500000))
    while (($(now_us) < deadline)); do
        n=$(gateway_awaiting "$i") || n=0
        ((n > 0)) && break
        sleep 0.02
    done
    if ((n == 0)); then
        kill -CONT "$broker"
        run_error "no buy of gateway $i awaited Kafka's ack within 1.5 s of freezing the broker"
        return 1
    fi
    kill_process "g$i" || rc=1
    kill -CONT "$broker" || { run_error "kill -CONT $broker failed"; rc=1; }
    EVIDENCE+=("gateway $i's own gauge: $n buys reserved in Redis and awaiting Kafka's ack (the broker frozen) as it was SIGKILLed")
    return "$rc"
}
service_down() { # name [when]: it must not answer now that it is stopped
    local what
    case $1 in
        mysql) what="select 1 (socket and TCP)"; if mysql_ping || mysql_tcp_ping; then what=""; fi ;;
        zookeeper) what="ruok"; if zk_ping; then what=""; fi ;;
        kafka) what="on its port"; if port_open "$KAFKA_PORT"; then what=""; fi ;;
        redis) what="PING"; if redis_ping; then what=""; fi ;;
        zk_ensemble) what="ruok on any server"
            local id
            for id in $(zke_ids); do zke_ping "$id" && what=""; done ;;
        redis_cluster) what="PING on any node"
            local port
            for port in $(redis_cluster_ports); do redis_node_ping "$port" && what=""; done ;;
    esac
    [[ -n $what ]] || { run_error "$1 still answers ${2:-after it was stopped}"; return 1; }
    EVIDENCE+=("$1 did not answer $what ${2:-after it was stopped}")
}
# MySQL and ZooKeeper go down at once (SIGKILL): a clean stop takes them about 1 s, in which
# they still serve and a herd sells out, and a crash is the harder fault. mysqld_safe goes
# first, or it would restart mariadbd.
crash_mysql() {
    local pid
    if pid=$(pid_running "$MYSQL_SAFE_PID" mysqld_safe); then
        kill -KILL "$pid" && wait_for -t 10 proc_gone "$pid" mysqld_safe || return 1
    fi
    pid=$(pid_running "$MYSQL_PID" "$MYSQL_CNF") || return 1
    kill -KILL "$pid" && wait_for -t 10 proc_gone "$pid" "$MYSQL_CNF" || return 1
    rm -f "$MYSQL_PID" "$MYSQL_SAFE_PID"
}
crash_zookeeper() {
    local pid
    pid=$(pid_running "$ZK_PID" "$ZK_CFG") || return 1
    kill -KILL "$pid" && wait_for -t 10 proc_gone "$pid" "$ZK_CFG" || return 1
    rm -f "$ZK_PID"
}
outage() { # name seconds: crash or stop it, check it is down, keep it down, start it
    local how=stop
    declare -F "crash_$1" >/dev/null && how=crash
    fault_starts
    "${how}_$1" || { run_error "${how}_$1 failed"; return 1; }
    service_down "$1" || return 1
    seen_down
    sleep "$2"
    service_down "$1" "$2 s later" || return 1
    "start_$1" || { run_error "start_$1 failed"; return 1; }
}
# After a fault that failed half-way: start whatever shared service is down (each start_* does
# nothing when its service answers), so the next runs, and everyone else, have it back.
restore_services() {
    start_redis || true
    [[ $REDIS_MODE == cluster ]] && { start_redis_cluster || true; }
    [[ $ZK_MODE == ensemble ]] && { start_zk_ensemble || true; }
    start_mysql || true
    start_zookeeper || true
    { start_kafka && ensure_kafka_topic "$SECKILL_KAFKA_TOPIC" "$KAFKA_PARTITIONS"; } || true
}
# Both workers hold partitions, and together every partition of the topic.
all_assigned() {
    local n=0 p got
    for p in "${WK_PORTS[@]}"; do
        got=$(curl -fsS "http://127.0.0.1:$p/healthz" |
            python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("assigned_partitions") or []))') || return 1
        ((got > 0)) || return 1
        n=$((n + got))
    done
    ((n == ${SECKILL_KAFKA_PARTITIONS:-8}))
}
inject() { # scenario
    local old new again
    case $1 in
        3) kill_process w0 || return 1
           sleep "$RESTART_AFTER"
           start_worker 0 || { run_error "worker 0 did not come back"; return 1; } ;;
        11) died_at_expiry || return 1
           CANCELLED_AT_KILL=$(db_cancelled) || { run_error "no admin view after the kill"; return 1; }
           W0_ABORT=""
           sleep "$RESTART_AFTER"
           start_worker "$EXPIRY_VICTIM" || { run_error "worker $EXPIRY_VICTIM did not come back"; return 1; }
           CANCELLED_AT_RESTART=$(db_cancelled) || { run_error "no admin view after the restart"; return 1; } ;;
        4) kill_awaiting_ack 0 || return 1
           sleep "$RESTART_AFTER"
           start_gateway 0 || { run_error "gateway 0 did not come back"; return 1; } ;;
        13) # Read again at the kill (the count only grows); the ready check's count stands
            # when this one read fails.
            if again=$(gateway_admitted 0); then G0_ADMITTED=$again; fi
           kill_process g0 || return 1
           EVIDENCE+=("gateway 0's own count: $G0_ADMITTED answers carrying an admission token when it was SIGKILLed")
           EVIDENCE+=("$ADMITTED_AT_KILL admitted, not bought, when gateway 0 was SIGKILLed")
           sleep "$RESTART_AFTER"
           start_gateway 0 || { run_error "gateway 0 did not come back"; return 1; } ;;
        5) outage mysql 10 || return 1 ;;
        6) old=$(marker_moves) || { run_error "no gateway metrics before the fault"; return 1; }
           if [[ $ZK_MODE == ensemble ]]; then outage zk_ensemble 10 || return 1
           else outage zookeeper 10 || return 1; fi
           markers_moved "$old" || return 1 ;;
        7) old=$(pid_running "$TANSU_PID" tansu) || { run_error "no broker of ours runs"; return 1; }
           # SIGKILL, not a stop: tansu's graceful stop serves on for some 5 s, which the
           # fault's window (from the broker seen gone) would not cover.
           fault_starts
           kill -KILL "$old" || { run_error "kill -KILL $old failed"; return 1; }
           wait_for -t 10 proc_gone "$old" tansu || { run_error "the broker (pid $old) survived SIGKILL"; return 1; }
           rm -f "$TANSU_PID"
           service_down kafka || return 1
           seen_down
           start_kafka || { run_error "start_kafka failed"; return 1; }
           new=$(pid_running "$TANSU_PID" tansu) || { run_error "the broker did not come back"; return 1; }
           [[ $new != "$old" ]] || { run_error "the broker's pid did not change ($old)"; return 1; }
           EVIDENCE+=("broker pid $old -> $new")
           # The clients may recreate the topic first (auto-create, with the broker's default
           # partition count): then it exists, and that is the state the sale goes on in.
           if ! ensure_kafka_topic "$SECKILL_KAFKA_TOPIC" "$KAFKA_PARTITIONS"; then
               local have
               have=$(kafka_topic_partitions "$SECKILL_KAFKA_TOPIC") && [[ -n $have ]] ||
                   { run_error "recreating topic $SECKILL_KAFKA_TOPIC failed"; return 1; }
               EVIDENCE+=("topic recreated by the clients with $have partitions")
           fi ;;
        8|9) if [[ $REDIS_MODE == cluster ]]; then
               restart_redis_cluster || return 1
           else
               old=$(redis_run_id) || { run_error "no Redis run_id before the fault"; return 1; }
               fault_starts
               stop_redis || { run_error "stop_redis failed"; return 1; }
               service_down redis || return 1
               seen_down
               # Down for a second, as a restart of a loaded server is: buys meet it.
               sleep 1
               start_redis || { run_error "start_redis failed"; return 1; }
               new=$(redis_run_id) || { run_error "no Redis run_id after the restart"; return 1; }
               [[ $new != "$old" ]] || { run_error "Redis run_id did not change ($old)"; return 1; }
               EVIDENCE+=("Redis run_id ${old:0:8} -> ${new:0:8}")
           fi
           # No reconcile call: gateways and workers find the lost product and rebuild it.
           # OPERATOR_RECONCILE=1 calls it once, for builds that cannot rebuild by themselves.
           if [[ ${OPERATOR_RECONCILE:-0} == 1 ]]; then
               wait_for -t 30 -m "reconcile" admin POST "/admin/products/$PRODUCT/reconcile" ||
                   { run_error "reconcile failed"; return 1; }
           fi ;;
        19) died_at_commit || return 1 ;;
        14) kill_redis_primary || return 1 ;;
        16) if [[ $REDIS_MODE == cluster ]]; then lag_redis_replica || return 1
            else rollback_redis || return 1; fi ;;
        15) old=$(marker_moves) || { run_error "no gateway metrics before the fault"; return 1; }
            kill_zk_leader || return 1
            markers_moved "$old" || return 1
            check_sessions_kept ;;
    esac
    FAULT_END=$(now_us)
}
# Worker 0 killed itself (SIGKILL) at a crash point: its exit status says so, and its last
# words, the first line of worker-0.log matching the pattern, go in LAST_WORDS.
died_at_crash_point() { # pattern
    local rc=0
    wait "${PIDS[w0]}" 2>/dev/null || rc=$?
    ((rc == 137)) || { run_error "worker 0 ended ($(exit_text "$rc")), not by its crash point's SIGKILL"; return 1; }
    LAST_WORDS=$(grep -m 1 "$1" "$RUN_DIR/worker-0.log") ||
        { run_error "worker 0 died without reaching its crash point (no last words in worker-0.log)"; return 1; }
}
# Scenario 19: worker 0 killed itself right after a MySQL commit, before its Redis confirm.
# Proven where it landed: its exit status, its last words (the batch's tickets and their Redis
# records), every one of those tickets in MySQL's orders, and some of their records still
# `processing` in Redis as the worker is found gone. Restarted $RESTART_AFTER s later.
died_at_commit() {
    local tickets records in_db processing=0 key status n
    died_at_crash_point '^chaos: killing this worker after the commit of' || return 1
    tickets=$(sed -n 's/.* tickets \([^ ]*\) records .*/\1/p' <<<"$LAST_WORDS")
    records=$(sed -n 's/.* records \([^ ]*\)$/\1/p' <<<"$LAST_WORDS")
    [[ -n $tickets && -n $records ]] || { run_error "worker 0's last words name no tickets: $LAST_WORDS"; return 1; }
    for key in ${records//,/ }; do
        status=$(redis_any HGET "$key" status) || { run_error "reading $key from Redis failed"; return 1; }
        [[ $status == processing ]] && processing=$((processing + 1))
    done
    in_db=$(mysql_root -N -B -e "SELECT COUNT(*) FROM \`$db\`.orders WHERE ticket IN ('${tickets//,/\',\'}')") ||
        { run_error "counting worker 0's last batch in MySQL failed"; return 1; }
    n=$(tr ',' '\n' <<<"$tickets" | wc -l)
    EVIDENCE+=("worker 0 SIGKILLed itself after committing $n orders: $in_db of them in MySQL, $processing still processing in Redis when it was found gone")
    ((in_db == n)) || { run_error "worker 0's last batch is not all in MySQL ($in_db of $n): it did not die after a commit"; return 1; }
    ((processing > 0)) || { run_error "none of worker 0's last batch was still processing in Redis: nothing was caught between commit and confirm"; return 1; }
    W0_ABORT=""
    sleep "$RESTART_AFTER"
    start_worker 0 || { run_error "worker 0 did not come back"; return 1; }
}
# Scenario 11: worker 0 killed itself right after the MySQL commit of payment-timeout cancels,
# before their units went back to Redis. Proven where it landed: its exit status, its last
# words (the cancelled tickets), and those orders cancelled in MySQL with `restore_due` still
# set as it is found gone (another worker finishes them 2 s later).
died_at_expiry() {
    local tickets n counts cancelled due
    died_at_crash_point '^chaos: killing this worker after the commit of .* payment-timeout cancels' || return 1
    tickets=$(sed -n 's/.* tickets \([^ ]*\)$/\1/p' <<<"$LAST_WORDS")
    [[ -n $tickets ]] || { run_error "worker 0's last words name no tickets: $LAST_WORDS"; return 1; }
    n=$(tr ',' '\n' <<<"$tickets" | wc -l)
    counts=$(mysql_root -N -B -e "SELECT SUM(status = 'cancelled'), SUM(restore_due = 1) FROM \`$db\`.orders WHERE ticket IN ('${tickets//,/\',\'}')") ||
        { run_error "reading worker 0's last cancels in MySQL failed"; return 1; }
    read -r cancelled due <<<"$counts"
    EXPIRY_VICTIM=0 EXPIRED_AT_KILL=$n
    EVIDENCE+=("worker 0 SIGKILLed itself after committing $n payment-timeout cancels: $cancelled of them cancelled in MySQL, $due with restore_due still set when it was found gone")
    ((cancelled == n)) || { run_error "worker 0's last cancels are not all in MySQL ($cancelled of $n): it did not die after a commit"; return 1; }
    ((due > 0)) || { run_error "none of worker 0's last cancels still had restore_due set: nothing was caught between the commit and the give-back"; return 1; }
}
# A command on the Redis that holds the key, on one server or a cluster.
redis_any() {
    if [[ $REDIS_MODE == cluster ]]; then
        redis-cli -c -p "$(redis_cluster_ports | head -n 1)" "$@"
    else
        redis-cli -p "$REDIS_PORT" "$@"
    fi
}
# Scenarios 8 and 9 on a cluster: every node restarted without its data (each keeps its
# nodes.conf, so the cluster forms again, empty).
node_run_id() { redis-cli -p "$1" INFO server 2>/dev/null | sed -n 's/^run_id:\([0-9a-f]*\).*/\1/p'; }
restart_redis_cluster() {
    local old new again
    old=$(node_run_id "$REDIS_CLUSTER_PORT")
    [[ -n $old ]] || { run_error "no run_id of node $REDIS_CLUSTER_PORT before the fault"; return 1; }
    fault_starts
    stop_redis_cluster || { run_error "stopping the cluster failed"; return 1; }
    service_down redis_cluster || return 1
    seen_down
    start_redis_cluster || { run_error "the cluster did not come back"; return 1; }
    new=$(node_run_id "$REDIS_CLUSTER_PORT")
    [[ -n $new && $new != "$old" ]] || { run_error "node $REDIS_CLUSTER_PORT's run_id did not change"; return 1; }
    EVIDENCE+=("every cluster node restarted empty; node $REDIS_CLUSTER_PORT run_id ${old:0:8} -> ${new:0:8}")
}
node_is_replica() { [[ $(redis-cli -p "$1" ROLE 2>/dev/null | head -n 1) == slave ]]; }
primary_moved() { local p; p=$(redis_cluster_primary_of "$1") && [[ -n $p && $p != "$2" ]]; }
# Scenario 14: SIGKILL the primary of the product's slot; its replica must take over; the
# killed node comes back RESTART_AFTER s later and must rejoin, as a replica.
kill_redis_primary() {
    local key="sk:{$SECKILL_NAMESPACE:$PRODUCT}:stock" port pid t0 new
    port=$(redis_cluster_primary_of "$key") && [[ -n $port ]] || { run_error "no primary holds $key"; return 1; }
    pid=$(pid_running "$(redis_node_pid "$port")" redis-server) || { run_error "the primary on $port is not ours"; return 1; }
    fault_starts
    kill -KILL "$pid" || { run_error "kill -KILL $pid failed"; return 1; }
    wait_for -t 10 proc_gone "$pid" redis-server || { run_error "primary $port (pid $pid) survived SIGKILL"; return 1; }
    seen_down
    EVIDENCE+=("primary 127.0.0.1:$port of the product's slot (pid $pid) SIGKILLed")
    t0=$(now_us)
    wait_for -t 30 primary_moved "$key" "$port" || { run_error "no replica took over within 30 s"; return 1; }
    new=$(redis_cluster_primary_of "$key")
    EVIDENCE+=("replica 127.0.0.1:$new took over after $((($(now_us) - t0) / 1000)) ms")
    sleep "$RESTART_AFTER"
    start_redis_node "$port" || { run_error "node $port did not come back"; return 1; }
    wait_for -t 60 redis_cluster_ok || { run_error "the cluster was not ok again within 60 s"; return 1; }
    # It may still say master (its old nodes.conf) until the cluster's update reaches it.
    wait_for -t 10 node_is_replica "$port" || { run_error "node $port did not rejoin as a replica"; return 1; }
    EVIDENCE+=("127.0.0.1:$port back as a replica of $new")
}
# Scenario 16, one server: a snapshot now; at three times as many units sold, a restart from it.
rollback_redis() {
    local old new dump=$REDIS_DIR/dump.rdb key="sk:{$SECKILL_NAMESPACE:$PRODUCT}:stock" before after
    rm -f "$dump"
    [[ $(redis-cli -p "$REDIS_PORT" SAVE) == OK ]] || { run_error "SAVE failed"; return 1; }
    units_sold || { run_error "no admin view at the snapshot"; return 1; }
    EVIDENCE+=("snapshot (SAVE) with $SOLD units sold")
    # Polled every 50 ms (wait_for's 0.5 s is a third of a herd): the fault must find it selling.
    local deadline=$((SECONDS + 120))
    until sold_past $((3 * RUN_FAULT_AFTER)); do
        ((SECONDS < deadline)) ||
            { rm -f "$dump"; run_error "the sale did not reach $((3 * RUN_FAULT_AFTER)) units"; return 1; }
        sleep 0.05
    done
    freeze_until_sold -o 1 w0 w1 || { rm -f "$dump"; return 1; }
    before=$(redis-cli -p "$REDIS_PORT" GET "$key")
    old=$(redis_run_id) || { rm -f "$dump"; run_error "no Redis run_id before the fault"; return 1; }
    fault_starts
    stop_redis || { rm -f "$dump"; run_error "stop_redis failed"; return 1; }
    service_down redis || { rm -f "$dump"; return 1; }
    seen_down
    sleep 1
    start_redis || { rm -f "$dump"; run_error "start_redis failed"; return 1; }
    # Later restarts (scenarios 8, 9) start empty again.
    rm -f "$dump"
    new=$(redis_run_id) || { run_error "no Redis run_id after the restart"; return 1; }
    [[ $new != "$old" ]] || { run_error "Redis run_id did not change ($old)"; return 1; }
    after=$(redis-cli -p "$REDIS_PORT" GET "$key")
    # Old, not empty: the stock key is back, higher than it was (unless a buy already found it
    # old and dropped it).
    [[ -n $after || -n $(redis-cli -p "$REDIS_PORT" --scan --pattern "sk:{$SECKILL_NAMESPACE:$PRODUCT}:*" | head -n 1) ]] ||
        { run_error "Redis came back empty, not old"; return 1; }
    EVIDENCE+=("Redis run_id ${old:0:8} -> ${new:0:8}, restarted from the snapshot: stock ${before:-none} -> ${after:-dropped}")
}
# The replica of the primary on port $1, if one is attached.
replica_of() {
    local port
    for port in $(redis_cluster_ports); do
        [[ $port == "$1" ]] && continue
        redis-cli -p "$port" ROLE 2>/dev/null | tr -d '\r' | sed -n '1p;3p' | paste -sd' ' |
            grep -qx "slave $1" && { echo "$port"; return 0; }
    done
    return 1
}
# Scenario 16, cluster: the product's replica is cut off now (it cannot authenticate to its
# primary, and its link is dropped); at three times as many units sold, it takes over with
# what it had, and the old primary becomes its replica.
lag_redis_replica() {
    local key="sk:{$SECKILL_NAMESPACE:$PRODUCT}:stock" primary replica old new lag
    primary=$(redis_cluster_primary_of "$key") && [[ -n $primary ]] || { run_error "no primary holds $key"; return 1; }
    replica=$(replica_of "$primary") || { run_error "primary $primary has no replica"; return 1; }
    redis-cli -p "$replica" CONFIG SET masterauth "chaos-wrong-password" >/dev/null
    redis-cli -p "$primary" CLIENT KILL TYPE replica >/dev/null
    units_sold || { run_error "no admin view at the cut"; return 1; }
    EVIDENCE+=("replica 127.0.0.1:$replica of $primary cut off with $SOLD units sold")
    if ! wait_for -t 120 -m "$((3 * RUN_FAULT_AFTER)) units sold" sold_past $((3 * RUN_FAULT_AFTER)); then
        redis-cli -p "$replica" CONFIG SET masterauth "" >/dev/null
        run_error "the sale did not reach $((3 * RUN_FAULT_AFTER)) units"
        return 1
    fi
    freeze_until_sold -o 1 w0 w1 || { redis-cli -p "$replica" CONFIG SET masterauth "" >/dev/null; return 1; }
    lag=$(( $(redis-cli -p "$primary" INFO replication | sed -n 's/^master_repl_offset:\([0-9]*\).*/\1/p') -
            $(redis-cli -p "$replica" INFO replication | sed -n 's/^slave_repl_offset:\([0-9]*\).*/\1/p') ))
    old=$(node_run_id "$primary")
    fault_starts
    # The takeover may take seconds: the workers go on meanwhile.
    thaw
    redis-cli -p "$replica" CONFIG SET masterauth "" >/dev/null
    [[ $(redis-cli -p "$replica" CLUSTER FAILOVER TAKEOVER) == OK ]] || { run_error "CLUSTER FAILOVER TAKEOVER refused"; return 1; }
    wait_for -t 30 primary_moved "$key" "$primary" || { run_error "the replica did not take over within 30 s"; return 1; }
    seen_down
    new=$(node_run_id "$replica")
    ((lag > 0)) || { run_error "the replica was not behind (lag $lag bytes)"; return 1; }
    EVIDENCE+=("replica 127.0.0.1:$replica ($lag bytes behind) took over from $primary (run ${old:0:8} -> ${new:0:8})")
    wait_for -t 60 redis_cluster_ok || { run_error "the cluster was not ok again within 60 s"; return 1; }
    wait_for -t 30 node_is_replica "$primary" || { run_error "node $primary did not become a replica"; return 1; }
}
new_zk_leader() { local l; l=$(zke_leader) && [[ $l != "$1" ]]; }
# The ensemble's leader, asked again for up to 10 s: one `srvr` that times out on a busy
# machine (nc -w 2) is no proof of an ensemble without a leader (2 of 5 paced runs were ERROR).
zke_leader_polled() {
    local i
    for ((i = 0; i < 20; i++)); do
        zke_leader && return 0
        sleep 0.5
    done
    return 1
}
# Scenario 15: SIGKILL the ensemble's leader; the others elect a new one; the killed server
# comes back RESTART_AFTER s later, as a follower.
kill_zk_leader() {
    local leader pid t0 new
    leader=$(zke_leader_polled) || { run_error "the ensemble has no leader"; return 1; }
    pid=$(pid_running "$(zke_pid "$leader")" "$(zke_cfg "$leader")") || { run_error "zookeeper-$leader is not ours"; return 1; }
    fault_starts
    kill -KILL "$pid" || { run_error "kill -KILL $pid failed"; return 1; }
    wait_for -t 10 proc_gone "$pid" "$(zke_cfg "$leader")" || { run_error "zookeeper-$leader survived SIGKILL"; return 1; }
    seen_down
    EVIDENCE+=("leader zookeeper-$leader (pid $pid) SIGKILLed")
    t0=$(now_us)
    wait_for -t 30 new_zk_leader "$leader" || { run_error "no new leader within 30 s"; return 1; }
    new=$(zke_leader_polled) || new="?"
    EVIDENCE+=("zookeeper-$new elected leader after $((($(now_us) - t0) / 1000)) ms")
    sleep "$RESTART_AFTER"
    start_zk_server "$leader" || { run_error "zookeeper-$leader did not come back"; return 1; }
    wait_for -t 60 zke_ok || { run_error "the ensemble was not whole again within 60 s"; return 1; }
    EVIDENCE+=("zookeeper-$leader back as $(zke_mode "$leader")")
}
# Scenario 15: each gateway must keep its one ZooKeeper session through the election (it may
# reconnect to another server); a second session means it lost the first, and with it its
# watch: a crash line fails the run. Read from the gateway's log (zookeeper-client's INFO).
check_sessions_kept() {
    local i sessions connects log
    for i in 0 1; do
        log=$RUN_DIR/gateway-$i.log
        sessions=$(grep -c 'new session established' "$log") || true
        connects=$(grep -c 'succeeds to establish session' "$log") || true
        EVIDENCE+=("gateway $i: $sessions ZooKeeper session(s), $connects connection(s)")
        ((sessions == 1)) || crash "gateway $i had $sessions ZooKeeper sessions: it lost one in the leader election"
    done
}
# Scenario 7's allowance, fitted to its fault: a message the broker lost at its restart is
# one it had taken while the workers were frozen or just before, so only tickets reserved from
# a second before the freeze (or the fault) to the fault's end may end `expired` or `lost`,
# and no more of them than were in flight (reserved, not yet settled) when it started, or
# reserved in the second after (the broker stops a few ms after the start; a message it took
# meanwhile is lost too).
fault_allowance() {
    python3 - "$RUN_DIR/history.jsonl" "${FREEZE_START:-$FAULT_START}" "$FAULT_START" "$FAULT_END" <<'PY'
import json, sys
path, freeze, start, end = sys.argv[1], *map(int, sys.argv[2:])
in_flight = set()
for line in open(path):
    o = json.loads(line)
    if o.get("kind") == "request" and o.get("status") == 202 and o.get("ticket") \
            and o["sent_at_us"] <= start < o["recv_at_us"]:
        in_flight.add(o["ticket"])
    elif o.get("kind") == "settled":
        t = o.get("reserved_at_ms")
        t = t * 1000 if t is not None else o.get("answered_at_us")
        c = o.get("confirmed_at_ms")
        done = o.get("status") in ("confirmed", "paid", "cancelled") and c is not None and c * 1000 <= start
        if t is not None and t <= start + 1_000_000 and not done:
            in_flight.add(o["ticket"])
print(f"--allow-window {freeze // 1000 - 1000}..{end // 1000} --allow-at-most {len(in_flight)}")
PY
}
write_fault_json() { # scenario verified
    python3 - "$RUN_DIR/fault.json" "$1" "${NAME[$1]}" "${FAULT_START:-}" "${FAULT_END:-}" "$2" "${FAULT_ISSUED:-}" "${EVIDENCE[@]}" <<'PY'
import json, sys
path, sc, name, start, end, verified, issued, *evidence = sys.argv[1:]
num = lambda s: int(s) if s else None
json.dump({"scenario": int(sc), "name": name, "start_us": num(start), "end_us": num(end),
           "issued_us": num(issued) or num(start),
           "verified": verified == "1", "evidence": evidence}, open(path, "w"), indent=1)
PY
}

# ------------------------------------------------------------ verdict ---
# judge scenario speed run audit_status recovery took: prints the run's table row, writes
# its verdict (PASS, FAIL, ERROR or FAIL+ERROR) to verdict, the reasons to reasons.txt and
# how the fault met the sale to overlap.json, all in $RUN_DIR.
judge() {
    GW0_URL="http://127.0.0.1:${GW_PORTS[0]}" \
        python3 - "$RUN_DIR" "$1" "${NAME[$1]}" "$2" "$RATE" "$3" "$4" "$5" "$6" "${ALLOW[$1]:-}" "$PAY_HERD_RATE" <<'PY'
import json, os, sys
d, sc, name, speed, rate, run, audit_rc, recovered, took, allowed, pay_herd_rate = sys.argv[1:]
sc, allowed = int(sc), set(allowed.split())
payment = sc in (10, 11, 12, 17, 18)
room = sc == 13
at = lambda f: os.path.join(d, f)
def lines(f):
    return [l.strip() for l in open(at(f))] if os.path.exists(at(f)) else []
def load_json(f):
    try:
        return json.load(open(at(f)))
    except (OSError, ValueError):
        return None
# A promise is kept when its buyer got the unit: confirmed, then maybe paid, or cancelled (not
# paid in time, or by the buyer: the unit went back on sale); or failed for an allowed reason.
KEPT_CANCELS = {"payment_timeout", "buyer_cancelled"}
def kept_outcome(k):
    return (k in ("confirmed", "paid") or (k.startswith("cancelled:") and k[10:] in KEPT_CANCELS)
            or (k.startswith("failed:") and k[7:] in allowed))
crashes = [l for l in lines("crashes.txt") if l]
fails = ["crash: " + c for c in crashes]
errors = [l for l in lines("errors.txt") if l]

# `buyer_cancelled` counts as a kept promise only where the load cancels (scenario 17, which
# matches each such order to a cancel the load logged). Anywhere else no buyer cancelled, so
# such an order is a cancel nobody asked for.
if sc != 17:
    a = load_json("audit.json") or {}
    n = ((a.get("promises") or {}).get("outcomes") or {}).get("cancelled:buyer_cancelled", 0)
    if n:
        fails.append(f"{n} orders cancelled as buyer_cancelled, in a run whose load cancels none")

# Every answer is judged. A run whose fault leaves every service up (1, 10 none; 2, 12, 17,
# 18 the orders, the provider or the buyers) has no 5xx and no request without a readable
# answer; any other has none outside its fault, from its issue to RECOVERY_S after its end.
RECOVERY_S = 10
fault_file = load_json("fault.json") or {}
window = None
if sc not in (1, 2, 10, 12, 17, 18):
    lo, hi = fault_file.get("issued_us") or fault_file.get("start_us"), fault_file.get("end_us")
    window = (lo, hi + RECOVERY_S * 1_000_000) if lo and hi else None
five, cut, first_out = 0, 0, None
for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
    if '"kind":"request"' not in line:
        continue
    o = json.loads(line)
    bad = o.get("status") is None or o.get("error") or o["status"] >= 500
    if not bad or (window and window[0] <= o["recv_at_us"] <= window[1]):
        continue
    if o.get("status") is None or o.get("error"):
        cut += 1
    else:
        five += 1
    first_out = first_out or o["recv_at_us"]
if (five or cut) and window is None and sc in (1, 2, 10, 12, 17, 18):
    fails.append(f"{five} answers 5xx and {cut} requests without a readable answer, in a run whose fault leaves every service up")
elif five or cut:
    where = (f"outside the fault's window and {RECOVERY_S} s of recovery (first at "
             f"{(first_out - window[1]) / 1e6:+.1f} s from its end)") if window else "with no fault window to excuse them"
    fails.append(f"{five} answers 5xx and {cut} requests without a readable answer {where}")

# A 409 sold_out is allowed only while no unit is free. The admin samples bracket each 409:
# the last one read before it was sent and the first one read after it was answered. When
# both show units in Redis and in MySQL, the later no more in Redis than the earlier, and no
# unit came back between them (failed and cancelled unchanged), the stores had free units the
# whole time it was refused.
samples = sorted((x for x in (load_json("load.json") or {}).get("admin_samples") or []
                  if x.get("view") and x.get("answered_ms") is not None), key=lambda x: x["at_ms"])
wrong_409, judged_409 = [], 0
if samples:
    import bisect
    answered_at = [x["answered_ms"] for x in samples]
    read_from = [x["at_ms"] for x in samples]
    for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
        if '"status":409' not in line:
            continue
        o = json.loads(line)
        if o.get("kind") != "request":
            continue
        sent, recv = o["sent_at_us"] // 1000, o["recv_at_us"] // 1000
        i = bisect.bisect_right(answered_at, sent) - 1
        j = bisect.bisect_left(read_from, recv)
        if i < 0 or j >= len(samples):
            continue
        judged_409 += 1
        a, b = samples[i]["view"], samples[j]["view"]
        if min(a.get("stock_redis") or 0, a.get("stock_db") or 0) > 0 \
                and min(b.get("stock_redis") or 0, b.get("stock_db") or 0) > 0 \
                and b["stock_redis"] <= a["stock_redis"] \
                and (b.get("failed"), b.get("cancelled")) == (a.get("failed"), a.get("cancelled")):
            wrong_409.append(f"user {o.get('user_id')} at {recv} ms: Redis had {a['stock_redis']} then {b['stock_redis']} units")
if wrong_409:
    fails.append(f"{len(wrong_409)} of {judged_409} buys answered 409 sold_out while Redis had free units all along, e.g. {wrong_409[:2]}")

# The audit: anything missing or unreadable fails the run.
try:
    a = json.load(open(at("audit.json")))
    ok, checks, rows, sold = a["ok"], a["checks"], a["order_rows"], a["sold_out_reached"]
    made, kept, outcomes = a["promises"]["made"], a["promises"]["kept"], a["promises"]["outcomes"]
    settle = a["settle_ms"]
    status = {str(c["id"]): c["status"] for c in checks}
    if ok is not True or audit_rc != "0":
        fails.append(f"audit: ok={ok}, exit status {audit_rc}")
    if any(v not in ("PASS", "SKIP") for v in status.values()):
        fails.append("audit checks: " + ", ".join(f"{k} {v}" for k, v in status.items() if v not in ("PASS", "SKIP")))
    if payment:
        # The sale's end is every unit paid: the load saw it, and the audit's check 12 agrees.
        load = load_json("load.json") or {}
        reached, reached_s = load.get("all_paid_reached"), (load.get("all_paid") or {}).get("reached_s")
        if reached is not True:
            fails.append(f"all paid reached (load.json): {reached}")
        if status.get("12") != "PASS":
            fails.append(f"every unit paid (audit check 12): {status.get('12', 'not run')}")
        sold = reached is True and status.get("12") == "PASS"
    elif sold is not True:
        fails.append(f"sold out reached: {sold}")
    if room:
        # Every unit sold, and the waiting-room checks ran and passed (not skipped).
        if rows != a.get("initial_stock"):
            fails.append(f"order rows {rows}, not the stock {a.get('initial_stock')}: not every unit sold")
        for c in ("13", "14", "15"):
            if status.get(c) != "PASS":
                fails.append(f"waiting-room check {c}: {status.get(c, 'not run')}")
    # The audit's word is checked against its own figures.
    broken = {k: v for k, v in outcomes.items() if v and not kept_outcome(k)}
    if kept != made or broken:
        fails.append(f"promises: {kept} of {made} kept; broken: {broken}")
    paid_or_cancelled = lambda k: k == "paid" or (k.startswith("cancelled:") and k[10:] in KEPT_CANCELS)
    by_reason = ", ".join(f"{k.removeprefix('failed:')} {v}" + (" (allowed)" if k.removeprefix("failed:") in allowed else "")
                          for k, v in sorted(outcomes.items())
                          if k != "confirmed" and not paid_or_cancelled(k) and v) or "none"
    if payment:
        cancels = ", ".join(f"{k[10:]} {v}" for k, v in sorted(outcomes.items()) if v and paid_or_cancelled(k) and k != "paid")
        by_reason += f"; {outcomes.get('paid', 0)} paid, {outcomes.get('confirmed', 0)} confirmed" + (f", cancelled: {cancels}" if cancels else "")
    bad = [k for k in status if status[k] == "FAIL"]
    skip = [k for k in status if status[k] == "SKIP"]
    checks_cell = "; ".join(filter(None, [bad and "fail " + ", ".join(bad), skip and "skip " + ", ".join(skip)])) or "all pass"
    settle_cell = f"{settle['p99']:.0f} / {settle['max']:.0f} ms" if settle else "–"
    sold_cell = {True: "yes", False: "**no**"}.get(sold, "?")
    if payment:
        sold_cell = f"all paid at {reached_s:.1f} s" if sold and reached_s is not None else "**no**" if not sold else "all paid"
except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
    fails.append(f"audit: no usable audit.json (exit status {audit_rc}; {type(e).__name__}: {e})")
    made = kept = rows = "?"
    outcomes, by_reason, checks_cell, settle_cell, sold_cell = {}, "?", "?", "?", "?"

# The fault: it must have happened as designed and hit the sale.
fault = json.load(open(at("fault.json"))) if os.path.exists(at("fault.json")) else None
overlap = "no fault"
if sc == 2:
    overlap = "whole sale"
    if not outcomes.get("failed:chaos"):
        errors.append("the fail rate failed no order: the fault had no effect")
elif sc == 12:
    # The provider's counters and MySQL's payments show the callbacks came late and twice, and
    # that late successes were turned into refunds.
    stats = load_json("provider-stats.json") or {}
    counts = {}
    for l in lines("mysql-counts.tsv"):
        if l.count("\t") == 2:
            kind, state, n = l.split("\t")
            counts[(kind, state)] = int(n)
    late = stats.get("late", 0)
    decided = stats.get("succeeded", 0) + stats.get("declined", 0)
    twice = stats.get("callbacks_sent", 0) - decided
    refund_due = counts.get(("payment", "refund_due"), 0)
    overlap = (f"whole sale: {stats.get('charges', '?')} charges, {late} late, {twice} callbacks twice, "
               f"{refund_due} refund_due")
    if not stats:
        errors.append("no provider stats: the fault cannot be shown")
    if not late:
        errors.append("the provider planned no late callback: the fault had no effect")
    if twice <= 0:
        errors.append(f"no callback was delivered twice ({stats.get('callbacks_sent')} delivered, {decided} charges decided)")
    if not refund_due:
        errors.append("no payment ended refund_due: no late success reached a gateway")
elif sc == 17:
    # The fault is the buyers' cancels: they went through (200), many first refused as pending
    # (the order not confirmed yet, so the cancel raced its confirmation), and every order
    # MySQL says its buyer cancelled is one the load cancelled, and the other way round.
    c = ((load_json("load.json") or {}).get("payments") or {}).get("cancels") or {}
    ok200 = {}  # ticket -> reason, of each 200
    for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
        o = json.loads(line)
        if o.get("kind") == "cancel" and o.get("status") == 200:
            ok200[o["ticket"]] = o.get("reason")
    orders = {}
    for l in lines("orders.tsv"):
        if l.count("\t") == 2:
            ticket, state, reason = l.split("\t")
            orders[ticket] = (state, reason)
    by_buyer = {t for t, v in orders.items() if v == ("cancelled", "buyer_cancelled")}
    unexplained = sorted(by_buyer - ok200.keys())
    not_in_db = sorted(t for t, r in ok200.items() if r == "buyer_cancelled" and t not in by_buyer)
    # A cancel is idempotent: one that finds the order already cancelled by the expiry (its
    # window closed first) answers 200 with that order, reason payment_timeout, as MySQL has it.
    expired_first = sorted(t for t, r in ok200.items()
                           if r == "payment_timeout" and orders.get(t) == ("cancelled", "payment_timeout"))
    other_200 = sorted(t for t, r in ok200.items()
                       if r != "buyer_cancelled" and t not in expired_first)
    refused = c.get("refused") or {}
    pending = refused.get("pending", 0)
    others = ", ".join(f"{n} {k}" for k, n in sorted(refused.items()) if k != "pending")
    ended = c.get("ended") or {}
    overlap = (f"whole sale: {c.get('buyers_cancelling', '?')} buyers cancelling, "
               f"{c.get('requests', '?')} cancels: {c.get('cancelled', '?')} × 200 "
               f"({ended.get('cancelled_after_pending', '?')} after a pending refusal), "
               f"{pending} × 409 pending" + (f", 409 {others}" if others else "") +
               f", {ended.get('gave_up', '?')} gave up; {len(by_buyer)} buyer_cancelled orders, "
               f"{len(by_buyer) - len(unexplained)} explained" +
               (f"; {len(expired_first)} found their order cancelled by its deadline first"
                if expired_first else ""))
    if not orders:
        errors.append("no orders read from MySQL (orders.tsv): the cancels cannot be explained")
    if not c.get("cancelled"):
        errors.append("no cancel was answered 200: the storm did not happen")
    if not pending:
        errors.append("no cancel was refused as pending: none raced its order's confirmation")
    if len(ok200) != c.get("cancelled"):
        errors.append(f"{len(ok200)} tickets with a 200 cancel in the history, {c.get('cancelled')} in load.json")
    if unexplained:
        fails.append(f"{len(unexplained)} buyer_cancelled orders no cancel of the load explains, e.g. {unexplained[:3]}")
    if not_in_db:
        fails.append(f"{len(not_in_db)} cancels answered 200 whose order MySQL does not have cancelled by its buyer, e.g. {not_in_db[:3]}")
    if other_200:
        fails.append(f"{len(other_200)} cancels answered 200 without reason buyer_cancelled (nor a payment_timeout MySQL agrees with), e.g. {other_200[:3]}")
elif sc == 18:
    # The fault is the buyers' double pays: two keys at once, one of them refused while the
    # other is in progress. MySQL's payments must show no two attempts of one ticket recorded
    # and unsettled at once, and at most one success per ticket.
    p = (load_json("load.json") or {}).get("payments") or {}
    dp = p.get("double_pay") or {}
    in_progress = (p.get("refused") or {}).get("payment_in_progress", 0)
    stats = load_json("provider-stats.json") or {}
    # created_at_ms is the gateway's clock when the request came, before it waited for the
    # order's row lock, so it is a lower bound of when the row was recorded. An upper bound:
    # the 202 that answered it (the load's clock, the same machine), and its decision, at
    # least the provider's fixed delay before the callback settled it (no late callbacks).
    evidence = (fault or {}).get("evidence") or []
    delay = next((int(w.split()[1]) for e in evidence for w in e.split(" --")
                  if w.startswith("delay-ms ")), None)
    answered = {}
    for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
        if '"kind":"pay"' in line:
            o = json.loads(line)
            if o.get("status") == 202 and o.get("payment_id"):
                answered[o["payment_id"]] = min(o["at_ms"], answered.get(o["payment_id"], o["at_ms"]))
    inf = float("inf")
    by = {}
    for l in lines("payments.tsv"):
        if l.count("\t") == 4:
            ticket, pid, state, created, settled = l.split("\t")
            settled = inf if settled == "-" else int(settled)
            latest = min(answered.get(pid, inf), settled - delay if delay is not None else inf)
            by.setdefault(ticket, []).append((int(created), settled, state, pid, latest))
    n_payments = sum(map(len, by.values()))
    unsent = sum(1 for ps in by.values() for x in ps if x[2] == "unsent")
    overlapping, apparent, twice = [], 0, []
    for ticket, ps in sorted(by.items()):
        sent = sorted(x for x in ps if x[2] != "unsent")
        for i, x in enumerate(sent):
            for y in sent[i + 1:]:
                if y[0] < x[1] and x[0] < y[1]:
                    # [created_at_ms, settled_at_ms) overlap; recorded while the other was
                    # unsettled for sure when its latest recording time says so.
                    if y[4] < x[1] and x[4] < y[1]:
                        overlapping.append(f"{ticket}: {x[3]} [{x[0]}, {x[1]}) and {y[3]} recorded by {y[4]}")
                    else:
                        apparent += 1
        if sum(1 for x in ps if x[2] in ("succeeded", "refund_due")) > 1:
            twice.append(ticket)
    overlap = (f"whole sale: {dp.get('pairs', '?')} pairs of keys at once, {in_progress} × 409 "
               f"payment_in_progress, {dp.get('both_accepted', '?')} pairs both 202; MySQL: {n_payments} "
               f"payments of {len(by)} tickets ({unsent} unsent), {len(overlapping)} recorded while "
               f"another was unsettled ({apparent} more overlap by created_at_ms alone, recorded maybe "
               f"after the other settled), {len(twice)} tickets with two successes; provider: "
               f"{stats.get('charges', '?')} charges")
    if not by:
        errors.append("no payments read from MySQL (payments.tsv)")
    if delay is None:
        errors.append("the provider's delay is not in fault.json: overlaps cannot be told")
    if not dp.get("pairs"):
        errors.append("the load paid no pair of keys at once")
    if not in_progress:
        errors.append("no 409 payment_in_progress: no pair met the first payment in progress, the run proves nothing")
    if overlapping:
        fails.append(f"{len(overlapping)} times a payment was recorded while another of its ticket was unsettled, e.g. {overlapping[:2]}")
    if twice:
        fails.append(f"{len(twice)} tickets with more than one succeeded or refund_due payment, e.g. {twice[:3]}")
elif sc not in (1, 10):
    if not fault or not fault["verified"] or not fault["start_us"] or not fault["end_us"]:
        overlap = "**not injected**" if not fault else "**not verified**"
        errors.append("the fault was not injected and verified")
    else:
        start, end = fault["start_us"], fault["end_us"]
        in_flight, buying, inside, answered = set(), 0, 0, 0
        seen = {}  # what the buyers were answered while the fault lasted, by status
        for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
            o = json.loads(line)
            if o.get("kind") == "request":
                if o["sent_at_us"] <= start < o["recv_at_us"]:
                    buying += 1
                    if o.get("status") == 202 and o.get("ticket"):
                        in_flight.add(o["ticket"])
                if o.get("status") is not None and start <= o["recv_at_us"] <= end:
                    answered += 1
                    inside += o.get("status") == 202
                    seen[o["status"]] = seen.get(o["status"], 0) + 1
            elif o.get("kind") == "settled":
                t = o.get("reserved_at_ms")
                t = t * 1000 if t is not None else o.get("answered_at_us")
                c = o.get("confirmed_at_ms")
                done = o.get("status") in ("confirmed", "paid", "cancelled") and c is not None and c * 1000 <= start
                if t is not None and t <= start and not done:
                    in_flight.add(o["ticket"])
        json.dump({"start_us": start, "end_us": end, "reservations_in_flight": len(in_flight),
                   "requests_in_flight": buying, "answered_inside": answered,
                   "answered_202_inside": inside,
                   "answered_inside_by_status": {str(k): v for k, v in sorted(seen.items())},
                   "evidence": fault["evidence"]}, open(at("overlap.json"), "w"), indent=1)
        statuses = ", ".join(f"{n} × {k}" for k, n in sorted(seen.items())) or "none"
        overlap = (f"{len(in_flight)} in flight, {answered} answered ({statuses}) "
                   f"inside {(end - start) / 1e6:.1f} s")
        if sc in (6, 15) and not seen.get(409):
            errors.append("no buy was answered 409 sold_out while ZooKeeper was down: the fault missed the sell-out")
        if sc == 4:
            # The gateway died holding buys it had reserved and not answered: the buyers' side
            # of its own gauge (in the evidence) is requests to it cut without an answer.
            cut = 0
            for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
                o = json.loads(line)
                if (o.get("kind") == "request" and o.get("gateway") == os.environ["GW0_URL"]
                        and o.get("status") is None and o["sent_at_us"] <= start):
                    cut += 1
            overlap = f"{cut} buys to gateway 0 cut by the kill; " + overlap
            if not cut:
                errors.append("no buy to gateway 0 was cut by the kill: none was between its reservation and its answer")
        if sc == 13:
            # The fault is on the admissions: the room was admitting when the gateway died,
            # and buyers were admitted and bought while it was down.
            shown = bought = 0
            for line in open(at("history.jsonl")) if os.path.exists(at("history.jsonl")) else []:
                o = json.loads(line)
                if o.get("kind") == "wr_admitted" and start <= o["at_ms"] * 1000 <= end:
                    shown += 1
                elif o.get("kind") == "wr_buy" and o.get("status") in (200, 202) and start <= o["sent_at_us"] <= end:
                    bought += 1
            overlap = ("; ".join(e for e in fault["evidence"] if "gateway 0" in e) + f"; {shown} admissions shown, "
                       f"{bought} buys answered with a ticket; " + overlap)
            if not shown and not bought:
                errors.append("no buyer was admitted or bought while the gateway was down")
            if not any("admitted, not bought" in e and not e.startswith("0 ") for e in fault["evidence"]):
                errors.append("the room was not admitting when the gateway was killed")
            own = [int(e.split(": ")[1].split()[0]) for e in fault["evidence"]
                   if e.startswith("gateway 0's own count: ")]
            if not own or not own[0]:
                errors.append("gateway 0 had handed out no admission token itself when it was killed")
        elif sc == 11:
            # The fault is on the expiries, not the reservations: the victim was cancelling
            # unpaid orders when it was killed, and orders were still cancelled once it was back.
            e = load_json("expiry.json") or {}
            at_restart, at_end = e.get("cancelled_at_restart"), e.get("cancelled_at_end")
            after = e.get("victim_expired_after_restart")
            overlap = (f"worker {e.get('victim')} had cancelled {e.get('victim_expired_at_kill')}; MySQL "
                       f"cancelled {e.get('cancelled_at_kill')} at the kill, {at_restart} at the restart, "
                       f"{at_end} at the end ({after} by the restarted worker); " + overlap)
            if not e.get("victim_expired_at_kill"):
                errors.append("the killed worker had cancelled no unpaid order")
            if at_restart is None or at_end is None or at_end <= at_restart:
                errors.append(f"no order was cancelled after the restart ({at_restart} -> {at_end}): "
                              "the fault missed the expiries")
        elif not in_flight:
            errors.append("no reservation was in flight when the fault started")
        # Buyers met the fault: they were answered while it lasted. While Redis is down the
        # answers are 503s, so a 202 is not required.
        if not answered:
            errors.append("no buy was answered while the fault lasted")

verdict = "+".join(v for v, why in (("FAIL", fails), ("ERROR", errors)) if why) or "PASS"
open(at("verdict"), "w").write(verdict + "\n")
open(at("reasons.txt"), "w").write("".join(f"{r}\n" for r in fails + errors))
crash_cell = "; ".join(crashes) or "0"
speed_cell = f"paced {rate}/s" if speed != "herd" else f"herd ({pay_herd_rate}/s)" if payment else "herd"
if room:
    speed_cell = "waiting room"  # buyers poll as the room tells them: no --rate
cells = [f"{sc} {name}", speed_cell, run,
         " ".join(f"**{v}**" for v in verdict.split("+")) if verdict != "PASS" else "PASS",
         made, kept, by_reason, sold_cell, overlap, crash_cell, settle_cell, checks_cell, rows,
         recovered, took]
print("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
PY
}

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
    body="{\"name\": \"chaos $ns\", \"stock\": $RUN_STOCK, \"buckets\": $BUCKETS}"
    sale_args=(--until-sold-out --sold-out-timeout 120) audit_args=(--until-sold-out)
    if is_payment "$sc"; then
        # The all-paid load needs a rate: herd speed is a high one.
        RUN_STOCK=$PAY_STOCK RUN_USERS=$PAY_USERS
        [[ $speed == herd ]] && rate_args=(--rate "$PAY_HERD_RATE")
        seed=$((RANDOM * 32768 + RANDOM))
        body="{\"name\": \"chaos $ns\", \"stock\": $RUN_STOCK, \"price\": 499900, \"currency\": \"CNY\", \"payment_window_secs\": $PAY_WINDOW, \"buckets\": $BUCKETS}"
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
    SETTINGS="Paced: stock $STOCK, $USERS users then fresh ones until sold out, $RATE req/s, fault once $FAULT_AFTER units are sold. Herd: stock $HERD_STOCK, $HERD_USERS users, unpaced, fault once $HERD_FAULT_AFTER units are sold. Concurrency $CONCURRENCY. Every fault waits for a reservation in flight, with the workers frozen (SIGSTOP) until 1 more unit is reserved (scenario 3: its victim alone, until 10 more) and thawed once the faulted process or service is seen gone, which is when the fault's window starts, so that orders are in flight when it lands (scenarios 6 and 15 wait until the sale is near its sell-out, which must come while ZooKeeper is down: 409 sold_out answered inside the window); a killed process is restarted $RESTART_AFTER s later. Allowed failures: scenario 2 \`chaos\`; scenario 7 \`expired\` and \`lost\`, a stand-in limitation (tansu keeps messages in memory, so a restart loses messages it acknowledged; Kafka with acks=all would not). \"Fault hit the sale\": reservations in flight when the fault started, and buys answered while it lasted. A crash fails the run; ERROR means the fault did not happen as designed. Scenarios 10-12: stock $PAY_STOCK at a price, a $PAY_WINDOW s payment window, $PAY_USERS users then fresh ones until every unit is paid (\`--until-all-paid\`; herd is $PAY_HERD_RATE req/s), $PAY_RATE of the buyers pay; a simulated provider declines 10 % of charges and decides 200 ms after each; in 12 also 20 % late (4 s, after the deadline) and 30 % of callbacks twice. Paid and cancelled (\`payment_timeout\`, \`buyer_cancelled\`) count as kept promises; the run passes only when every unit ends paid (the load saw it, and audit check 12 with \`--expect-all-paid\`). Scenario 11: worker 0 SIGKILLs itself (\`SECKILL_CHAOS_ABORT_AFTER_EXPIRY=1\`) right after the MySQL commit of payment-timeout cancels, before their units go back to Redis, proven by its exit status and those orders cancelled with \`restore_due\` set when it is seen gone; its \"fault hit the sale\" counts the cancellations before and after. Scenario 12 must show late and twice-sent callbacks and at least one \`refund_due\` payment. Scenario 13: a waiting room (stock $WR_STOCK, $WR_USERS buyers joining before the start through both gateways, $WR_ADMIT_PER_SEC admissions/s, factor $WR_FACTOR; \`load --waiting-room --until-sold-out\`); gateway 0 SIGKILLed once buyers are admitted, restarted $RESTART_AFTER s later; it passes when every unit is sold and audit checks 13-15 pass (every buyer held a valid admission, the cap held in every admin-view sample, no place admitted twice). Scenario 16, Redis comes back old: on one server a snapshot once the fault is due and a restart from it at three times as many units; on a cluster the product's replica cut off then, and failed over to (\`CLUSTER FAILOVER TAKEOVER\`) at three times as many; nothing may fail. Scenarios 17 and 18: the product, provider and end of 10 (every unit paid), with every buyer paying but these: 17, a cancel storm: $CANCEL_RATE of the buyers cancel from their \`202\` on (\`load --cancel-rate\`: \`POST /v1/orders/{ticket}/cancel\` every 20-50 ms while refused as pending, until 200 or a final refusal), so cancels land as their orders are confirmed; it needs cancels answered 200 and refused as pending first (else ERROR), and fails unless every \`buyer_cancelled\` order in MySQL has the load's 200 cancel in the history and the other way round. 18, a double pay: each payment attempt is two requests at once with two \`Idempotency-Key\`s, one per gateway (\`load --double-pay\`); it fails if MySQL's payments show one recorded while another of its ticket was unsettled (recorded by its \`202\` or by its settling less the provider's 200 ms delay: \`created_at_ms\` is stamped before the row lock) or a ticket has more than one \`succeeded\` or \`refund_due\` payment, and needs \`409 payment_in_progress\` answers (else ERROR). Scenario 19: worker 0 SIGKILLs itself (\`SECKILL_CHAOS_ABORT_AFTER_COMMIT\`, half the fault's units) right after a MySQL commit, before the Redis confirm; proven by its exit status, and its last batch in MySQL and still \`processing\` in Redis when it is seen gone; restarted $RESTART_AFTER s later; nothing may fail. Stock buckets: $BUCKETS$( ((BUCKETS > 1)) && echo " (scenario 13 keeps 1)" || true). Redis: $REDIS_MODE$([[ $REDIS_MODE == cluster ]] && echo " (3 primaries, each with a replica; scenarios 8-9 restart every node; 14 SIGKILLs the product's primary, its replica takes over, the node rejoins $RESTART_AFTER s later)" || true). ZooKeeper: $ZK_MODE$([[ $ZK_MODE == ensemble ]] && echo " (three servers; 15 SIGKILLs the leader with 10 % of orders failing, and fails if a gateway loses its session)" || true)."
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
