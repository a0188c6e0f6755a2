//! The HTTP API's wire types: every body and query the gateway accepts or answers, defined
//! once. The gateway builds its answers and its OpenAPI document from them (`utoipa`); the
//! load tool and the system tests read the answers with them, so no client re-declares them.
//!
//! [`schema`] holds the limits a value has beyond its JSON type (for `schema_with`), and
//! [`whole`] reads whole numbers the way the document's `integer` means them.

pub mod admin;
pub mod dashboard;
pub mod error;
pub mod health;
pub mod order;
pub mod sale;
pub mod schema;
pub mod waiting_room;
pub mod whole;

pub use admin::{
    BucketView, Created, NewPow, NewProduct, NewWaitingRoom, OrdersByState, PageQuery, PowView,
    Preloaded, ProductPage, ProductView, Reconciled, SaleState, WaitingRoomView,
};
pub use dashboard::{Overview, OverviewQuery, ProcessView, Series};
pub use error::ErrorBody;
pub use health::{Dependencies, DependencyCheck, Health, HealthStatus, Live, LiveStatus};
pub use order::{BuyRequest, CallbackBody, MyOrderQuery, PaymentBody, TicketBody};
pub use sale::SaleView;
pub use waiting_room::{PowChallenge, QueueBody};

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;
    use serde::Serialize;

    /// What the gateway writes, a client reads back the same.
    fn round_trip<T: Serialize + DeserializeOwned + std::fmt::Debug>(value: &T) -> T {
        let json = serde_json::to_string(value).unwrap();
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}: {e}"))
    }

    #[test]
    fn answers_read_back_as_written() {
        let ticket = crate::Ticket::parse("42-9f86d081884c7d659a2feaa0c55ad015").unwrap();
        let body = TicketBody::pending(&ticket, crate::UserId::new(7).unwrap(), 1);
        assert_eq!(round_trip(&body), body);
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"ticket": ticket.as_str(), "status": "pending", "product_id": 42, "user_id": 7, "quantity": 1})
        );
        let queue = QueueBody {
            queue_id: "0".repeat(32),
            state: "admitted".into(),
            position: None,
            ahead: Some(0),
            estimated_wait_ms: None,
            unlikely: false,
            refresh_after_ms: 300,
            admission_token: Some("t".into()),
            admitted_until_ms: Some(1),
        };
        assert_eq!(round_trip(&queue).admission_token.as_deref(), Some("t"));
        let health = Health {
            status: HealthStatus::Degraded,
            dependencies: Dependencies {
                redis: DependencyCheck::up(),
                mysql: DependencyCheck::down("unreachable", Some("detail".into())),
                kafka: DependencyCheck::up(),
                zookeeper: DependencyCheck::up(),
            },
        };
        let back = round_trip(&health);
        assert_eq!(back.status, HealthStatus::Degraded);
        assert_eq!(back.dependencies.up()[1], ("mysql", false));
        // The detail is for the log and the admin only: it never goes on the wire.
        assert!(!serde_json::to_string(&health).unwrap().contains("detail"));
    }
}
