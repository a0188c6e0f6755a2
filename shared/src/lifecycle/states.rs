//! The model's names: who acts, the states of a ticket in each store, and where a step runs.

/// Who takes a step.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "lowercase")]
pub enum Actor {
    /// The gateway, serving one buyer's `buy` request.
    Gateway,
    /// A Kafka consumer settling order messages.
    Worker,
    /// The sweeper: any number of them, each reads a ticket record and then acts on what it read.
    Sweeper,
    /// The expiry task: cancels an order that was not paid by its deadline.
    Expiry,
    /// The buyer, through the API (cancel, pay).
    Buyer,
    /// The `restore_due` recovery: finishes a cancel whose actor stopped after its MySQL commit.
    Recovery,
    /// The payment provider's callback (success or decline of one charge).
    Provider,
    /// Whoever rebuilds a product's Redis state from MySQL: a gateway, worker or sweeper
    /// that found it lost, the admin's reconcile, or a preload of a product already on sale.
    Reconcile,
}

impl Actor {
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// Why a ticket failed. Kept in the Redis record and in MySQL's `failed_tickets`: the
/// reasons of [`crate::FailureReason`] that the model follows, with the same text.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "snake_case")]
pub enum FailReason {
    /// Kafka refused the message; the gateway released the unit and answered 503.
    KafkaUnavailable,
    /// Reserved, but the order never reached a worker in time (no 202 was given).
    Expired,
    /// The gateway's sync mode found no order for a ticket whose own settle failed ("settle
    /// stuck"; the model's old-code variant also lets the sweeper take it).
    Lost,
    /// MySQL had no unit left for a reservation Redis had made.
    OutOfStock,
    /// The buyer already holds a live order.
    DuplicateUser,
}

impl FailReason {
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The code's reason of the same name.
    pub fn code(self) -> crate::FailureReason {
        match self {
            FailReason::KafkaUnavailable => crate::FailureReason::KafkaUnavailable,
            FailReason::Expired => crate::FailureReason::Expired,
            FailReason::Lost => crate::FailureReason::Lost,
            FailReason::OutOfStock => crate::FailureReason::OutOfStock,
            FailReason::DuplicateUser => crate::FailureReason::DuplicateUser,
        }
    }

    /// Whether a buyer who was answered 202 may be told this reason in the end. `lost` and
    /// `expired` are the system's own failures: after a 202 they break the promise.
    pub fn may_follow_a_202(self) -> bool {
        matches!(self, FailReason::OutOfStock | FailReason::DuplicateUser)
    }
}

/// The status in a ticket's Redis record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordStatus {
    /// Reserved by `reserve.lua`; the order is on its way to (or in) Kafka.
    Pending,
    /// Claimed by a worker (or a sweeper) that is writing it to MySQL.
    Processing,
    Confirmed,
    Paid,
    Cancelled,
    Failed(FailReason),
}

impl RecordStatus {
    /// Whether a ticket in this status holds one unit of stock (taken from Redis's counter by
    /// `reserve.lua` and not given back yet).
    pub fn holds_unit(self) -> bool {
        matches!(
            self,
            RecordStatus::Pending
                | RecordStatus::Processing
                | RecordStatus::Confirmed
                | RecordStatus::Paid
        )
    }

    /// Whether some actor still has to move this ticket on (a worker or the sweeper).
    pub fn in_flight(self) -> bool {
        matches!(self, RecordStatus::Pending | RecordStatus::Processing)
    }

    pub fn name(self) -> String {
        match self {
            RecordStatus::Pending => "pending".into(),
            RecordStatus::Processing => "processing".into(),
            RecordStatus::Confirmed => "confirmed".into(),
            RecordStatus::Paid => "paid".into(),
            RecordStatus::Cancelled => "cancelled".into(),
            RecordStatus::Failed(r) => format!("failed({})", r.name()),
        }
    }
}

/// The status of a MySQL `orders` row.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "lowercase")]
pub enum OrderStatus {
    Confirmed,
    Paid,
    Cancelled,
}

impl OrderStatus {
    /// Whether the order holds one unit of MySQL's stock.
    pub fn holds_unit(self) -> bool {
        matches!(self, OrderStatus::Confirmed | OrderStatus::Paid)
    }

    /// The Redis record status that agrees with this order.
    pub fn record(self) -> RecordStatus {
        match self {
            OrderStatus::Confirmed => RecordStatus::Confirmed,
            OrderStatus::Paid => RecordStatus::Paid,
            OrderStatus::Cancelled => RecordStatus::Cancelled,
        }
    }

    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// The status of one MySQL `payments` row (one charge attempt of an order): the code's own.
pub use crate::payments::PaymentStatus;

/// What a settle's MySQL transaction decided for a ticket; Redis follows with the script of
/// [`Outcome::redis_script`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    Confirmed,
    Paid,
    Cancelled,
    Failed(FailReason),
}

impl Outcome {
    pub fn redis_script(self) -> &'static str {
        match self {
            Outcome::Confirmed => "confirm.lua",
            Outcome::Paid => "paid.lua",
            Outcome::Cancelled => "cancel.lua",
            Outcome::Failed(FailReason::OutOfStock) => "compensate.lua 'heal'",
            Outcome::Failed(_) => "compensate.lua 'any'",
        }
    }

    pub fn name(self) -> String {
        match self {
            Outcome::Confirmed => "Confirmed".into(),
            Outcome::Paid => "Paid".into(),
            Outcome::Cancelled => "Cancelled".into(),
            Outcome::Failed(r) => format!("Failed({})", r.name()),
        }
    }
}

/// Where a step reads and writes.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::Display, strum::VariantArray,
)]
pub enum Store {
    Redis,
    #[strum(serialize = "MySQL")]
    MySql,
    Kafka,
    /// The HTTP answer to the buyer.
    #[strum(serialize = "answer")]
    Answer,
}

impl Store {
    pub fn name(self) -> &'static str {
        self.into()
    }
}
