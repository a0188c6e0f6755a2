//! The model for stateright: its initial states, the actions possible in a state, and the
//! state each one leads to.

use super::properties::properties;
use super::state::{Action, Answer, Job, Message, Meta, Op, RedisImage, Seckill, Slot, State, Who};
use seckill_shared::lifecycle::{OrderStatus, PaymentStatus, RecordStatus, TransitionId};
use stateright::{Model, Property};

impl Model for Seckill {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let b = &self.bounds;
        let tickets = b.owners.len();
        let buyers = b.owners.iter().max().map_or(0, |&u| u as usize + 1);
        vec![State {
            redis_stock: b.units as i8,
            loaded: true,
            meta: Some(Meta {
                run: 0,
                loaded_at: 0,
            }),
            run: 0,
            snapshot: None,
            buyers: vec![None; buyers],
            records: vec![None; tickets],
            mysql_stock: b.units,
            orders: vec![None; tickets],
            failed: vec![None; tickets],
            payments: Vec::new(),
            kafka: vec![Message::Unpublished; tickets],
            answers: vec![None; tickets],
            created: vec![0; tickets],
            clock: 0,
            gateways: vec![Slot::Free; tickets],
            again: vec![Slot::Free; tickets],
            workers: vec![None; b.workers as usize],
            sweepers: vec![None; b.sweepers as usize],
            expiry: None,
            cancellers: vec![Slot::Free; b.buyer_cancels as usize],
            recovery: None,
            payers: vec![Slot::Free; b.pay_requests as usize],
            provider: None,
            reconcile: None,
            fenced: vec![false; tickets],
            rebuild_read: None,
            crashed: 0,
            redeliveries_left: b.redeliveries,
            losses_left: b.lost_messages,
            kafka_failures_left: b.kafka_failures,
            redis_losses_left: b.redis_losses,
            redis_rollbacks_left: b.redis_rollbacks,
            buys_again_left: b.buys_again,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        // Buyers buy (a refused reserve changes nothing, so it is left out).
        for t in self.tickets() {
            if s.gateways[t as usize] == Slot::Free
                && Self::trusted(s)
                && s.redis_stock >= self.qty(t) as i8
                && s.buyers[self.owner(t) as usize].is_none()
            {
                actions.push(Action::Buy(t));
            }
            // A buy again: the buyer holds a pending ticket that its gateway never answered
            // nor located (read as the action starts): that gateway died, or its publish
            // failed and it has not released the ticket yet (a pause longer than the buy
            // again's wait).
            let held = s.records[t as usize].is_some_and(|r| {
                r.status == RecordStatus::Pending && !r.located && Self::trusted(s)
            });
            let first_over_or_failing = match s.gateways[t as usize] {
                Slot::Done => true,
                Slot::Busy(job) => job.op == Op::Release,
                Slot::Free => false,
            };
            if s.buys_again_left > 0
                && held
                && first_over_or_failing
                && s.again[t as usize] == Slot::Free
                && s.answers[t as usize].is_none()
            {
                actions.push(Action::BuyAgain(t));
            }
        }
        // Actors in the middle of a transition take their next step, or crash.
        for who in self.busy(s) {
            if self.may_step(s, who) {
                actions.push(Action::Step(who));
            }
            // A publish may fail, the message reaching Kafka or not.
            if let Who::Gateway(ticket) | Who::Again(ticket) = who {
                let publishing = Self::job(s, who).is_some_and(|job| job.op == Op::Publish);
                if publishing && s.kafka_failures_left > 0 {
                    for reached in [false, true] {
                        actions.push(Action::PublishFails {
                            who,
                            ticket,
                            reached,
                        });
                    }
                }
            }
            if self.can_crash(s, who) {
                actions.push(Action::Crash(who));
            }
        }
        // Kafka. Idle workers are alike, so only the first idle one is offered a message.
        if let Some(worker) = s.workers.iter().position(Option::is_none) {
            let worker = worker as u8;
            for ticket in self.tickets() {
                match s.kafka[ticket as usize] {
                    Message::Queued => actions.push(Action::Deliver { worker, ticket }),
                    Message::Delivered if s.redeliveries_left > 0 => {
                        actions.push(Action::Redeliver { worker, ticket })
                    }
                    _ => {}
                }
            }
        }
        if s.losses_left > 0 {
            for t in self.tickets() {
                if s.kafka[t as usize] == Message::Queued {
                    actions.push(Action::LoseMessage(t));
                }
            }
        }
        // The sweeper (the first idle one, as for workers).
        if let Some(sweeper) = s.sweepers.iter().position(Option::is_none) {
            for ticket in self.tickets() {
                if self.sweep_job(s, ticket).is_some() {
                    actions.push(Action::Sweep {
                        sweeper: sweeper as u8,
                        ticket,
                    });
                }
            }
        }
        // Cancels: the expiry, and the buyers' cancel requests (each of its own order).
        // (Their MySQL transaction takes the product's row lock.)
        let confirmed: Vec<u8> = self
            .tickets()
            .filter(|&t| Self::order_confirmed(s, t) && !Self::product_locked(s))
            .collect();
        if self.bounds.expiry && s.expiry.is_none() {
            for &ticket in &confirmed {
                actions.push(Action::Cancel {
                    who: Who::Expiry,
                    ticket,
                });
            }
        }
        if let Some(c) = s.cancellers.iter().position(|c| *c == Slot::Free) {
            for &ticket in &confirmed {
                actions.push(Action::Cancel {
                    who: Who::Canceller(c as u8),
                    ticket,
                });
            }
        }
        if s.recovery.is_none() {
            for t in self.tickets() {
                if s.orders[t as usize].is_some_and(|o| o.restore_due) {
                    actions.push(Action::Recover(t));
                }
            }
        }
        // Payments.
        if let Some(payer) = s.payers.iter().position(|p| *p == Slot::Free) {
            for &ticket in &confirmed {
                let in_progress = s
                    .payments
                    .iter()
                    .any(|p| p.ticket == ticket && p.status.in_progress());
                if !in_progress {
                    actions.push(Action::Pay {
                        payer: payer as u8,
                        ticket,
                    });
                }
            }
        }
        // Redis's faults, and the healing.
        if s.redis_losses_left > 0 {
            actions.push(Action::RedisLoses);
        }
        if s.redis_rollbacks_left > 0 {
            actions.push(match s.snapshot {
                None => Action::Snapshot,
                Some(_) => Action::RollBack,
            });
        }
        if s.loaded && !Self::trusted(s) {
            actions.push(Action::FindOld);
        }
        if !s.loaded && s.reconcile.is_none() {
            actions.push(Action::Rebuild);
        }
        if s.provider.is_none() {
            for (p, payment) in s.payments.iter().enumerate() {
                if payment.status == PaymentStatus::Processing {
                    for success in [true, false] {
                        actions.push(Action::ProviderAnswers {
                            payment: p as u8,
                            success,
                        });
                    }
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Buy(t) => {
                self.reserve(&mut s, t);
                s.gateways[t as usize] = Slot::Busy(Job {
                    transition: TransitionId::Buy,
                    ticket: t,
                    op: Op::Publish,
                });
            }
            Action::BuyAgain(t) => {
                s.buys_again_left -= 1;
                s.again[t as usize] = Slot::Busy(Job {
                    transition: TransitionId::BuyAgain,
                    ticket: t,
                    op: Op::Publish,
                });
            }
            Action::Step(who) => {
                let job = Self::job(&s, who).unwrap();
                let next = self.run(&mut s, job);
                Self::set_job(&mut s, who, next);
            }
            Action::PublishFails {
                who,
                ticket,
                reached,
            } => {
                s.kafka_failures_left -= 1;
                if reached {
                    s.kafka[ticket as usize] = Message::Queued;
                }
                let job = Self::job(&s, who).unwrap();
                let again = job.transition == TransitionId::BuyAgain;
                if again && !self.fixes.buy_again_failure_released {
                    // Today: 503, and the ticket is left pending for the sweeper.
                    s.answer(ticket as usize, Answer::Unavailable);
                    Self::set_job(&mut s, who, None);
                } else {
                    Self::set_job(&mut s, who, job.then(Op::Release));
                }
            }
            Action::Crash(who) => {
                let job = Self::job(&s, who).unwrap();
                // A crashed worker never committed its Kafka offset: the message comes back.
                if matches!(who, Who::Worker(_))
                    && s.kafka[job.ticket as usize] == Message::Delivered
                {
                    s.kafka[job.ticket as usize] = Message::Queued;
                }
                if who == Who::Reconcile {
                    s.rebuild_read = None;
                }
                s.crashed |= 1 << who.actor() as u8;
                Self::set_job(&mut s, who, None);
            }
            Action::Deliver { worker, ticket } | Action::Redeliver { worker, ticket } => {
                if let Action::Redeliver { .. } = action {
                    s.redeliveries_left -= 1;
                }
                s.kafka[ticket as usize] = Message::Delivered;
                let claim = Job {
                    transition: TransitionId::Settle,
                    ticket,
                    op: Op::Claim,
                };
                s.workers[worker as usize] = self.run(&mut s, claim);
            }
            Action::LoseMessage(t) => {
                s.losses_left -= 1;
                s.kafka[t as usize] = Message::Lost;
            }
            Action::Sweep { sweeper, ticket } => {
                s.sweepers[sweeper as usize] = self.sweep_job(&s, ticket);
            }
            Action::Cancel { who, ticket } => {
                let order = s.orders[ticket as usize].as_mut().unwrap();
                order.status = OrderStatus::Cancelled;
                order.restore_due = true;
                s.mysql_stock += self.qty(ticket);
                let job = Job {
                    transition: TransitionId::Cancel,
                    ticket,
                    op: Op::CancelLua,
                };
                Self::set_job(&mut s, who, Some(job));
            }
            Action::Recover(ticket) => {
                let job = Job {
                    transition: TransitionId::RestoreDue,
                    ticket,
                    op: Op::CancelLua,
                };
                s.recovery = self.run(&mut s, job);
            }
            Action::Pay { payer, ticket } => {
                let job = Job {
                    transition: TransitionId::Pay,
                    ticket,
                    op: Op::InsertPayment,
                };
                // Fixed: the check and the insert are one transaction; today the insert is a
                // later step, after which the check may no longer hold.
                let job = if self.fixes.pay_locks_order {
                    self.run(&mut s, job)
                } else {
                    Some(job)
                };
                Self::set_job(&mut s, Who::Payer(payer), job);
            }
            Action::ProviderAnswers { payment, success } => {
                let p = &mut s.payments[payment as usize];
                let ticket = p.ticket;
                if !success {
                    p.status = PaymentStatus::Declined;
                } else if Self::order_confirmed(&s, ticket) {
                    s.payments[payment as usize].status = PaymentStatus::Succeeded;
                    s.orders[ticket as usize].as_mut().unwrap().status = OrderStatus::Paid;
                    s.provider = Some(Job {
                        transition: TransitionId::PaymentCallback,
                        ticket,
                        op: Op::PaidLua,
                    });
                } else {
                    s.payments[payment as usize].status = PaymentStatus::RefundDue;
                }
            }
            Action::RedisLoses => {
                s.redis_losses_left -= 1;
                s.run += 1;
                s.redis_stock = 0;
                s.loaded = false;
                s.meta = None;
                s.buyers.iter_mut().for_each(|b| *b = None);
                s.records.iter_mut().for_each(|r| *r = None);
            }
            Action::Snapshot => {
                s.snapshot = Some(RedisImage {
                    stock: s.redis_stock,
                    loaded: s.loaded,
                    meta: s.meta,
                    buyers: s.buyers.clone(),
                    records: s.records.clone(),
                });
            }
            Action::RollBack => {
                s.redis_rollbacks_left -= 1;
                s.run += 1;
                let image = s.snapshot.clone().expect("a snapshot to restart from");
                s.redis_stock = image.stock;
                s.loaded = image.loaded;
                s.meta = image.meta;
                s.buyers = image.buyers;
                s.records = image.records;
            }
            Action::FindOld => s.loaded = false,
            Action::Rebuild => {
                s.fenced = self.tickets().map(|t| Self::in_kafka(&s, t)).collect();
                s.reconcile = Some(Job {
                    transition: TransitionId::Rebuild,
                    ticket: 0,
                    op: Op::RebuildRead,
                });
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties()
    }
}
