//! Matching a verb's result against a statement's expectation.
//!
//! Backends agree on error *classes* ([`ErrorKind`]), not on exact errnos, so
//! `-> EINVAL` matches any error whose kind is in the `EINVAL` class
//! (including the diagnosed [`ErrorKind::InvalidTransition`] and
//! [`ErrorKind::InvalidAttrMask`]). A verb the backend does not implement
//! ([`Error::is_not_implemented`]) never matches anything: the script fails
//! with "not implemented by the backend", so a missing verb can never pass
//! a test that expects a failure.

use crate::script::Expectation;
use verbs_api::{errno, Error, ErrorKind};

/// Checks the result of a verb against `expect`.
///
/// Returns `Ok(true)` when the verb succeeded and that was expected (the
/// caller goes on to use the value), `Ok(false)` when it failed as expected,
/// and `Err(why)` on a mismatch. `Empty` and `Fields` expectations need the
/// verb itself to succeed; what it returned is checked by the caller.
///
/// # Errors
/// A message saying what was expected and what happened (with the error's
/// `Display`, which names the C verb and the errno).
pub fn check_result(expect: &Expectation, result: Result<(), &Error>) -> Result<bool, String> {
    if let Err(e) = result {
        if e.is_not_implemented() {
            return Err(format!("not implemented by the backend: {e}"));
        }
    }
    match (expect, result) {
        (
            Expectation::Error {
                errno: name,
                bad_wr,
            },
            Err(e),
        ) => {
            let wanted = errno::from_name(name).map(ErrorKind::from_errno);
            let Some(wanted) = wanted else {
                return Err(format!("expected {name}, which is not a known errno name"));
            };
            if !wanted.same_class(e.kind()) {
                return Err(format!("expected {name}, got {e}"));
            }
            if let Some(index) = bad_wr {
                if e.bad_wr() != Some(*index) {
                    let got = e
                        .bad_wr()
                        .map_or_else(|| "none".to_owned(), |i| i.to_string());
                    return Err(format!(
                        "expected {name} bad_wr={index}, got bad_wr={got}: {e}"
                    ));
                }
            }
            Ok(false)
        }
        (
            Expectation::Error {
                errno: name,
                bad_wr,
            },
            Ok(()),
        ) => {
            let suffix = bad_wr.map(|i| format!(" bad_wr={i}")).unwrap_or_default();
            Err(format!("expected {name}{suffix}, got success"))
        }
        (Expectation::AnyError { bad_wr }, Err(e)) => {
            if let Some(index) = bad_wr {
                if e.bad_wr() != Some(*index) {
                    let got = e
                        .bad_wr()
                        .map_or_else(|| "none".to_owned(), |i| i.to_string());
                    return Err(format!(
                        "expected an error with bad_wr={index}, got bad_wr={got}: {e}"
                    ));
                }
            }
            Ok(false)
        }
        (Expectation::AnyError { bad_wr }, Ok(())) => {
            let suffix = bad_wr.map(|i| format!(" bad_wr={i}")).unwrap_or_default();
            Err(format!("expected an error{suffix}, got success"))
        }
        (_, Err(e)) => Err(format!("expected success, got {e}")),
        (_, Ok(())) => Ok(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verbs_api::{QpAttrMask, QpState, Verb};

    fn err(kind: ErrorKind) -> Error {
        Error::new(Verb::ModifyQp, kind, "test")
    }

    fn expect_errno(name: &str) -> Expectation {
        Expectation::Error {
            errno: name.to_owned(),
            bad_wr: None,
        }
    }

    // Goal: an errno expectation matches every error of its class and only those.
    // Method: table of (expected errno, error kind, match?) rows, including the
    // diagnosed EINVAL kinds and two errnos of one class.
    #[test]
    fn errno_expectations_match_by_class() {
        let rows: &[(&str, ErrorKind, bool)] = &[
            ("EINVAL", ErrorKind::InvalidArgument, true),
            (
                "EINVAL",
                ErrorKind::InvalidTransition {
                    from: QpState::Reset,
                    to: QpState::ReadyToSend,
                },
                true,
            ),
            (
                "EINVAL",
                ErrorKind::InvalidAttrMask {
                    missing: QpAttrMask::PORT,
                    extra: QpAttrMask::empty(),
                },
                true,
            ),
            ("EOPNOTSUPP", ErrorKind::Unsupported, true),
            ("EPROTONOSUPPORT", ErrorKind::Unsupported, true),
            ("EACCES", ErrorKind::PermissionDenied, true),
            ("EINVAL", ErrorKind::OutOfResources, false),
            ("ENOMEM", ErrorKind::InvalidArgument, false),
            ("EBUSY", ErrorKind::NotFound, false),
        ];
        for (name, kind, matches) in rows {
            let e = err(*kind);
            let r = check_result(&expect_errno(name), Err(&e));
            assert_eq!(r.is_ok(), *matches, "{name} vs {kind:?}: {r:?}");
            if !matches {
                let msg = r.unwrap_err();
                assert!(
                    msg.starts_with(&format!("expected {name}, got ibv_modify_qp failed")),
                    "{msg}"
                );
            }
        }
    }

    // Goal: success and failure against success/error expectations give the
    // documented messages.
    // Method: the four combinations.
    #[test]
    fn success_and_error_expectations() {
        assert_eq!(check_result(&Expectation::Success, Ok(())), Ok(true));
        assert_eq!(check_result(&Expectation::Ok, Ok(())), Ok(true));
        assert_eq!(
            check_result(&expect_errno("EINVAL"), Ok(())),
            Err("expected EINVAL, got success".to_owned())
        );
        let e = err(ErrorKind::Busy);
        let msg = check_result(&Expectation::Success, Err(&e)).unwrap_err();
        assert_eq!(
            msg,
            "expected success, got ibv_modify_qp failed: EBUSY (errno 16): test"
        );
        assert_eq!(check_result(&expect_errno("EBUSY"), Err(&e)), Ok(false));
    }

    // Goal: a "not implemented" error never matches, not even -> EOPNOTSUPP / ENOSYS.
    // Method: check it against every kind of expectation.
    #[test]
    fn not_implemented_never_matches() {
        let e = Error::not_implemented(Verb::OpenXrcd, "sim");
        for exp in [
            Expectation::Success,
            Expectation::Ok,
            expect_errno("EOPNOTSUPP"),
            expect_errno("ENOSYS"),
            Expectation::Empty,
        ] {
            let msg = check_result(&exp, Err(&e)).unwrap_err();
            assert!(
                msg.starts_with("not implemented by the backend: ibv_open_xrcd"),
                "{msg}"
            );
        }
    }

    // Goal: `-> error` matches an error of any class, never success and
    // never "not implemented"; its bad_wr is compared when given.
    // Method: errors of three kinds, success, a not-implemented error, and
    // bad_wr matching and not.
    #[test]
    fn any_error_expectation() {
        let any = Expectation::AnyError { bad_wr: None };
        for kind in [
            ErrorKind::InvalidArgument,
            ErrorKind::OutOfResources,
            ErrorKind::Other(errno::EIO),
        ] {
            assert_eq!(check_result(&any, Err(&err(kind))), Ok(false), "{kind:?}");
        }
        assert_eq!(
            check_result(&any, Ok(())),
            Err("expected an error, got success".to_owned())
        );
        let ni = Error::not_implemented(Verb::PollCq, "sim");
        assert!(check_result(&any, Err(&ni))
            .unwrap_err()
            .starts_with("not implemented by the backend"));
        let e = Error::new(Verb::PostSend, ErrorKind::OutOfResources, "full").with_bad_wr(1);
        let at = |i| Expectation::AnyError { bad_wr: Some(i) };
        assert_eq!(check_result(&at(1), Err(&e)), Ok(false));
        let msg = check_result(&at(0), Err(&e)).unwrap_err();
        assert!(
            msg.starts_with("expected an error with bad_wr=0, got bad_wr=1"),
            "{msg}"
        );
        assert_eq!(
            check_result(&at(2), Ok(())),
            Err("expected an error bad_wr=2, got success".to_owned())
        );
    }

    // Goal: bad_wr is compared when given.
    // Method: an ENOMEM with bad_wr 1 against bad_wr=1, bad_wr=0 and none.
    #[test]
    fn bad_wr_is_compared() {
        let e = Error::new(Verb::PostSend, ErrorKind::OutOfResources, "full").with_bad_wr(1);
        let exp = |i| Expectation::Error {
            errno: "ENOMEM".to_owned(),
            bad_wr: i,
        };
        assert_eq!(check_result(&exp(Some(1)), Err(&e)), Ok(false));
        assert_eq!(check_result(&exp(None), Err(&e)), Ok(false));
        let msg = check_result(&exp(Some(0)), Err(&e)).unwrap_err();
        assert!(
            msg.starts_with("expected ENOMEM bad_wr=0, got bad_wr=1"),
            "{msg}"
        );
        assert_eq!(
            check_result(&exp(Some(2)), Ok(())),
            Err("expected ENOMEM bad_wr=2, got success".to_owned())
        );
    }
}
