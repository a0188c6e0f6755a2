//! One error of each kind, for the tests that hold the document to the code.

use super::ApiError;
use seckill_shared::TicketStatus;

/// One error of each kind. Adding a variant to [`ApiError`] breaks the build here until it is
/// listed, so the tests that check the document against every kind see the new one.
pub(crate) fn every_kind() -> Vec<ApiError> {
    let all = vec![
        ApiError::BadRequest(String::new()),
        ApiError::PayloadTooLarge,
        ApiError::UnsupportedMediaType,
        ApiError::SoldOut,
        ApiError::NotEnoughStock { left: 1 },
        ApiError::QuantityOverLimit { max_per_buyer: 2 },
        ApiError::UnknownProduct,
        ApiError::UnknownTicket,
        ApiError::NotFound,
        ApiError::MethodNotAllowed {
            allow: "POST".into(),
        },
        ApiError::SaleNotStarted,
        ApiError::SaleEnded,
        ApiError::Unauthorized,
        ApiError::Forbidden,
        ApiError::Unauthenticated(String::new()),
        ApiError::UserMismatch,
        ApiError::NoOrder,
        ApiError::NotPayable {
            state: TicketStatus::Pending,
        },
        ApiError::PaymentWindowClosed,
        ApiError::PaymentInProgress,
        ApiError::NotCancellable {
            state: TicketStatus::Failed,
        },
        ApiError::InvalidSignature(String::new()),
        ApiError::UnknownPayment,
        ApiError::QueueNotOpen,
        ApiError::AdmissionRequired,
        ApiError::AdmissionInvalid(String::new()),
        ApiError::ChallengeRequired(Box::new(super::documented::example_challenge())),
        ApiError::ChallengeInvalid(String::new()),
        ApiError::NoWaitingRoom,
        ApiError::UnknownQueueEntry,
        ApiError::RateLimited {
            retry_after_secs: 7,
        },
        ApiError::AddressRateLimited {
            retry_after_secs: 7,
        },
        ApiError::AdminLocked {
            retry_after_secs: 7,
        },
        ApiError::Overloaded,
        ApiError::Unavailable(String::new()),
        ApiError::Unexpected(anyhow::anyhow!("x")),
    ];
    for e in &all {
        match e {
            ApiError::BadRequest(_)
            | ApiError::PayloadTooLarge
            | ApiError::UnsupportedMediaType
            | ApiError::SoldOut
            | ApiError::NotEnoughStock { .. }
            | ApiError::QuantityOverLimit { .. }
            | ApiError::UnknownProduct
            | ApiError::UnknownTicket
            | ApiError::NotFound
            | ApiError::MethodNotAllowed { .. }
            | ApiError::SaleNotStarted
            | ApiError::SaleEnded
            | ApiError::Unauthorized
            | ApiError::Forbidden
            | ApiError::Unauthenticated(_)
            | ApiError::UserMismatch
            | ApiError::NoOrder
            | ApiError::NotPayable { .. }
            | ApiError::PaymentWindowClosed
            | ApiError::PaymentInProgress
            | ApiError::NotCancellable { .. }
            | ApiError::InvalidSignature(_)
            | ApiError::UnknownPayment
            | ApiError::QueueNotOpen
            | ApiError::AdmissionRequired
            | ApiError::AdmissionInvalid(_)
            | ApiError::ChallengeRequired(_)
            | ApiError::ChallengeInvalid(_)
            | ApiError::NoWaitingRoom
            | ApiError::UnknownQueueEntry
            | ApiError::RateLimited { .. }
            | ApiError::AddressRateLimited { .. }
            | ApiError::AdminLocked { .. }
            | ApiError::Overloaded
            | ApiError::Unavailable(_)
            | ApiError::Unexpected(_) => {}
        }
    }
    all
}
