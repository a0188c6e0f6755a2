#!/usr/bin/env bash
# Set up the local services and run the whole test suite: formatting, lints, unit tests and
# the end-to-end tests against real Redis, MariaDB, ZooKeeper and Kafka (tansu) on loopback.
# Works on a fresh Debian 12 machine as root. Usage: scripts/test.sh [extra cargo test args]
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
[[ -f $HOME/.cargo/env ]] && . "$HOME/.cargo/env"

scripts/dev-up.sh
eval "$(dev_env)"

# Each end-to-end test makes its own database (sk_t...); drop those of earlier runs.
mysql_root -N -e "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'sk\\_t%'" |
    while read -r db; do mysql_root -e "DROP DATABASE \`$db\`"; done

log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
log "cargo test"
cargo test --workspace "$@" -- --test-threads 4

# Two chaos scenarios end to end (no fault, and 10 % of orders failing), each with a full
# audit of Redis, the tickets and MySQL. The whole suite is scripts/chaos.sh.
log "chaos scenarios 1 and 2"
PROFILE=debug scripts/chaos.sh --scenarios "1 2"
