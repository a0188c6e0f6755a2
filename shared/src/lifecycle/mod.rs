//! The lifecycle of a ticket, written down as data.
//!
//! A buyer's purchase lives in three stores at once: Redis (the fast path: stock counter,
//! `buyers` hash, one record per ticket), Kafka (the order message) and MySQL (the system of
//! record: `products.stock`, `orders`, `failed_tickets`, `payments`). No store is written
//! together with another, so every transition below is a *sequence* of atomic steps (one Lua
//! script, one MySQL transaction, one Kafka publish, one HTTP answer), and an actor can stop
//! between any two of them: it crashes, or another actor's step runs in between.
//!
//! This module holds no behaviour. It names the states as the model sees them
//! ([`RecordStatus`], [`OrderStatus`], [`PaymentStatus`], [`FailReason`]: the same as
//! `store::RecordStatus` and the MySQL columns, with a failure's reason folded in), the actors
//! ([`Actor`]) and the table of [`TRANSITIONS`]: who takes each one, its steps in order, and
//! what a crash right after each step leaves behind. [`markdown_table`] renders the table;
//! `docs/DESIGN.md` holds it, and a test keeps the two the same. The model checker
//! (`shared/tests/lifecycle_model`) runs the same steps (its trace labels come from this
//! table) and checks that no interleaving and no crash breaks a promise; the step harness
//! (`tests/e2e/interleavings/`) runs the real scripts and transactions in chosen
//! orders.
//!
//! The table describes the code as it is. Where the code before issue 32's fixes differed,
//! the step says so in [`Step::before`]; the model can run either.

mod states;
mod steps;
mod table;
#[cfg(test)]
mod tests;

pub use states::*;
pub use steps::{Step, Transition, TransitionId};
pub use table::{transition, TRANSITIONS};

/// The table as Markdown: one line per step; a transition's name, actors and occasion on
/// its first step.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| transition | who, when | # | store | step | effect | a crash right after leaves | before issue 32's fixes |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for t in TRANSITIONS {
        let actors: Vec<&str> = t.actors.iter().map(|a| a.name()).collect();
        for (i, s) in t.steps.iter().enumerate() {
            let (name, who) = if i == 0 {
                (
                    t.name.to_string(),
                    format!("{}: {}", actors.join(", "), t.when),
                )
            } else {
                (String::new(), String::new())
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                name,
                who,
                i + 1,
                s.store.name(),
                s.op,
                s.effect,
                s.crash_leaves,
                s.before.unwrap_or(""),
            ));
        }
    }
    out
}
