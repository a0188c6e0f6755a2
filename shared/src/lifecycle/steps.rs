//! A transition and its steps, the rows of the table.

use super::{Actor, Store};

/// One atomic step of a transition.
#[derive(Debug)]
pub struct Step {
    pub store: Store,
    /// The script, statement or call, as named in the code.
    pub op: &'static str,
    /// What it reads and writes.
    pub effect: &'static str,
    /// What an actor that stops right after this step leaves behind, and who picks it up.
    pub crash_leaves: &'static str,
    /// How the code before issue 32's fixes differed at this step, if it did.
    pub before: Option<&'static str>,
}

/// The transitions of a ticket's lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransitionId {
    Buy,
    BuyAgain,
    Settle,
    ExpirePending,
    SettleStuck,
    Cancel,
    RestoreDue,
    Pay,
    PaymentCallback,
    DropOld,
    Rebuild,
}

/// One row group of the table: a transition, who may take it, and its steps in order.
#[derive(Debug)]
pub struct Transition {
    pub id: TransitionId,
    pub name: &'static str,
    pub actors: &'static [Actor],
    /// When the actor takes it.
    pub when: &'static str,
    pub steps: &'static [Step],
}
