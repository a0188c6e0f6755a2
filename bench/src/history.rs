//! The history file: JSON lines of three kinds.
//!
//! ```text
//! {"kind":"request","sent_at_us":…,"recv_at_us":…,"gateway":"http://…","user_id":7,"status":202,"ticket":"…","error":null}
//! {"kind":"settled","ticket":"…","user_id":7,"status":"confirmed","order_id":12,"reason":null,"answered_at_us":…,"reserved_at_ms":…,"confirmed_at_ms":…}
//! {"kind":"summary", …}
//! ```
//!
//! `load --pay-rate` adds two kinds ([`PaymentLine`]), written as they happen, so in no set
//! order against the request lines: one line per request to pay, and one per paying buyer when
//! it stops looking at its ticket. `load --cancel-rate` adds a third: one line per request to
//! cancel.
//!
//! ```text
//! {"kind":"pay","ticket":"…","user_id":7,"attempt":1,"idempotency_key":"…","status":202,"payment_id":"pay_…","error":null,"state":null,"sent_at_ms":…,"at_ms":…}
//! {"kind":"pay_end","ticket":"…","user_id":7,"status":"paid","reason":null,"pay_by_ms":…,"paid_at_ms":…,"cancelled_at_ms":null,"attempts":1,"accepted":1,"at_ms":…}
//! {"kind":"cancel","ticket":"…","user_id":8,"attempt":2,"status":200,"error":null,"state":"cancelled","reason":"buyer_cancelled","sent_at_ms":…,"at_ms":…}
//! ```
//!
//! `load --waiting-room` adds five kinds ([`WaitingRoomLine`]), also written as they happen:
//! each join attempt, each admission a buyer saw, each buy with the admission it carried (the
//! buy also has its usual request line), each buyer's last state, and samples of the admin
//! view's admitted-not-bought count against the units left.
//!
//! ```text
//! {"kind":"wr_join","user_id":7,"gateway":"http://…","status":202,"queue_id":"…","state":"waiting","error":null,"sent_at_ms":…,"at_ms":…}
//! {"kind":"wr_admitted","user_id":7,"queue_id":"…","admitted_until_ms":…,"gateway":"http://…","at_ms":…}
//! {"kind":"wr_buy","user_id":7,"admission_token":"…","admitted_until_ms":…,"sent_at_us":…,"gateway":"http://…","status":202,"ticket":"…","error":null}
//! {"kind":"wr_end","user_id":7,"queue_id":"…","state":"bought","polls":9,"poll_errors":0,"at_ms":…}
//! {"kind":"wr_sample","at_ms":…,"admitted":12,"stock_redis":150,"pending":3,"max_admitted_factor":1.5}
//! ```
//!
//! `load` writes it through [`HistoryWriter`], a thread fed by a channel, so file I/O stays off
//! the request path. `audit` reads it back with [`read`], which skips the payment and
//! waiting-room lines, with [`read_with_payments`], or with [`read_all`].
//!
//! Where each part lives: `lines.rs` what each kind of line holds, `read.rs` the readers,
//! `writer.rs` the writer.

mod lines;
mod read;
mod writer;

pub use lines::{
    AllLines, CancelLine, Line, PayEndLine, PayLine, PaymentLine, RequestLine, SaleEndCheck,
    SaleEndLine, SettledLine, SummaryLine, WaitingRoomLine, WrAdmittedLine, WrBuyLine, WrEndLine,
    WrJoinLine, WrSampleLine,
};
pub use read::{parse, parse_all, parse_with_payments, read, read_all, read_with_payments};
pub use writer::{HistorySink, HistoryWriter, RequestRecord};
