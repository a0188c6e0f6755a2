#!/usr/bin/env bash
# Stop exactly what scripts/dev-up.sh started (found via the pid files and
# the private MariaDB socket under .dev/) and wait until it is gone.
# Safe to run when nothing is running.
#   --purge   also delete the data and logs under .dev/ (keeps the venv)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

purge=0
for arg in "$@"; do
    case $arg in
        --purge) purge=1 ;;
        -h | --help) sed -n '2,5p' "$0"; exit 0 ;;
        *) die "unknown argument: $arg (try --help)" ;;
    esac
done

stop_kafka
stop_zookeeper
stop_zk_ensemble
stop_mysql
stop_redis
stop_redis_cluster

if ((purge)); then
    log "purging data and logs under $DEV_DIR (keeping $VENV)"
    rm -rf "$REDIS_DIR" "$REDIS_CLUSTER_DIR" "$MYSQL_DIR" "$ZK_DIR" "$ZKE_DIR" "$TANSU_DIR" "$LOG_DIR" "$DEV_DIR/env"
fi
log "dev stack is down"
