#!/usr/bin/env bash
# Bring up the local dev stack on 127.0.0.1, state under .dev/:
#   Redis (6379), MariaDB (3306), ZooKeeper (2181), tansu Kafka broker (9092).
# REDIS_MODE=cluster also starts a Redis Cluster (3 primaries, each with a replica, on
# 7001-7006) and points SECKILL_REDIS_URL at it; ZK_MODE=ensemble starts a ZooKeeper ensemble
# of three (clients on 12181-12183) and points SECKILL_ZK_HOSTS at it.
# Installs missing Debian packages and the tansu broker first. Idempotent:
# whatever already runs and answers is left alone. Run as root.
# Ports: REDIS_PORT MYSQL_PORT ZK_PORT KAFKA_PORT; topic: SECKILL_KAFKA_TOPIC
# (default seckill-orders) with KAFKA_PARTITIONS (default 8) partitions.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

started=$SECONDS
mkdir -p "$DEV_DIR" "$LOG_DIR"

ensure_packages
ensure_tansu

start_redis
[[ $REDIS_MODE == cluster ]] && start_redis_cluster
start_mysql
ensure_mysql_user
start_zookeeper
[[ $ZK_MODE == ensemble ]] && start_zk_ensemble
start_kafka
ensure_kafka_topic "$SECKILL_KAFKA_TOPIC" "$KAFKA_PARTITIONS"

dev_env >"$DEV_DIR/env"

cat <<SUMMARY

Dev stack is up ($((SECONDS - started))s). Logs: $LOG_DIR
  Redis      redis://127.0.0.1:$REDIS_PORT$([[ $REDIS_MODE == cluster ]] && printf '\n  Cluster    %s' "$(redis_cluster_url)")
  MySQL      mysql://$MYSQL_USER:$MYSQL_PASSWORD@127.0.0.1:$MYSQL_PORT/$MYSQL_DB   (root: mariadb --socket=$MYSQL_SOCK -uroot)
  Kafka      127.0.0.1:$KAFKA_PORT   topic $SECKILL_KAFKA_TOPIC ($KAFKA_PARTITIONS partitions; tansu, memory only)
  ZooKeeper  127.0.0.1:$ZK_PORT$([[ $ZK_MODE == ensemble ]] && printf '\n  Ensemble   %s' "$(zke_hosts)")

Environment for the services and tests (also in .dev/env: source .dev/env):
$(dev_env | sed 's/^/  /')

Stop with scripts/dev-down.sh (--purge also deletes the data).
SUMMARY
