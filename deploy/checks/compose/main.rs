//! Static checks of `docker-compose.yml` and `Dockerfile` at the repository root against the
//! settings the programs read. Nothing is started: the files are parsed and compared with
//! `Settings`, so a misspelt variable, a host name that is not a service, a wrong port or a
//! value the programs would reject fails here instead of in a container.
//!
//! # Layout
//! - [`expected`]: what the files must hold, the host's environment, the repository's files.
//! - [`yaml`]: reading a compose file as compose does; [`documented`]: what its comments
//!   tell its users to run.
//! - [`check`]: the checker, one file per part: the whole file, a program, the `cluster` and
//!   `ha` profiles, Prometheus, the Dockerfile.
//! - The tests: [`fixtures`] they share, then [`default_profile`], [`cluster_profile`],
//!   [`ha_profile`], [`prometheus_targets`] and [`tracing_profile`].

mod check;
mod documented;
mod expected;
mod fixtures;
mod yaml;

mod cluster_profile;
mod default_profile;
mod ha_profile;
mod prometheus_targets;
mod tracing_profile;
