//! The waiting room's scripts as types: `queue.lua` and `line.lua` (see
//! [`crate::store::script`]).

use super::{QueueLine, QueueOp, QueueState};
use crate::domain::UserId;
use crate::store::script::{self, RedisScript};
use crate::store::ProductKeys;
use anyhow::Context;
use redis::{Script, ScriptInvocation, Value};
use std::sync::LazyLock;

/// `queue.lua`: a join or poll of a product's waiting room, admitting whoever's turn has come.
pub struct Queue<'a> {
    /// The product's keys.
    pub keys: ProductKeys,
    pub user: UserId,
    pub op: QueueOp<'a>,
    pub now_ms: i64,
    /// How long an admission lasts (ms).
    pub admission_ttl_ms: u64,
}

impl RedisScript for Queue<'_> {
    const NAME: &'static str = "queue";
    type Reply = QueueState;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("queue.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        let k = &self.keys;
        let (kind, id, place, pow) = match self.op {
            QueueOp::Join {
                queue_id,
                place,
                pow,
            } => ("join", queue_id, place.min((1 << 50) - 1), pow),
            QueueOp::Poll => ("poll", "", 0, None),
            QueueOp::Tick => ("tick", "", 0, None),
        };
        let (nonce, pow_expires) = pow.map_or(("", 0), |p| (p.nonce, p.expires_at_ms));
        call.key(k.stock())
            .key(k.meta())
            .key(k.pending())
            .key(k.queue())
            .key(k.admitted())
            .key(k.queue_done())
            .key(k.queue_ids())
            .key(k.pow_used())
            .arg(self.now_ms)
            .arg(self.user.get())
            .arg(kind)
            .arg(id)
            .arg(place)
            .arg(self.admission_ttl_ms)
            .arg(nonce)
            .arg(pow_expires)
            .arg(super::pow::CHALLENGE_TTL_MS);
    }

    /// `{kind, ...}`: see `queue.lua` for each kind's fields.
    fn reply(value: Value) -> anyhow::Result<QueueState> {
        let raw: Vec<String> = script::parse(value)?;
        parse_state(&raw)
    }
}

/// `line.lua`: the whole line, in order, with the admissions so far.
pub struct Line {
    pub keys: ProductKeys,
}

impl RedisScript for Line {
    const NAME: &'static str = "line";
    type Reply = QueueLine;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("line.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        call.key(self.keys.meta()).key(self.keys.queue());
    }

    fn reply(value: Value) -> anyhow::Result<QueueLine> {
        let raw: Vec<String> = script::parse(value)?;
        parse_line(&raw)
    }
}

fn parse_line(raw: &[String]) -> anyhow::Result<QueueLine> {
    let num = |i: usize| -> anyhow::Result<u64> {
        raw.get(i)
            .with_context(|| format!("no field {i} in the line's head"))?
            .parse()
            .with_context(|| format!("field {i} of the line is no count"))
    };
    let (admitted_total, returned_total) = (num(0)?, num(1)?);
    let places = raw[2..]
        .iter()
        .enumerate()
        .map(|(ahead, u)| {
            let user = u.parse().with_context(|| format!("{u:?} is no user id"))?;
            Ok((user, ahead as u64))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(QueueLine {
        admitted_total,
        returned_total,
        places,
    })
}

fn parse_state(raw: &[String]) -> anyhow::Result<QueueState> {
    let field = |i: usize| -> anyhow::Result<String> {
        raw.get(i)
            .cloned()
            .with_context(|| format!("no field {i} in {raw:?}"))
    };
    // Numbers come as Redis integers or Lua's `tostring` of a number (maybe `1.5e+12`).
    let num = |i: usize| -> anyhow::Result<f64> {
        let f = field(i)?;
        f.parse::<f64>()
            .with_context(|| format!("field {i} of {raw:?} is no number"))
    };
    let flag = |i: usize| -> anyhow::Result<bool> {
        match field(i)?.as_str() {
            "1" => Ok(true),
            "0" => Ok(false),
            other => anyhow::bail!("field {i} is {other:?}, not 0 or 1"),
        }
    };
    // '' until the first window of measured admissions closed.
    let measured = |i: usize| -> anyhow::Result<Option<f64>> {
        Ok(match field(i)?.as_str() {
            "" => None,
            _ => Some(num(i)?),
        })
    };
    let kind = field(0)?;
    Ok(match kind.as_str() {
        "unknown_product" => QueueState::UnknownProduct,
        "no_waiting_room" => QueueState::NoWaitingRoom,
        "not_open" => QueueState::NotOpen,
        "none" => QueueState::NotJoined,
        "waiting" => QueueState::Waiting {
            queue_id: field(1)?,
            ahead: (num(2)? >= 0.0).then_some(num(2)? as u64),
            sold_out: flag(3)?,
            admit_per_sec: num(4)?,
            starts_at_ms: num(5)? as i64,
            measured_per_sec: measured(6)?,
            unlikely: flag(7)?,
            admitted_total: num(8)? as u64,
            returned_total: num(9)? as u64,
        },
        "tick" => QueueState::Room(super::RoomFigures {
            admitted_total: num(1)? as u64,
            sold_out: flag(2)?,
            admit_per_sec: num(3)?,
            starts_at_ms: num(4)? as i64,
            measured_per_sec: measured(5)?,
            stock: num(6)? as i64,
            in_flight: num(7)? as u64,
            admitted_now: num(8)? as u64,
            returned_total: num(9)? as u64,
            ended: flag(10)?,
        }),
        "admitted" => QueueState::Admitted {
            queue_id: field(1)?,
            until_ms: num(2)? as i64,
        },
        "expired" => QueueState::Expired {
            queue_id: field(1)?,
        },
        "bought" => QueueState::Bought {
            queue_id: field(1)?,
        },
        "ended" => QueueState::Ended {
            queue_id: field(1)?,
        },
        "sale_ended" => QueueState::SaleEnded,
        "challenge" => QueueState::Challenge {
            joins_per_sec: num(1)?,
            pow: crate::db::Pow {
                min_bits: num(2)? as u8,
                max_bits: num(3)? as u8,
                target_joins_per_sec: num(4)?,
            },
        },
        "challenge_used" => QueueState::ChallengeUsed,
        other => anyhow::bail!("queue script returned {other:?}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(raw: &[&str]) -> anyhow::Result<QueueState> {
        parse_state(&raw.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn a_line_gives_each_user_the_places_ahead() {
        let raw = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let line = parse_line(&raw(&["12", "1", "7", "3", "9"])).unwrap();
        assert_eq!((line.admitted_total, line.returned_total), (12, 1));
        assert_eq!(line.places.get(&7), Some(&0));
        assert_eq!(line.places.get(&9), Some(&2));
        assert_eq!(line.places.get(&8), None);
        assert!(parse_line(&raw(&["12"])).is_err());
        assert!(parse_line(&raw(&["12", "0", "x"])).is_err());
        assert!(parse_line(&raw(&["12", "0"])).unwrap().places.is_empty());
    }

    #[test]
    fn every_state_is_named_and_others_refused() {
        assert_eq!(state(&["none"]).unwrap(), QueueState::NotJoined);
        assert_eq!(
            state(&[
                "waiting",
                "q1",
                "-1",
                "0",
                "2.5",
                "1.764e+12",
                "",
                "0",
                "0",
                "0"
            ])
            .unwrap(),
            QueueState::Waiting {
                queue_id: "q1".into(),
                ahead: None,
                sold_out: false,
                admit_per_sec: 2.5,
                starts_at_ms: 1_764_000_000_000,
                measured_per_sec: None,
                unlikely: false,
                admitted_total: 0,
                returned_total: 0,
            }
        );
        assert_eq!(
            state(&["waiting", "q1", "7", "0", "2.5", "0", "1.5", "1", "30", "2"]).unwrap(),
            QueueState::Waiting {
                queue_id: "q1".into(),
                ahead: Some(7),
                sold_out: false,
                admit_per_sec: 2.5,
                starts_at_ms: 0,
                measured_per_sec: Some(1.5),
                unlikely: true,
                admitted_total: 30,
                returned_total: 2,
            }
        );
        assert_eq!(
            state(&["tick", "12", "0", "100", "5", "40", "3", "2", "9", "1", "1"]).unwrap(),
            QueueState::Room(crate::waiting_room::RoomFigures {
                admitted_total: 12,
                sold_out: false,
                admit_per_sec: 100.0,
                starts_at_ms: 5,
                measured_per_sec: Some(40.0),
                stock: 3,
                in_flight: 2,
                admitted_now: 9,
                returned_total: 1,
                ended: true,
            })
        );
        assert!(
            state(&["tick", "12", "0", "100", "5", "40", "3", "2", "9", "1"]).is_err(),
            "a tick says whether the sale ended"
        );
        assert_eq!(
            state(&["ended", "q1"]).unwrap(),
            QueueState::Ended {
                queue_id: "q1".into()
            }
        );
        assert_eq!(state(&["sale_ended"]).unwrap(), QueueState::SaleEnded);
        assert_eq!(
            state(&["challenge", "12.5", "4", "20", "50"]).unwrap(),
            QueueState::Challenge {
                joins_per_sec: 12.5,
                pow: crate::db::Pow {
                    min_bits: 4,
                    max_bits: 20,
                    target_joins_per_sec: 50.0
                }
            }
        );
        assert!(state(&["challenge", "12.5", "4", "20"]).is_err());
        assert_eq!(
            state(&["challenge_used"]).unwrap(),
            QueueState::ChallengeUsed
        );
        assert!(state(&["waiting", "q1", "-1", "0", "2.5", "1.764e+12", "", "0"]).is_err());
        assert_eq!(
            state(&["admitted", "q1", "900"]).unwrap(),
            QueueState::Admitted {
                queue_id: "q1".into(),
                until_ms: 900
            }
        );
        assert!(state(&["admitted", "q1"]).is_err());
        assert!(state(&["waiting", "q1", "3", "yes", "1", "0"]).is_err());
        assert!(state(&["left"]).is_err());
        assert!(state(&[]).is_err());
    }
}
