//! A stateright model of a ticket's lifecycle (see `lifecycle.rs` for the table it runs).
//!
//! The state is the three stores (Redis, MySQL, Kafka), the answers given to buyers, and
//! every actor's place in the transition it is taking. An action is one atomic step of one
//! actor (a Lua script, a MySQL transaction, a publish), a crash, or a fault of Kafka. The
//! checker tries every order of these steps, so every interleaving and every crash point of
//! the bounds in [`Bounds`] is covered.
//!
//! Time is not modelled; timeouts are choices. The sweeper may find any in-flight ticket
//! "past the timeout" at any moment, except that it expires a pending ticket without a Kafka
//! location only once its gateway request is over (the sweeper's timeout is longer than a
//! request). The expiry may find any confirmed order past its deadline at any moment, and a
//! payment's callback counts as within the deadline exactly when the order is still
//! confirmed.
//!
//! Redis may lose its data (a restart with none), or come back old (a restart from an earlier
//! snapshot, as an AOF `everysec` or RDB restart or a failover to a lagging replica gives).
//! Either way its server run changes. The state then heals as the code heals it: a buy
//! (`reserve.lua`) or the sweeper (`epoch.lua`) finds the product lost or written by another
//! run, drops its stock key, and a reconcile rebuilds it from MySQL once the workers have read
//! what Kafka held (the fence). `claim.lua` adopts an order whose record Redis lost.
//!
//! [`Fixes`] switches each fix on or off: [`Fixes::TODAY`] is today's code, [`Fixes::ALL`] the
//! fixed one. Crashes of a pay request or of the provider's callback are not modelled (the
//! step harness tries the callback's).
//!
//! One file per concept: [`fixes`] (and the bounds), [`state`] (and the actions), [`steps`]
//! (the stores' scripts and transactions), [`actors`], [`transitions`] (the model stateright
//! explores), [`properties`], and [`traces`] in words.

mod actors;
mod fixes;
mod properties;
mod state;
mod steps;
mod traces;
mod transitions;

pub use fixes::*;
pub use properties::*;
pub use state::*;
