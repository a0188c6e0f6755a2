#!/usr/bin/env bash
# Set up the local services and run the whole test suite: formatting, lints, unit tests, the
# end-to-end tests against real Redis, MariaDB, ZooKeeper and Kafka (tansu) on loopback (and
# the dashboard in headless Chromium), the Prometheus rules with promtool,
# schemathesis against a live gateway, and chaos scenarios 1, 2 and 16 (paced), 3, 4, 8 and 16
# (herd: real faults), and 1 again on the cluster, in 4 stock buckets.
# Works on a fresh Debian 12 machine as root. Usage: scripts/test.sh [extra cargo test args]
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
[[ -f $HOME/.cargo/env ]] && . "$HOME/.cargo/env"

# No incremental caches: a test run is not an edit loop, and they fill the disk.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
log "disk: $(df -h --output=avail "$ROOT" | tail -n 1 | tr -d ' ') free under $ROOT"

# The single Redis and, for the second run of the end-to-end tests, a Redis Cluster.
REDIS_MODE=cluster scripts/dev-up.sh
eval "$(REDIS_MODE=single dev_env)"

# Each end-to-end test makes its own database (sk_t...), and the schemathesis run one
# (sk_st...); drop those of earlier runs.
mysql_root -N -e "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'sk\\_t%' OR schema_name LIKE 'sk\\_st%'" |
    while read -r db; do mysql_root -e "DROP DATABASE \`$db\`"; done
# ... and their Redis keys (sk:{t...:P}:..., sk:{st...}) and ZooKeeper nodes (/seckill/t...).
# Their topics live in the local broker's memory and go with its restart.
# One UNLINK per key, so keys of different cluster slots never share a command; a replica
# refuses them (its primary does the work).
for port in "$REDIS_PORT" $(redis_cluster_ports); do
    for pattern in 'sk:{t*' 'sk:{st*'; do
        redis-cli -p "$port" --scan --pattern "$pattern" | sed 's/^/UNLINK /' |
            redis-cli -p "$port" >/dev/null 2>&1 || true
    done
done
# One ZooKeeper client for all of them: each start of one is a JVM's (about a second).
/usr/share/zookeeper/bin/zkCli.sh -server "127.0.0.1:$ZK_PORT" ls /seckill 2>/dev/null |
    tail -n 1 | tr -d '[],' | tr ' ' '\n' | grep -E '^s?t[0-9a-f]+$' | sed 's|^|deleteall /seckill/|' |
    /usr/share/zookeeper/bin/zkCli.sh -server "127.0.0.1:$ZK_PORT" >/dev/null 2>&1 || true

log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
log "monitoring: Prometheus config, alert rules and their unit tests, the Grafana dashboard"
scripts/check-monitoring.sh
log "cargo test"
cargo test --workspace "$@" -- --test-threads 4
log "the end-to-end tests again, on the Redis Cluster"
# --workspace, as above, so the features unify the same way and nothing is built again.
(eval "$(REDIS_MODE=cluster dev_env)" && cargo test --workspace --test e2e "$@" -- --test-threads 4)

# schemathesis against a live gateway (with the admin token) and a worker, on a fresh
# namespace and database: every check, every phase including the stateful one, and zero
# failures. Pinned by version and hash (scripts/schemathesis/requirements.txt), in a venv
# under .dev/ like the broker's. SCHEMATHESIS_EXAMPLES sets the cases per operation.
ST_VERSION=4.32.5
ST_VENV=$DEV_DIR/schemathesis
ST_REQUIREMENTS=$ROOT/scripts/schemathesis/requirements.txt
ST_GW_PORT=18090 ST_WK_PORT=19190

ensure_schemathesis() {
    if cmp -s "$ST_REQUIREMENTS" "$ST_VENV/requirements.txt" &&
        [[ $("$ST_VENV/bin/st" --version 2>/dev/null) == "st, version $ST_VERSION" ]]; then
        log "schemathesis: $ST_VERSION already in $ST_VENV"
        return 0
    fi
    local py=/usr/bin/python3
    [[ -x $py ]] || py=$(command -v python3) || die "python3 not found"
    log "schemathesis: installing $ST_VERSION into $ST_VENV"
    "$py" -m venv --clear "$ST_VENV" || return 1
    "$ST_VENV/bin/pip" install -q --disable-pip-version-check --require-hashes \
        --only-binary=:all: -r "$ST_REQUIREMENTS" || return 1
    cp "$ST_REQUIREMENTS" "$ST_VENV/requirements.txt"
}

run_schemathesis() {
    local ns db dir token=schemathesis-admin-token-of-32-bytes-or-more pids=() rc=0 pid buyer
    local secret=schemathesis-hs256-secret-of-32-bytes-or-more
    local admission=schemathesis-admission-secret-of-32-bytes-or-more
    ns=st$(date +%s)x$RANDOM
    db=sk_$ns
    dir=$DEV_DIR/schemathesis-runs/$ns
    mkdir -p "$dir"
    port_open "$ST_GW_PORT" && die "port $ST_GW_PORT is taken"
    port_open "$ST_WK_PORT" && die "port $ST_WK_PORT is taken"
    mysql_root -e "CREATE DATABASE \`$db\`"
    local env=(
        SECKILL_NAMESPACE="$ns" SECKILL_MYSQL_URL="${SECKILL_MYSQL_URL%/*}/$db"
        SECKILL_KAFKA_TOPIC="orders-$ns" SECKILL_WORKER_GROUP="workers-$ns"
        SECKILL_ADMIN_TOKEN="$token" SECKILL_AUTH_HS256_SECRET="$secret" SECKILL_LOG_FORMAT=pretty
        SECKILL_ADMISSION_SECRET="$admission"
        SECKILL_RATE_LIMIT_PER_ADDRESS_PER_SEC=0 SECKILL_ADMIN_AUTH_FAILURES_PER_MIN=0
        SECKILL_QUEUE_RATE_LIMIT_PER_USER_PER_SEC=0
    )
    buyer=$(env "${env[@]}" target/debug/gateway token --user 1 --ttl 3600)
    log "schemathesis: namespace $ns, logs and reports in $dir"
    env "${env[@]}" SECKILL_WORKER_HTTP_ADDR="127.0.0.1:$ST_WK_PORT" target/debug/worker \
        >"$dir/worker.log" 2>&1 &
    pids+=($!)
    env "${env[@]}" SECKILL_HTTP_ADDR="127.0.0.1:$ST_GW_PORT" target/debug/gateway \
        >"$dir/gateway.log" 2>&1 &
    pids+=($!)
    if wait_for -t 90 -m "the worker" curl -fsS "http://127.0.0.1:$ST_WK_PORT/livez" &&
        wait_for -t 30 -m "the gateway" curl -fsS "http://127.0.0.1:$ST_GW_PORT/livez"; then
        # The joins go to a waiting room with a proof of work: its 428 and 403 are the answers
        # schemathesis would not reach from the products it makes (their ids are not linked to
        # the join with a room and a started sale often enough).
        local pow_product
        pow_product=$(curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
            -d '{"name": "schemathesis room", "stock": 5, "waiting_room": {"pow": {"min_bits": 4}}}' \
            "http://127.0.0.1:$ST_GW_PORT/admin/products" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
        curl -fsS -X POST -H "Authorization: Bearer $token" \
            "http://127.0.0.1:$ST_GW_PORT/admin/products/$pow_product/preload" >/dev/null
        # The buys go to a product sold up to 50 per buyer, each as a buyer of its own (the
        # hooks sign their tokens), so that every quantity is judged: taken, or over the limit.
        local qty_product
        qty_product=$(curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
            -d '{"name": "schemathesis quantities", "stock": 1000000, "max_per_buyer": 50}' \
            "http://127.0.0.1:$ST_GW_PORT/admin/products" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
        curl -fsS -X POST -H "Authorization: Bearer $token" \
            "http://127.0.0.1:$ST_GW_PORT/admin/products/$qty_product/preload" >/dev/null
        # In the run's folder: hypothesis keeps its database and schemathesis its reports there.
        (cd "$dir" && SCHEMATHESIS_HOOKS="$ROOT/scripts/schemathesis/hooks.py" \
            ST_ADMIN_TOKEN="$token" ST_BUYER_TOKEN="$buyer" ST_POW_PRODUCT="$pow_product" \
            ST_QTY_PRODUCT="$qty_product" ST_JWT_SECRET="$secret" \
            "$ST_VENV/bin/st" --config-file "$ROOT/scripts/schemathesis/schemathesis.toml" \
            run "http://127.0.0.1:$ST_GW_PORT/openapi.json" \
            --phases examples,coverage,fuzzing,stateful \
            --max-examples "${SCHEMATHESIS_EXAMPLES:-200}" --request-timeout 10 \
            --report junit --report-dir "$dir") 2>&1 | tee "$dir/st.log" || rc=$?
    else
        rc=1
    fi
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if ((rc != 0)); then
        die "schemathesis failed (exit $rc); its database $db and the logs in $dir are kept"
    fi
    # An operation that only ever got 401/403 was not tested past its door: it fails the run
    # unless scripts/schemathesis/auth_only.txt lists it with its reason.
    python3 "$ROOT/scripts/schemathesis/auth_only.py" "$dir/st.log" ||
        die "schemathesis reached an operation only with 401/403 answers; the logs are in $dir"
    # A panic the answers did not show (a task of the gateway or worker) fails the run too.
    if grep -l 'panicked at' "$dir/gateway.log" "$dir/worker.log" >/dev/null; then
        die "a panic under schemathesis: $(grep -h -m1 -o 'panicked at .*' "$dir/gateway.log" "$dir/worker.log" | head -1)"
    fi
    mysql_root -e "DROP DATABASE \`$db\`"
}

log "schemathesis"
cargo build --bin gateway --bin worker
ensure_schemathesis
run_schemathesis

# Three chaos scenarios end to end (no fault, 10 % of orders failing, and a Redis restarted
# from an old snapshot mid-sale), each with a full audit of Redis, the tickets and MySQL, every
# buyer's order of 1 to 4 units (issue 38), so that each give-back moves units. The whole
# suite is scripts/chaos.sh.
log "chaos scenarios 1, 2 and 16, orders of 1-4 units"
PROFILE=debug scripts/chaos.sh --scenarios "1 2 16" --quantity 1-4
# Real faults at herd speed, one run each: a worker and a gateway SIGKILLed mid-sale, Redis
# restarted empty, Redis restarted from an old snapshot, a worker dead between its MySQL commit
# and its Redis confirm.
log "chaos scenarios 3, 4, 8, 16 and 19 at herd speed"
PROFILE=debug scripts/chaos.sh --scenarios "3 4 8 16 19" --speeds herd
log "chaos scenario 1 on the Redis Cluster, the stock in 4 buckets, orders of 1-4 units"
PROFILE=debug scripts/chaos.sh --redis cluster --buckets 4 --quantity 1-4 --scenarios "1"
log "disk: target/ holds $(du -sh target 2>/dev/null | cut -f1); $(df -h --output=avail "$ROOT" | tail -n 1 | tr -d ' ') free"
