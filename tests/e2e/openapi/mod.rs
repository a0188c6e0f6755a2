//! `GET /openapi.json` against what the gateway really does: every response the tests see is
//! checked against the served document (status, required headers and their values, body schema,
//! with the `jsonschema` crate), every status the document lists is produced by some request,
//! and the constraints it states are the ones the server enforces.
//!
//! [`spec`] compiles the served document and checks one answer against it; [`recorder`] sends
//! requests and checks every answer. The tests: [`every_status`] (with its payments' and
//! waiting room's parts), and [`constraints`].

mod recorder;
pub(crate) mod spec;

mod constraints;
mod every_status;
mod payment_statuses;
mod queue_statuses;
mod stream_statuses;
