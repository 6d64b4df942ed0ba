//! The error every workload returns.

use core::fmt;

use verbs_api::{Error, WcOpcode, WcStatus};

/// Why a workload stopped.
///
/// Workloads never panic on a backend's answer: a verb that fails, a
/// completion with an error status, or an outcome that differs from the one
/// the workload planned all come back here, so a benchmark can print the
/// reason and skip instead of aborting the whole binary.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkloadError {
    /// A verb failed.
    Verbs(Error),
    /// A work completion carried an error status.
    Completion {
        /// `wr_id` of the completion.
        wr_id: u64,
        /// Its `status`.
        status: WcStatus,
        /// Its `opcode` (not meaningful on error completions).
        opcode: WcOpcode,
    },
    /// An outcome differed from the one the workload planned (a legal
    /// modify failed, an illegal one succeeded or failed with another
    /// kind, completions arrived out of order).
    Mismatch(String),
    /// A completion queue stayed empty while work was outstanding.
    Stalled(&'static str),
    /// The device lacks something the workload needs (e.g. atomics).
    Unsupported(String),
}

impl WorkloadError {
    /// `true` when a verb the workload needs is not implemented by the
    /// backend ([`Error::is_not_implemented`]): the benchmark is skipped
    /// until it is, and this says nothing about speed or correctness.
    pub fn is_not_implemented(&self) -> bool {
        matches!(self, Self::Verbs(e) if e.is_not_implemented())
    }

    /// `true` when the workload cannot run on this backend or device (not
    /// implemented, or a missing capability): a reason to skip, not a bug.
    pub fn is_skip(&self) -> bool {
        self.is_not_implemented() || matches!(self, Self::Unsupported(_))
    }
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Verbs(e) => write!(f, "{e}"),
            Self::Completion {
                wr_id,
                status,
                opcode,
            } => {
                write!(
                    f,
                    "work completion wr_id={wr_id} opcode={opcode} failed with status {status}"
                )
            }
            Self::Mismatch(what) => write!(f, "unexpected outcome: {what}"),
            Self::Stalled(what) => write!(
                f,
                "{what}: the completion queue stayed empty with work outstanding"
            ),
            Self::Unsupported(what) => write!(f, "not supported by this device: {what}"),
        }
    }
}

impl std::error::Error for WorkloadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Verbs(e) => Some(e),
            _ => None,
        }
    }
}

impl From<Error> for WorkloadError {
    fn from(e: Error) -> Self {
        Self::Verbs(e)
    }
}
