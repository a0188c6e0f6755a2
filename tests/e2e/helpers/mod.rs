//! `TestEnv`: one test's private slice of the real services, with typed helpers.
//!
//! Every test module takes all of it with `use crate::helpers::*`; each part is in its own
//! file: [`basics`], [`env`], [`apps`], [`provider`], [`metrics`].

mod apps;
mod basics;
mod env;
mod metrics;
mod provider;

pub use apps::*;
pub use basics::*;
pub use env::*;
pub use metrics::*;
pub use provider::*;
