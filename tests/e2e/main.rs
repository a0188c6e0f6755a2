//! End-to-end tests on real Redis, Kafka, ZooKeeper and MySQL (started by `scripts/dev-up.sh`).
//! Each test gets its own namespace: a MySQL database, a Kafka topic and group, a Redis key
//! prefix and a ZooKeeper root, so tests run in parallel on the same servers.

mod helpers;

mod auth;
mod bad_input;
mod batches;
mod binaries;
mod buckets;
mod connections;
mod dashboard;
mod events;
mod fuzz;
mod hung_broker;
mod interleavings;
mod lifecycle;
mod limits;
mod logs;
mod markers;
mod observability;
mod openapi;
mod payments;
mod pipeline;
mod process;
mod proof_of_work;
mod quantity;
mod recovery;
mod redis_faults;
mod rollback;
mod sale_page;
mod settle;
mod traces;
mod waiting_room;
mod workers;
