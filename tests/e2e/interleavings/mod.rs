//! Interleavings against the real stores (issue 32). A step harness runs the real Lua scripts
//! and MySQL transactions of several actors that meet on the same tickets (workers, sweepers,
//! the buyer's cancel, the payment expiry), one step at a time, in an order the test or
//! proptest chooses, and checks the lifecycle's invariants against Redis and MySQL after every
//! step and once everything is quiet.
//!
//! One step is one atomic unit of the real code: a Lua script, or a MySQL transaction. An
//! actor may also crash between two steps; a crashed worker's message is delivered again.
//!
//! [`actors`] are the actors and their steps, [`stage`] runs them and checks; the tests are in
//! the other files.

mod actors;
mod stage;

mod chosen;
mod every_order;
