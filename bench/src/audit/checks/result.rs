//! What a check answers: PASS, FAIL or SKIP, with what it found and the first few problems.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Pass,
    Fail,
    /// The check does not apply to this run; not a failure.
    Skip,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Fail => "FAIL",
            Self::Skip => "SKIP",
        }
    }
}

/// Problems listed per check at most; the count is always exact.
const SAMPLES: usize = 10;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    pub id: u8,
    pub name: &'static str,
    pub status: Status,
    /// The numbers the check found.
    pub found: String,
    /// Violations (the first few).
    pub problems: Vec<String>,
    /// Worth knowing, not a failure.
    pub info: Vec<String>,
}

impl CheckResult {
    pub(super) fn new(id: u8, name: &'static str, ok: bool, found: String) -> Self {
        Self {
            id,
            name,
            status: if ok { Status::Pass } else { Status::Fail },
            found,
            problems: vec![],
            info: vec![],
        }
    }

    /// A check with nothing to judge here, and why.
    pub(crate) fn skip(id: u8, name: &'static str, why: &str) -> Self {
        Self {
            status: Status::Skip,
            ..Self::new(id, name, true, why.to_owned())
        }
    }

    pub fn passed(&self) -> bool {
        self.status != Status::Fail
    }
}

/// Collects violations, keeping the first few as samples.
#[derive(Default)]
pub(super) struct Problems {
    pub(super) count: usize,
    pub(super) samples: Vec<String>,
}

impl Problems {
    pub(super) fn add(&mut self, what: impl FnOnce() -> String) {
        self.count += 1;
        if self.samples.len() < SAMPLES {
            self.samples.push(what());
        }
    }
}
