//! The checker: each check pushes every problem it finds, so one run lists them all.

pub(crate) mod app;
pub(crate) mod cluster;
pub(crate) mod compose;
pub(crate) mod dockerfile;
pub(crate) mod ha;
pub(crate) mod prometheus;
pub(crate) mod tracing;
