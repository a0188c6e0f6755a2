# shellcheck shell=bash
# Sourced by scripts/chaos.sh (its settings and globals are in scope).
# The processes of a chaos run: starting, reviving and stopping gateways, workers, services
# and the payment provider, and telling a crash from a kill.

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
