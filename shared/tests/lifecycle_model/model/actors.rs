//! The actors: their jobs, who is busy or may crash, the sweeper's choices; and what "at rest"
//! means.

use super::state::{Action, Job, Message, Op, Seckill, Slot, State, Who};
use seckill_shared::lifecycle::{OrderStatus, RecordStatus, TransitionId};
use stateright::Model;

impl Seckill {
    // ---- actors ------------------------------------------------------------------------

    pub(crate) fn job(s: &State, who: Who) -> Option<Job> {
        let slot = |slot: Slot| match slot {
            Slot::Busy(job) => Some(job),
            Slot::Free | Slot::Done => None,
        };
        match who {
            Who::Gateway(t) => slot(s.gateways[t as usize]),
            Who::Again(t) => slot(s.again[t as usize]),
            Who::Worker(w) => s.workers[w as usize],
            Who::Sweeper(w) => s.sweepers[w as usize],
            Who::Expiry => s.expiry,
            Who::Canceller(c) => slot(s.cancellers[c as usize]),
            Who::Recovery => s.recovery,
            Who::Payer(p) => slot(s.payers[p as usize]),
            Who::Provider => s.provider,
            Who::Reconcile => s.reconcile,
        }
    }

    /// Gives an actor its next step (`None`: it is idle again, or done for a one-off actor).
    pub(crate) fn set_job(s: &mut State, who: Who, job: Option<Job>) {
        let slot = |job: Option<Job>| job.map_or(Slot::Done, Slot::Busy);
        match who {
            Who::Gateway(t) => s.gateways[t as usize] = slot(job),
            Who::Again(t) => s.again[t as usize] = slot(job),
            Who::Worker(w) => s.workers[w as usize] = job,
            Who::Sweeper(w) => s.sweepers[w as usize] = job,
            Who::Expiry => s.expiry = job,
            Who::Canceller(c) => s.cancellers[c as usize] = slot(job),
            Who::Recovery => s.recovery = job,
            Who::Payer(p) => s.payers[p as usize] = slot(job),
            Who::Provider => s.provider = job,
            Who::Reconcile => s.reconcile = job,
        }
    }

    /// Every actor in the middle of a transition.
    pub(crate) fn busy(&self, s: &State) -> Vec<Who> {
        let mut all: Vec<Who> = self.tickets().map(Who::Gateway).collect();
        all.extend(self.tickets().map(Who::Again));
        all.extend((0..s.workers.len() as u8).map(Who::Worker));
        all.extend((0..s.sweepers.len() as u8).map(Who::Sweeper));
        all.push(Who::Expiry);
        all.extend((0..s.cancellers.len() as u8).map(Who::Canceller));
        all.push(Who::Recovery);
        all.extend((0..s.payers.len() as u8).map(Who::Payer));
        all.push(Who::Provider);
        all.push(Who::Reconcile);
        all.retain(|&who| Self::job(s, who).is_some());
        all
    }

    pub(crate) fn can_crash(&self, s: &State, who: Who) -> bool {
        let actor = who.actor();
        // A pay request and the provider's callback are not modelled crashing.
        !matches!(who, Who::Payer(_) | Who::Provider)
            && self.bounds.may_crash.contains(&actor)
            && s.crashed & (1 << actor as u8) == 0
    }

    /// Whether an idle sweeper may act on this ticket now, and with which job.
    pub(crate) fn sweep_job(&self, s: &State, t: u8) -> Option<Job> {
        let record = s.records[t as usize]?;
        let (transition, op) = match record.status {
            // Past the timeout only once the gateway's request is over.
            RecordStatus::Pending if !record.located => {
                if s.gateways[t as usize] != Slot::Done {
                    return None;
                }
                (TransitionId::ExpirePending, Op::ExpirePending)
            }
            RecordStatus::Pending => (TransitionId::Settle, Op::Claim),
            RecordStatus::Processing if self.fixes.sweeper_settles_processing => {
                (TransitionId::Settle, Op::Write)
            }
            RecordStatus::Processing => (TransitionId::SettleStuck, Op::WriteStuck),
            _ => return None,
        };
        Some(Job {
            transition,
            ticket: t,
            op,
        })
    }

    pub(crate) fn order_confirmed(s: &State, t: u8) -> bool {
        s.orders[t as usize].is_some_and(|o| o.status == OrderStatus::Confirmed)
    }

    // ---- what "at rest" means ----------------------------------------------------------

    /// No actor is in the middle of a transition, no message waits for a worker, no payment
    /// waits for the provider and no cancel waits for its cancel.lua. Only the sweeper may
    /// still have work: in-flight records.
    pub fn calm(&self, s: &State) -> bool {
        Self::trusted(s)
            && self.busy(s).is_empty()
            && !s.kafka.contains(&Message::Queued)
            && !s.orders.iter().flatten().any(|o| o.restore_due)
            && !s.payments.iter().any(|p| p.status.in_progress())
    }

    /// Calm, and no ticket in flight: the system has nothing left to do.
    pub fn quiet(&self, s: &State) -> bool {
        self.calm(s) && !s.records.iter().flatten().any(|r| r.status.in_flight())
    }

    /// Lets sweeper 1 run alone, ticket after ticket, until no ticket is left for it.
    pub(crate) fn sweep_to_rest(&self, s: &State) -> State {
        let mut s = s.clone();
        for _ in 0..2 * self.bounds.owners.len() {
            let Some(ticket) = self.tickets().find(|&t| self.sweep_job(&s, t).is_some()) else {
                break;
            };
            s = self
                .next_state(&s, Action::Sweep { sweeper: 0, ticket })
                .unwrap();
            while s.sweepers[0].is_some() {
                s = self.next_state(&s, Action::Step(Who::Sweeper(0))).unwrap();
            }
        }
        s
    }
}
