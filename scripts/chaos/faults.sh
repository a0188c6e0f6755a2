# shellcheck shell=bash
# Sourced by scripts/chaos.sh (its settings and globals are in scope).
# The faults: each scenario's injection, and the checks that it landed as designed.

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
