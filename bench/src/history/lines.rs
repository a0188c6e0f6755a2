//! What each kind of history line holds.

use serde::{Deserialize, Serialize};

/// A ticket's final state after the polling phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettledLine {
    pub ticket: String,
    pub user_id: u64,
    /// `confirmed`, `failed`, or `pending` when it did not settle in time.
    pub status: String,
    pub order_id: Option<u64>,
    pub reason: Option<String>,
    /// Units the order holds (1 in a history from before quantities).
    #[serde(default = "one")]
    pub quantity: u16,
    /// When the load tool received the answer that issued the ticket (its `202` if it saw
    /// one), µs since the epoch, client clock.
    #[serde(default)]
    pub answered_at_us: Option<u64>,
    /// When Redis reserved the unit, ms since the epoch, the gateway's clock (from the ticket).
    #[serde(default)]
    pub reserved_at_ms: Option<i64>,
    /// When the worker confirmed the ticket in Redis after the MySQL commit, ms since the
    /// epoch, the worker's clock (from the ticket).
    #[serde(default)]
    pub confirmed_at_ms: Option<i64>,
}

/// A request line as `audit` reads it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RequestLine {
    pub sent_at_us: u64,
    pub recv_at_us: u64,
    pub gateway: String,
    pub user_id: Option<u64>,
    /// Units the buy asked for (1 in a history from before quantities).
    #[serde(default = "one")]
    pub quantity: u16,
    pub status: Option<u16>,
    pub ticket: Option<String>,
    pub error: Option<String>,
}

fn one() -> u16 {
    1
}

/// How `load --until-sold-out` made sure the sale was over before it stopped offering fresh
/// buyers. A history without it is from a load that stopped at its first round of 409s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SaleEndCheck {
    /// `GET /admin/products/{id}`: no stock in Redis nor MySQL and nothing pending, twice in
    /// a row.
    AdminApi,
    /// No admin token: fresh buyers kept probing until none had bought for `--sold-out-quiet`.
    /// Pending orders are not seen.
    Probes,
}

impl SaleEndCheck {
    pub fn label(self) -> &'static str {
        match self {
            Self::AdminApi => "admin_api",
            Self::Probes => "probes",
        }
    }
}

/// The part of the summary's `sale_end` that `audit` needs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SaleEndLine {
    pub checked_by: SaleEndCheck,
}

/// The parts of the summary line `audit` needs; the rest is ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct SummaryLine {
    #[serde(default)]
    pub product: Option<u64>,
    #[serde(default)]
    pub until_sold_out: bool,
    #[serde(default)]
    pub sold_out_reached: Option<bool>,
    /// `--until-sold-out` loads that waited for the sale to be over.
    #[serde(default)]
    pub sale_end: Option<SaleEndLine>,
    /// `load --until-all-paid`: fresh buyers came until every unit was paid.
    #[serde(default)]
    pub until_all_paid: bool,
    /// `--until-all-paid`: whether the admin API showed every unit paid (`orders_db.paid ==
    /// initial_stock`) before the load gave up.
    #[serde(default)]
    pub all_paid_reached: Option<bool>,
}

/// One `POST /v1/orders/{ticket}/pay` of `load --pay-rate`, as sent and answered: a line of
/// kind `pay`. A `503` (or no answer) is retried with the same key, each try its own line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayLine {
    pub ticket: String,
    pub user_id: u64,
    /// The buyer's payment attempt: 1 for its first `Idempotency-Key`, 2 for its next...
    pub attempt: u32,
    pub idempotency_key: String,
    /// The HTTP status; `None` when no answer came.
    pub status: Option<u16>,
    /// `202`: the payment the gateway recorded.
    #[serde(default)]
    pub payment_id: Option<String>,
    /// `409`: the error code (`not_payable`, `payment_window_closed`, `payment_in_progress`);
    /// no answer: the transport error.
    #[serde(default)]
    pub error: Option<String>,
    /// `409 not_payable`: the ticket's state.
    #[serde(default)]
    pub state: Option<String>,
    /// Sent and answered, ms since the epoch, client clock.
    pub sent_at_ms: i64,
    pub at_ms: i64,
}

/// What a paying buyer of `load --pay-rate` last saw of its ticket when it stopped: a line of
/// kind `pay_end`, one per paying buyer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayEndLine {
    pub ticket: String,
    pub user_id: u64,
    /// `paid`, `cancelled`, `confirmed` (still unpaid when the buyer stopped looking, after
    /// its payment deadline and a grace), `failed`, `pending` (never confirmed while the buyer
    /// looked), or `unknown` (no poll answered).
    pub status: String,
    /// A cancelled ticket's reason (`payment_timeout`, `buyer_cancelled`), a failed one's.
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub pay_by_ms: Option<i64>,
    #[serde(default)]
    pub paid_at_ms: Option<i64>,
    #[serde(default)]
    pub cancelled_at_ms: Option<i64>,
    /// `Idempotency-Key`s the buyer used.
    pub attempts: u32,
    /// Of those, answered `202`.
    pub accepted: u32,
    /// When the buyer stopped, ms since the epoch, client clock.
    pub at_ms: i64,
}

/// One `POST /v1/orders/{ticket}/cancel` of `load --cancel-rate`, as sent and answered: a
/// line of kind `cancel`. A buyer who cancels tries from its `202` on, so its first tries may
/// be refused while the order is `pending`; each try is its own line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelLine {
    pub ticket: String,
    pub user_id: u64,
    /// The buyer's try: 1, 2...
    pub attempt: u32,
    /// The HTTP status; `None` when no answer came.
    pub status: Option<u16>,
    /// `409`: the error code (`not_cancellable`); another status: its error code, if any; no
    /// answer: the transport error.
    #[serde(default)]
    pub error: Option<String>,
    /// `200`: the ticket's status as answered (`cancelled`); `409`: the state that refused the
    /// cancel (`pending`, `paid`, `failed`...).
    #[serde(default)]
    pub state: Option<String>,
    /// `200`: the cancelled ticket's reason (`buyer_cancelled`).
    #[serde(default)]
    pub reason: Option<String>,
    /// Sent and answered, ms since the epoch, client clock.
    pub sent_at_ms: i64,
    pub at_ms: i64,
}

/// The lines `load --pay-rate` and `load --cancel-rate` add to a history. `parse` skips
/// them, so a reader of [`Line`]s reads such a history as before; `parse_with_payments`
/// returns them too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PaymentLine {
    Pay(PayLine),
    PayEnd(PayEndLine),
    Cancel(CancelLine),
}

/// One join attempt of `load --waiting-room`: a line of kind `wr_join`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrJoinLine {
    pub user_id: u64,
    pub gateway: String,
    /// `None`: no answer came.
    pub status: Option<u16>,
    /// `202`: the entry the gateway answered with.
    #[serde(default)]
    pub queue_id: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    /// Not `202`: the error code or the transport error.
    #[serde(default)]
    pub error: Option<String>,
    /// Sent and answered, ms since the epoch, client clock.
    pub sent_at_ms: i64,
    pub at_ms: i64,
}

/// A poll (or join) that answered `admitted` with an admission the buyer had not seen yet: a
/// line of kind `wr_admitted`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrAdmittedLine {
    pub user_id: u64,
    pub queue_id: String,
    /// The admission's expiry, ms since the epoch, gateway clock.
    pub admitted_until_ms: i64,
    pub gateway: String,
    pub at_ms: i64,
}

/// One buy of `load --waiting-room`, with the admission it carried: a line of kind `wr_buy`.
/// The same buy has its request line, with the same `sent_at_us`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrBuyLine {
    pub user_id: u64,
    /// The `Seckill-Admission` header sent; `None`: none was.
    #[serde(default)]
    pub admission_token: Option<String>,
    /// The expiry of the admission the token is for, as its poll answered it.
    #[serde(default)]
    pub admitted_until_ms: Option<i64>,
    pub sent_at_us: u64,
    pub gateway: String,
    pub status: Option<u16>,
    #[serde(default)]
    pub ticket: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

/// What a buyer of `load --waiting-room` last saw when it stopped: a line of kind `wr_end`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrEndLine {
    pub user_id: u64,
    #[serde(default)]
    pub queue_id: Option<String>,
    /// `bought`, `expired`, `sold_out`, `waiting` or `admitted` (the load's timeout came
    /// first), or `not_joined`.
    pub state: String,
    /// Polls answered, and polls that got no usable answer.
    pub polls: u64,
    pub poll_errors: u64,
    pub at_ms: i64,
}

/// The admin view's waiting room during `load --waiting-room`: a line of kind `wr_sample`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrSampleLine {
    /// When the answer came, ms since the epoch, client clock.
    pub at_ms: i64,
    /// `waiting_room.admitted`: admitted, not bought.
    pub admitted: u64,
    /// `None` while Redis has lost the product.
    pub stock_redis: Option<i64>,
    pub pending: i64,
    pub max_admitted_factor: f64,
}

/// The lines `load --waiting-room` adds to a history. `parse` and `parse_with_payments`
/// skip them; `parse_all` returns them too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WaitingRoomLine {
    WrJoin(WrJoinLine),
    WrAdmitted(WrAdmittedLine),
    WrBuy(WrBuyLine),
    WrEnd(WrEndLine),
    WrSample(WrSampleLine),
}

/// Every line of a history, by family.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllLines {
    pub lines: Vec<Line>,
    pub payments: Vec<PaymentLine>,
    pub waiting_room: Vec<WaitingRoomLine>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Line {
    Request(RequestLine),
    Settled(SettledLine),
    Summary(SummaryLine),
}
