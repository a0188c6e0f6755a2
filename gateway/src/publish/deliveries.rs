//! Delivery reports, handed back to the thread that sent each order, usually with one wake-up
//! per batch instead of one per order.
//!
//! librdkafka reports the deliveries of a produce request together, on the producer's polling
//! thread. Completing each buy's future there would wake the sending HTTP worker thread once
//! per order (an `eventfd` write each, from another thread). Instead each sending thread has an
//! [`Inbox`]: the polling thread appends the reports to it and wakes it only when it was empty,
//! and a task on that thread completes the buys' futures, locally. (If that task empties the
//! inbox while a batch is still arriving, the rest of the batch wakes it once more.)
//!
//! An inbox belongs to a thread and its task to the runtime that thread ran first: right for
//! the gateway's HTTP workers, each a thread with one runtime for its whole life. When that
//! runtime stops, its inbox closes and the thread's next runtime gets a new one.

use rdkafka::error::KafkaError;
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::ClientContext;
use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{oneshot, Notify};

/// Where an order landed, (partition, offset), or why it did not.
pub type Delivered = Result<(i32, i64), KafkaError>;

type Report = (oneshot::Sender<Delivered>, Delivered);

#[derive(Default)]
struct Reports {
    waiting: Vec<Report>,
    /// The inbox's task is gone (its runtime stopped): reports are sent at once.
    closed: bool,
}

/// The delivery reports waiting for one thread.
#[derive(Default)]
pub struct Inbox {
    reports: Mutex<Reports>,
    wake: Notify,
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, Reports> {
        self.reports.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This thread's inbox, with its task started on this thread's runtime the first time (or
    /// again after that runtime stopped).
    pub fn current() -> Arc<Inbox> {
        thread_local! {
            static INBOX: RefCell<Option<Arc<Inbox>>> = const { RefCell::new(None) };
        }
        INBOX.with(|slot| {
            let mut slot = slot.borrow_mut();
            match &*slot {
                Some(inbox) if !inbox.lock().closed => inbox.clone(),
                _ => {
                    let inbox = Arc::new(Inbox::default());
                    tokio::spawn(deliver(Close(inbox.clone())));
                    *slot = Some(inbox.clone());
                    inbox
                }
            }
        })
    }

    /// Queues a report; true when the inbox needs a wake-up (it was empty).
    fn push(&self, reply: oneshot::Sender<Delivered>, delivered: Delivered) -> bool {
        let mut reports = self.lock();
        if reports.closed {
            drop(reports);
            let _ = reply.send(delivered);
            return false;
        }
        reports.waiting.push((reply, delivered));
        reports.waiting.len() == 1
    }
}

/// Closes its inbox when the task that empties it ends (or is dropped with its runtime), and
/// sends what is left.
struct Close(Arc<Inbox>);

impl Drop for Close {
    fn drop(&mut self) {
        let left = {
            let mut reports = self.0.lock();
            reports.closed = true;
            std::mem::take(&mut reports.waiting)
        };
        for (reply, delivered) in left {
            let _ = reply.send(delivered);
        }
    }
}

/// Empties an inbox each time it is woken, on the thread that owns it.
async fn deliver(inbox: Close) {
    let mut batch = Vec::new();
    loop {
        inbox.0.wake.notified().await;
        std::mem::swap(&mut inbox.0.lock().waiting, &mut batch);
        for (reply, delivered) in batch.drain(..) {
            // The buy may have given up (its timeout): nothing to tell.
            let _ = reply.send(delivered);
        }
    }
}

/// What travels with each order through librdkafka.
pub struct Pending {
    pub inbox: Arc<Inbox>,
    pub reply: oneshot::Sender<Delivered>,
}

/// The producer's context: routes each delivery report to its sender's inbox.
pub struct Deliveries;

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = Box<Pending>;

    fn delivery(&self, result: &DeliveryResult<'_>, pending: Box<Pending>) {
        let delivered = match result {
            Ok(message) => Ok((
                rdkafka::Message::partition(message),
                rdkafka::Message::offset(message),
            )),
            Err((e, _)) => Err(e.clone()),
        };
        let Pending { inbox, reply } = *pending;
        if inbox.push(reply, delivered) {
            inbox.wake.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::types::RDKafkaErrorCode;

    /// Reports reach their buys through the inbox of the thread that sent them, and a batch
    /// of them needs one wake-up.
    #[tokio::test(flavor = "current_thread")]
    async fn reports_that_arrive_before_the_drain_share_one_wake_up() {
        let inbox = Inbox::current();
        assert!(
            Arc::ptr_eq(&inbox, &Inbox::current()),
            "one inbox per thread"
        );
        let (mut wakes, mut answers) = (0, Vec::new());
        for n in 0..3 {
            let (reply, answer) = oneshot::channel();
            let delivered = if n == 2 {
                Err(KafkaError::MessageProduction(
                    RDKafkaErrorCode::MessageTimedOut,
                ))
            } else {
                Ok((n, 10 + n as i64))
            };
            if inbox.push(reply, delivered) {
                wakes += 1;
                inbox.wake.notify_one();
            }
            answers.push(answer);
        }
        assert_eq!(wakes, 1);
        assert_eq!(answers.remove(0).await.unwrap().unwrap(), (0, 10));
        assert_eq!(answers.remove(0).await.unwrap().unwrap(), (1, 11));
        assert!(answers.remove(0).await.unwrap().is_err());
        // Emptied: the next report wakes it again.
        let (reply, answer) = oneshot::channel();
        assert!(inbox.push(reply, Ok((5, 5))));
        inbox.wake.notify_one();
        assert_eq!(answer.await.unwrap().unwrap(), (5, 5));
    }

    /// A report for a thread whose runtime has stopped is sent at once, not lost in an inbox
    /// nobody empties; that thread's next runtime gets a new inbox.
    #[test]
    fn an_inbox_whose_runtime_stopped_hands_reports_over_at_once() {
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
        };
        let first = runtime();
        let inbox = first.block_on(async {
            let inbox = Inbox::current();
            tokio::task::yield_now().await; // its task starts
            inbox
        });
        drop(first);
        let (reply, mut answer) = oneshot::channel();
        assert!(!inbox.push(reply, Ok((1, 2))));
        assert_eq!(answer.try_recv().unwrap().unwrap(), (1, 2));
        let again = runtime().block_on(async { Inbox::current() });
        assert!(!Arc::ptr_eq(&inbox, &again));
    }
}
