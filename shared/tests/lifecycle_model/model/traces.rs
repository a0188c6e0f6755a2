//! Traces in words: each action, what it changed in the stores and answers, and a state's
//! summary.

use super::state::{Action, Answer, Job, Message, Op, Seckill, State, Who};
use seckill_shared::lifecycle;
use stateright::{Model, Path};
use std::fmt::Write as _;

impl Seckill {
    // ---- traces ------------------------------------------------------------------------

    fn who_name(&self, s: &State, who: Who) -> String {
        let job_owner = || Self::job(s, who).map(|j| self.owner(j.ticket) + 1);
        match who {
            Who::Gateway(t) => format!("gateway (buyer u{})", self.owner(t) + 1),
            Who::Again(t) => format!("gateway (buyer u{}, again)", self.owner(t) + 1),
            Who::Worker(w) => format!("worker w{}", w + 1),
            Who::Sweeper(w) => format!("sweeper s{}", w + 1),
            Who::Expiry => "expiry".to_string(),
            Who::Canceller(_) => format!("buyer u{} (cancel)", job_owner().unwrap_or(0)),
            Who::Recovery => "recovery".to_string(),
            Who::Payer(p) => format!(
                "buyer u{} (pay, device {})",
                job_owner().unwrap_or(0),
                p + 1
            ),
            Who::Provider => "provider".to_string(),
            Who::Reconcile => "reconcile".to_string(),
        }
    }

    /// One step of a trace, in words: who, what, and what changed in the stores.
    fn describe(&self, before: &State, action: Action, after: &State) -> String {
        let t_ = |t: u8| format!("t{}", t + 1);
        let (who, what, ticket) = match action {
            Action::Buy(t) => (
                format!("buyer u{}", self.owner(t) + 1),
                format!("buys {}: reserve.lua", t_(t)),
                t,
            ),
            Action::BuyAgain(t) => (
                format!("buyer u{}", self.owner(t) + 1),
                format!(
                    "buys again, holding {}: reads it pending, no location",
                    t_(t)
                ),
                t,
            ),
            Action::Step(who) => {
                let job = Self::job(before, who).unwrap();
                let mut what = format!("{} {}", job.label(), t_(job.ticket));
                // A MySQL transaction of a settle: say what it decided.
                if let Some(Job {
                    op: Op::Follow(outcome),
                    ..
                }) = Self::job(after, who)
                {
                    write!(what, " -> {}", outcome.name()).unwrap();
                }
                (self.who_name(before, who), what, job.ticket)
            }
            Action::PublishFails {
                who,
                ticket,
                reached,
            } => (
                self.who_name(before, who),
                format!(
                    "publish {} fails ({})",
                    t_(ticket),
                    if reached {
                        "the message reached Kafka all the same"
                    } else {
                        "no message"
                    }
                ),
                ticket,
            ),
            Action::Crash(who) => {
                let job = Self::job(before, who).unwrap();
                (
                    self.who_name(before, who),
                    format!("crashes before {} {}", job.label(), t_(job.ticket)),
                    job.ticket,
                )
            }
            Action::Deliver { worker, ticket } => (
                format!("worker w{}", worker + 1),
                format!("gets {}'s message: claim.lua", t_(ticket)),
                ticket,
            ),
            Action::Redeliver { worker, ticket } => (
                format!("worker w{}", worker + 1),
                format!(
                    "gets {}'s message again (redelivery): claim.lua",
                    t_(ticket)
                ),
                ticket,
            ),
            Action::LoseMessage(t) => {
                ("Kafka".to_string(), format!("loses {}'s message", t_(t)), t)
            }
            Action::Sweep { sweeper, ticket } => {
                let job = after.sweepers[sweeper as usize].unwrap();
                let status = before.records[ticket as usize].unwrap().status.name();
                (
                    format!("sweeper s{}", sweeper + 1),
                    format!(
                        "reads {} {status}: will {}",
                        t_(ticket),
                        lifecycle::transition(job.transition).name
                    ),
                    ticket,
                )
            }
            Action::Cancel { who, ticket } => (
                match who {
                    Who::Canceller(_) => format!("buyer u{} (cancel)", self.owner(ticket) + 1),
                    _ => self.who_name(before, who),
                },
                format!("MySQL tx (cancel) {}", t_(ticket)),
                ticket,
            ),
            Action::Recover(t) => ("recovery".to_string(), format!("cancel.lua {}", t_(t)), t),
            Action::Pay { payer, ticket } => (
                format!(
                    "buyer u{} (pay, device {})",
                    self.owner(ticket) + 1,
                    payer + 1
                ),
                if self.fixes.pay_locks_order {
                    format!("MySQL tx (pay) {}", t_(ticket))
                } else {
                    format!("reads {}: confirmed, no payment in progress", t_(ticket))
                },
                ticket,
            ),
            Action::ProviderAnswers { payment, success } => (
                "provider".to_string(),
                format!(
                    "{} payment #{}: MySQL tx (callback)",
                    if success { "charges" } else { "declines" },
                    payment + 1
                ),
                before.payments[payment as usize].ticket,
            ),
            Action::RedisLoses => ("Redis".to_string(), "restarts with no data".to_string(), 0),
            Action::Snapshot => ("Redis".to_string(), "writes a snapshot".to_string(), 0),
            Action::RollBack => (
                "Redis".to_string(),
                "restarts from its snapshot".to_string(),
                0,
            ),
            Action::FindOld => (
                "gateway or sweeper".to_string(),
                "reserve.lua / epoch.lua: the state is another run's".to_string(),
                0,
            ),
            Action::Rebuild => (
                "reconcile".to_string(),
                "finds the product lost: fence (waits for the queued messages)".to_string(),
                0,
            ),
        };
        let changes = changes(before, after);
        if changes.is_empty() {
            let status = before.records[ticket as usize].map_or("no record".to_string(), |r| {
                format!("record {}", r.status.name())
            });
            format!("{who}: {what} => nothing changes ({} {status})", t_(ticket))
        } else {
            format!("{who}: {what} => {}", changes.join(", "))
        }
    }

    /// A counterexample to `property` as numbered lines, one per step. The checker may
    /// have gone on from the first state that breaks the property; the trace stops there.
    pub fn explain(&self, path: &Path<State, Action>, property: &str) -> String {
        let holds = self
            .properties()
            .into_iter()
            .find(|p| p.name == property)
            .expect("a property of this model")
            .condition;
        let mut steps = path.clone().into_vec();
        if let Some(first) = steps.iter().position(|(s, _)| !holds(self, s)) {
            steps.truncate(first + 1);
        }
        let mut out = String::new();
        for (n, pair) in steps.windows(2).enumerate() {
            let (before, action) = &pair[0];
            let after = &pair[1].0;
            let line = self.describe(before, action.unwrap(), after);
            writeln!(out, "{:3}. {line}", n + 1).unwrap();
        }
        let last = &steps.last().expect("a path has a state").0;
        writeln!(out, "     end: {}", self.summary(last)).unwrap();
        out
    }

    /// The stores of a state, in one line.
    pub fn summary(&self, s: &State) -> String {
        let mut redis = vec![if !s.loaded {
            "no stock key".to_string()
        } else if !Self::trusted(s) {
            format!("stock {} (another run's)", s.redis_stock)
        } else {
            format!("stock {}", s.redis_stock)
        }];
        for (u, t) in s.buyers.iter().enumerate() {
            if let Some(t) = t {
                redis.push(format!("buyers[u{}]=t{}", u + 1, t + 1));
            }
        }
        let mut mysql = vec![format!("stock {}", s.mysql_stock)];
        for t in self.tickets() {
            let i = t as usize;
            if let Some(r) = s.records[i] {
                redis.push(format!("t{} {}", t + 1, r.status.name()));
            }
            if let Some(o) = s.orders[i] {
                mysql.push(format!("t{} order {}", t + 1, o.status.name()));
            }
            if let Some(f) = s.failed[i] {
                mysql.push(format!("t{} failed {}", t + 1, f.name()));
            }
        }
        for (p, payment) in s.payments.iter().enumerate() {
            mysql.push(format!(
                "payment #{} t{} {}",
                p + 1,
                payment.ticket + 1,
                payment.status.as_str()
            ));
        }
        let answers: Vec<String> = (0..s.answers.len())
            .filter_map(|i| match s.answers[i] {
                Some(Answer::Accepted) => Some(format!("t{} 202", i + 1)),
                Some(Answer::Unavailable) => Some(format!("t{} 503", i + 1)),
                Some(Answer::Both) => Some(format!("t{} 202 and 503", i + 1)),
                None => None,
            })
            .collect();
        format!(
            "Redis [{}]; MySQL [{}]; answers [{}]",
            redis.join(", "),
            mysql.join(", "),
            answers.join(", ")
        )
    }
}

/// What changed in the stores and answers between two states, in words.
fn changes(a: &State, b: &State) -> Vec<String> {
    let mut out = Vec::new();
    let t_ = |i: usize| format!("t{}", i + 1);
    if a.run != b.run {
        out.push(format!("Redis run {} -> {}", a.run + 1, b.run + 1));
    }
    if a.loaded && !b.loaded {
        out.push("stock key dropped".to_string());
    }
    if !a.loaded && b.loaded {
        out.push("product loaded".to_string());
    }
    if a.snapshot.is_none() && b.snapshot.is_some() {
        out.push("snapshot taken".to_string());
    }
    if a.redis_stock != b.redis_stock {
        out.push(format!(
            "Redis stock {} -> {}",
            a.redis_stock, b.redis_stock
        ));
    }
    for (u, (x, y)) in a.buyers.iter().zip(&b.buyers).enumerate() {
        match y {
            _ if x == y => {}
            Some(t) => out.push(format!("buyers[u{}] = {}", u + 1, t_(*t as usize))),
            None => out.push(format!("buyers[u{}] freed", u + 1)),
        }
    }
    for (i, (x, y)) in a.records.iter().zip(&b.records).enumerate() {
        match (x, y) {
            (None, Some(r)) => out.push(format!("record {} {}", t_(i), r.status.name())),
            (Some(x), Some(y)) if x.status != y.status => out.push(format!(
                "record {} {} -> {}",
                t_(i),
                x.status.name(),
                y.status.name()
            )),
            (Some(x), Some(y)) if x.located != y.located => {
                out.push(format!("record {} located", t_(i)))
            }
            (Some(_), None) => out.push(format!("record {} gone", t_(i))),
            _ => {}
        }
    }
    if a.mysql_stock != b.mysql_stock {
        out.push(format!(
            "MySQL stock {} -> {}",
            a.mysql_stock, b.mysql_stock
        ));
    }
    for (i, (x, y)) in a.orders.iter().zip(&b.orders).enumerate() {
        match (x, y) {
            (None, Some(y)) => out.push(format!("order {} inserted ({})", t_(i), y.status.name())),
            (Some(x), Some(y)) => {
                if x.status != y.status {
                    out.push(format!(
                        "order {} {} -> {}",
                        t_(i),
                        x.status.name(),
                        y.status.name()
                    ));
                }
                if x.restore_due != y.restore_due {
                    out.push(format!(
                        "order {} restore_due = {}",
                        t_(i),
                        y.restore_due as u8
                    ));
                }
            }
            _ => {}
        }
    }
    for (i, (x, y)) in a.failed.iter().zip(&b.failed).enumerate() {
        if let (None, Some(r)) = (x, y) {
            out.push(format!("failed_tickets {} {}", t_(i), r.name()));
        }
    }
    for (p, y) in b.payments.iter().enumerate() {
        match a.payments.get(p) {
            None => out.push(format!(
                "payment #{} of {} {}",
                p + 1,
                t_(y.ticket as usize),
                y.status.as_str()
            )),
            Some(x) if x.status != y.status => out.push(format!(
                "payment #{} {} -> {}",
                p + 1,
                x.status.as_str(),
                y.status.as_str()
            )),
            _ => {}
        }
    }
    for (i, (x, y)) in a.kafka.iter().zip(&b.kafka).enumerate() {
        match y {
            _ if x == y => {}
            Message::Queued => out.push(format!("Kafka {} queued", t_(i))),
            Message::Lost => out.push(format!("Kafka lost {}", t_(i))),
            Message::Unpublished | Message::Delivered => {}
        }
    }
    for (i, (x, y)) in a.answers.iter().zip(&b.answers).enumerate() {
        match (x, y) {
            (None, Some(Answer::Accepted)) => out.push(format!("answers 202 for {}", t_(i))),
            (None, Some(Answer::Unavailable)) => out.push(format!("answers 503 for {}", t_(i))),
            (Some(Answer::Accepted), Some(Answer::Both)) => {
                out.push(format!("answers 503 for {} (after a 202)", t_(i)))
            }
            (Some(Answer::Unavailable), Some(Answer::Both)) => {
                out.push(format!("answers 202 for {} (after a 503)", t_(i)))
            }
            _ => {}
        }
    }
    out
}
