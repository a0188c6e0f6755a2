//! The stores' scripts and transactions, each one atomic step of the model.

use super::state::{
    Answer, Job, Message, Meta, MySqlRead, Op, Order, Payment, Record, Seckill, Slot, State, Who,
};
use seckill_shared::lifecycle::{
    FailReason, OrderStatus, Outcome, PaymentStatus, RecordStatus, TransitionId,
};

/// How `compensate.lua` is called.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Compensate {
    /// Only a pending ticket (the sweeper's expire, and `release.lua`, which does the same).
    PendingOnly,
    /// A pending or processing ticket; the unit goes back.
    Any,
    /// As `Any`, but MySQL had no unit for it: none goes back.
    Heal,
}

impl Seckill {
    // ---- the stores' scripts and transactions ------------------------------------------

    /// Frees the buyer of `t` in the `buyers` hash, if `t` is the ticket it holds there.
    fn free_buyer(&self, s: &mut State, t: u8) {
        let slot = &mut s.buyers[self.owner(t) as usize];
        if *slot == Some(t) {
            *slot = None;
        }
    }

    /// `reserve.lua`.
    pub(crate) fn reserve(&self, s: &mut State, t: u8) {
        s.redis_stock -= self.qty(t) as i8;
        s.created[t as usize] = s.clock;
        s.buyers[self.owner(t) as usize] = Some(t);
        s.records[t as usize] = Some(Record {
            status: RecordStatus::Pending,
            located: false,
        });
    }

    /// `compensate.lua` (and `release.lua`, which is its 'pending_only' mode with the reason
    /// kafka_unavailable). Returns whether it changed the record.
    fn compensate(&self, s: &mut State, t: u8, reason: FailReason, mode: Compensate) -> bool {
        // The scripts that decide in Redis alone check its run first.
        // Another run's meta: the state may be old. (A Redis that lost everything has no
        // meta; a dropped stock key of this run's meta is a loss the rebuild counts.)
        let old_run = s.meta.is_some_and(|m| m.run != s.run);
        if mode == Compensate::PendingOnly && self.fixes.expire_checks_run && old_run {
            s.loaded = false;
            return false;
        }
        let Some(record) = &mut s.records[t as usize] else {
            return false;
        };
        let takes = match mode {
            Compensate::PendingOnly => {
                record.status == RecordStatus::Pending
                    && !(record.located && self.fixes.expire_spares_held)
            }
            Compensate::Any | Compensate::Heal => record.status.in_flight(),
        };
        if !takes {
            return false;
        }
        record.status = RecordStatus::Failed(reason);
        self.free_buyer(s, t);
        // No unit goes back to a stock key that is gone (the rebuild counts it). 'heal' lifts
        // a stock below zero by as many units as bring it to zero, at most the order's.
        let q = self.qty(t) as i8;
        let lifts = self.fixes.heal_lifts_negative && s.redis_stock < 0;
        if s.loaded {
            if mode != Compensate::Heal {
                s.redis_stock += q;
            } else if lifts {
                s.redis_stock += q.min(-s.redis_stock);
            }
        }
        true
    }

    /// `claim.lua`: returns whether the ticket is claimed (else the caller skips it).
    fn claim(&self, s: &mut State, t: u8) -> bool {
        let i = t as usize;
        if s.records[i].is_none() {
            // The record is gone: records live a TTL after they settle, so Redis lost it
            // (no stock key, or a rebuild since the reservation) or came back old (the
            // reservation is younger than the TTL, always so in the model).
            let loaded_at = s.meta.map_or(0, |m| m.loaded_at);
            let before_rebuild = s.created[i] < loaded_at;
            if s.loaded && !before_rebuild {
                s.loaded = false;
            }
            s.records[i] = Some(Record {
                status: RecordStatus::Processing,
                located: false,
            });
            let slot = &mut s.buyers[self.owner(t) as usize];
            if slot.is_none() {
                *slot = Some(t);
            }
            if s.loaded {
                s.redis_stock -= self.qty(t) as i8;
            }
            return true;
        }
        let Some(record) = &mut s.records[i] else {
            return false;
        };
        match record.status {
            RecordStatus::Pending | RecordStatus::Processing => {
                record.status = RecordStatus::Processing;
                true
            }
            _ => false,
        }
    }

    /// The settle's MySQL transaction (under the product row's lock).
    fn settle_tx(&self, s: &mut State, t: u8) -> Outcome {
        if let Some(order) = s.orders[t as usize] {
            return match order.status {
                _ if !self.fixes.settle_follows_order => Outcome::Confirmed,
                OrderStatus::Confirmed => Outcome::Confirmed,
                OrderStatus::Paid => Outcome::Paid,
                OrderStatus::Cancelled => Outcome::Cancelled,
            };
        }
        if let Some(reason) = s.failed[t as usize] {
            return Outcome::Failed(reason);
        }
        let owner = self.owner(t);
        let holds_live_order = self.tickets().any(|other| {
            self.owner(other) == owner
                && s.orders[other as usize].is_some_and(|o| o.status.holds_unit())
        });
        let failure = if holds_live_order {
            Some(FailReason::DuplicateUser)
        } else if s.mysql_stock < self.qty(t) {
            Some(FailReason::OutOfStock)
        } else {
            None
        };
        match failure {
            Some(reason) => {
                s.failed[t as usize] = Some(reason);
                Outcome::Failed(reason)
            }
            None => {
                s.orders[t as usize] = Some(Order {
                    status: OrderStatus::Confirmed,
                    restore_due: false,
                });
                s.mysql_stock -= self.qty(t);
                Outcome::Confirmed
            }
        }
    }

    /// Today's sweeper on a processing ticket: its MySQL transaction.
    fn settle_stuck_tx(&self, s: &mut State, t: u8) -> Outcome {
        if s.orders[t as usize].is_some() {
            return Outcome::Confirmed;
        }
        s.failed[t as usize].get_or_insert(FailReason::Lost);
        Outcome::Failed(FailReason::Lost)
    }

    /// Changes a record from one of `from` to `to`; returns whether it did.
    fn move_record(s: &mut State, t: u8, from: &[RecordStatus], to: RecordStatus) -> bool {
        match &mut s.records[t as usize] {
            Some(record) if from.contains(&record.status) => {
                record.status = to;
                true
            }
            _ => false,
        }
    }

    /// `cancel.lua`.
    fn cancel_lua(&self, s: &mut State, t: u8) {
        let from: &[RecordStatus] = if self.fixes.cancel_takes_in_flight {
            &[
                RecordStatus::Pending,
                RecordStatus::Processing,
                RecordStatus::Confirmed,
            ]
        } else {
            &[RecordStatus::Confirmed]
        };
        if Self::move_record(s, t, from, RecordStatus::Cancelled) {
            self.free_buyer(s, t);
            if s.loaded {
                s.redis_stock += self.qty(t) as i8;
            }
        }
    }

    /// `paid.lua`.
    fn paid_lua(&self, s: &mut State, t: u8) {
        let from: &[RecordStatus] = if self.fixes.paid_takes_processing {
            &[
                RecordStatus::Pending,
                RecordStatus::Processing,
                RecordStatus::Confirmed,
            ]
        } else {
            &[RecordStatus::Confirmed]
        };
        if s.records[t as usize].is_none() && self.fixes.paid_writes_lost_record {
            s.records[t as usize] = Some(Record {
                status: RecordStatus::Paid,
                located: false,
            });
            return;
        }
        Self::move_record(s, t, from, RecordStatus::Paid);
    }

    /// The Redis script that follows a settle's outcome.
    fn follow(&self, s: &mut State, t: u8, outcome: Outcome) {
        match outcome {
            Outcome::Confirmed => {
                Self::move_record(s, t, &[RecordStatus::Processing], RecordStatus::Confirmed);
            }
            Outcome::Paid => self.paid_lua(s, t),
            Outcome::Cancelled => self.cancel_lua(s, t),
            Outcome::Failed(reason) => {
                let mode = if reason == FailReason::OutOfStock {
                    Compensate::Heal
                } else {
                    Compensate::Any
                };
                self.compensate(s, t, reason, mode);
            }
        }
    }

    /// `restore.lua` for every ticket MySQL settled, as the reconcile read them.
    fn restore(&self, s: &mut State, read: &MySqlRead) {
        for t in self.tickets() {
            let i = t as usize;
            let settled = match (read.orders[i], read.failed[i]) {
                (Some(order), _) => order.record(),
                (None, Some(reason)) => RecordStatus::Failed(reason),
                (None, None) => continue,
            };
            let status = s.records[i].map(|r| r.status);
            let write = match settled {
                RecordStatus::Confirmed | RecordStatus::Failed(_) => !matches!(
                    status,
                    Some(
                        RecordStatus::Confirmed
                            | RecordStatus::Failed(_)
                            | RecordStatus::Paid
                            | RecordStatus::Cancelled
                    )
                ),
                _ => status != Some(settled),
            };
            if write {
                let located = s.records[i].is_some_and(|r| r.located);
                s.records[i] = Some(Record {
                    status: settled,
                    located,
                });
            }
            let owner = self.owner(t) as usize;
            if settled.holds_unit() {
                s.buyers[owner] = Some(t);
            } else if s.buyers[owner] == Some(t) {
                s.buyers[owner] = None;
            }
        }
    }

    /// `rebuild.lua`: the stock from what the reconcile read, less what is in flight now.
    fn rebuild_lua(&self, s: &mut State, read: &MySqlRead) {
        let in_flight = self.units_held(&s.records, |r| r.status.in_flight()) as i8;
        s.redis_stock = read.stock as i8 - in_flight;
        s.clock += 1;
        s.meta = Some(Meta {
            run: s.run,
            loaded_at: s.clock,
        });
        s.loaded = true;
    }

    /// Runs a job's next step; returns the job's next step, or `None` once it is over.
    pub(crate) fn run(&self, s: &mut State, job: Job) -> Option<Job> {
        let t = job.ticket;
        let i = t as usize;
        match job.op {
            Op::Publish => {
                s.kafka[i] = Message::Queued;
                match job.transition {
                    TransitionId::BuyAgain => job.then(Op::LocateHeld),
                    _ => job.then(Op::Locate),
                }
            }
            Op::LocateHeld => {
                let pending = s.records[i].is_some_and(|r| r.status == RecordStatus::Pending);
                if pending || !self.fixes.expire_spares_held {
                    if let Some(record) = &mut s.records[i] {
                        record.located = true;
                    }
                    // Today: 200 with the record read before, whatever it is now.
                    s.answer(i, Answer::Accepted);
                }
                None
            }
            Op::Locate => {
                if let Some(record) = &mut s.records[i] {
                    record.located = true;
                }
                s.answer(i, Answer::Accepted);
                None
            }
            Op::Release => {
                let released =
                    self.compensate(s, t, FailReason::KafkaUnavailable, Compensate::PendingOnly);
                let recorded = self.fixes.release_recorded_in_mysql;
                match released {
                    true if recorded => job.then(Op::RecordUnavailable),
                    false
                        if recorded
                            || self.fixes.release_answers_held
                            || self.fixes.release_answers_located =>
                    {
                        job.then(Op::ReadMovedOn)
                    }
                    _ => {
                        s.answer(i, Answer::Unavailable);
                        None
                    }
                }
            }
            Op::ReadMovedOn => {
                let status = s.records[i].map(|r| r.status);
                // Located on its record: a buy again published it and answered 200 while
                // this publish was failing. The order is in Kafka, and promised.
                let failed = matches!(status, Some(RecordStatus::Failed(_)));
                if self.fixes.release_answers_located
                    && !failed
                    && s.records[i].is_some_and(|r| r.located)
                {
                    s.answer(i, Answer::Accepted);
                    return None;
                }
                if self.fixes.release_recorded_in_mysql {
                    // A failure someone else made (the sweeper's expire, a worker's) is theirs
                    // to write to MySQL; anything else, MySQL decides.
                    if matches!(status, Some(RecordStatus::Failed(_))) {
                        s.answer(i, Answer::Unavailable);
                        return None;
                    }
                    return job.then(Op::RecordUnavailable);
                }
                let held = self.fixes.release_answers_held
                    && matches!(
                        status,
                        Some(
                            RecordStatus::Processing | RecordStatus::Confirmed | RecordStatus::Paid
                        )
                    );
                s.answer(
                    i,
                    if held {
                        Answer::Accepted
                    } else {
                        Answer::Unavailable
                    },
                );
                None
            }
            Op::RecordUnavailable => {
                let held = s.orders[i].is_some_and(|o| o.status.holds_unit());
                if s.orders[i].is_none() && s.failed[i].is_none() {
                    s.failed[i] = Some(FailReason::KafkaUnavailable);
                }
                s.answer(
                    i,
                    if held {
                        Answer::Accepted
                    } else {
                        Answer::Unavailable
                    },
                );
                None
            }
            Op::Claim => {
                if self.claim(s, t) {
                    job.then(Op::Write)
                } else {
                    None
                }
            }
            Op::Write => job.then(Op::Follow(self.settle_tx(s, t))),
            Op::WriteStuck => job.then(Op::Follow(self.settle_stuck_tx(s, t))),
            Op::Follow(outcome) => {
                self.follow(s, t, outcome);
                None
            }
            Op::ExpirePending => {
                let changed = self.compensate(s, t, FailReason::Expired, Compensate::PendingOnly);
                if changed || !self.fixes.expired_row_only_if_expired {
                    job.then(Op::InsertExpired)
                } else {
                    None
                }
            }
            Op::InsertExpired => {
                if s.orders[i].is_none() || !self.fixes.expired_row_needs_no_order {
                    let row = *s.failed[i].get_or_insert(FailReason::Expired);
                    if row != FailReason::Expired && self.fixes.expire_follows_failed_row {
                        return job.then(Op::FollowFailedRow(row));
                    }
                }
                None
            }
            Op::FollowFailedRow(reason) => {
                // fail_reason.lua: only a failed record takes the reason (one that a claim
                // adopted since is the worker's to settle, and MySQL's row fails it).
                if let Some(record) = &mut s.records[i] {
                    if matches!(record.status, RecordStatus::Failed(_)) {
                        record.status = RecordStatus::Failed(reason);
                    }
                }
                None
            }
            Op::CancelLua => {
                self.cancel_lua(s, t);
                job.then(Op::ClearRestoreDue)
            }
            Op::ClearRestoreDue => {
                if let Some(order) = &mut s.orders[i] {
                    order.restore_due = false;
                }
                None
            }
            Op::InsertPayment => {
                s.payments.push(Payment {
                    ticket: t,
                    status: PaymentStatus::Unsent,
                });
                job.then(Op::Send(s.payments.len() as u8 - 1))
            }
            Op::Send(p) => {
                s.payments[p as usize].status = PaymentStatus::Processing;
                None
            }
            Op::PaidLua => {
                self.paid_lua(s, t);
                None
            }
            Op::RebuildRead => {
                // Checked again under the lock: another process rebuilt it meanwhile.
                if s.loaded {
                    return None;
                }
                s.rebuild_read = Some(MySqlRead {
                    stock: s.mysql_stock,
                    orders: s.orders.iter().map(|o| o.map(|o| o.status)).collect(),
                    failed: s.failed.clone(),
                });
                job.then(Op::Restore)
            }
            Op::Restore => {
                let read = s.rebuild_read.clone().expect("read before restore");
                self.restore(s, &read);
                job.then(Op::RebuildLua)
            }
            Op::RebuildLua => {
                let read = s.rebuild_read.take().expect("read before rebuild.lua");
                self.rebuild_lua(s, &read);
                None
            }
        }
    }

    /// Whether the fence still waits for this ticket's order: its publish is under way (the
    /// fence first waits out the delivery timeout), or its message is queued, or a worker
    /// has it and has not committed its offset (it does once the ticket is settled).
    pub(crate) fn in_kafka(s: &State, t: u8) -> bool {
        let publishing = [s.gateways[t as usize], s.again[t as usize]]
            .iter()
            .any(|slot| {
                matches!(
                    slot,
                    Slot::Busy(Job {
                        op: Op::Publish,
                        ..
                    })
                )
            });
        publishing
            || s.kafka[t as usize] == Message::Queued
            || s.workers.iter().flatten().any(|job| job.ticket == t)
    }

    /// The reconcile holds the product's row lock: no settle or cancel commits meanwhile.
    pub(crate) fn product_locked(s: &State) -> bool {
        s.reconcile
            .is_some_and(|j| matches!(j.op, Op::Restore | Op::RebuildLua))
    }

    /// The product's Redis state is this run's: buys sell from it.
    pub fn trusted(s: &State) -> bool {
        s.loaded && s.meta.is_some_and(|m| m.run == s.run)
    }

    /// Whether an actor's next step may run now (a lock or the fence holds it back).
    pub(crate) fn may_step(&self, s: &State, who: Who) -> bool {
        let Some(job) = Self::job(s, who) else {
            return false;
        };
        match job.op {
            Op::Write | Op::WriteStuck => !Self::product_locked(s),
            Op::InsertExpired if self.fixes.expired_row_needs_no_order => !Self::product_locked(s),
            Op::RecordUnavailable => !Self::product_locked(s),
            Op::RebuildRead => {
                !(0..s.kafka.len() as u8).any(|t| s.fenced[t as usize] && Self::in_kafka(s, t))
            }
            _ => true,
        }
    }
}
