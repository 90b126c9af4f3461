//! Every async test in Gantry runs through [`run`]: on its own thread, in
//! its own multi-threaded runtime, watched by the test thread with a
//! wall-clock limit. A test that hangs — awaiting forever, blocked in a
//! syscall, or stuck while its runtime shuts down — fails with a message
//! naming it, instead of holding the whole test run (and CI) hostage.
//!
//! The rest is what the platform's and the server's tests share, so no
//! test crate keeps a copy: [`raw_http`] (HTTP/1.1 by hand) and
//! [`files_under`]; with the `platform` feature, temporary installations
//! ([`install`]: a migrated SQLite database and accounts; [`engine`]: a node
//! and a dispatcher; [`datasets`]; [`telemetry`]) and the fault-injecting
//! dataset store ([`store`]); with `server`, the real router on port 0 and
//! signed-in clients ([`serve`], and the dataset tests' server).

mod files;
pub mod raw_http;

#[cfg(feature = "platform")]
pub mod datasets;
#[cfg(feature = "platform")]
pub mod engine;
#[cfg(feature = "platform")]
pub mod install;
#[cfg(feature = "server")]
pub mod oidc;
#[cfg(feature = "server")]
pub mod serve;
#[cfg(feature = "platform")]
pub mod slapd;
#[cfg(feature = "platform")]
pub mod smtp;
#[cfg(feature = "platform")]
pub mod store;
#[cfg(feature = "platform")]
pub mod telemetry;

pub use files::files_under;

use std::{future::Future, panic, sync::mpsc, thread, time::Duration};

/// Default limit for one test: generous, because Docker tests on a loaded
/// 2-core machine can be slow; a hang is still caught long before CI's.
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(240);

/// Runs `make()`'s future to completion within `limit`, or panics with
/// "`name` did not finish within …". A panic inside the test is passed on.
pub fn run<F, Fut>(name: &str, limit: Duration, make: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let (done, finished) = mpsc::channel();
    let thread_name = format!("test-{name}");
    thread::Builder::new()
        .name(thread_name)
        .spawn(move || {
            let outcome = panic::catch_unwind(panic::AssertUnwindSafe(|| {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("test runtime");
                rt.block_on(make());
                // Blocking tasks still running must not hold the test up.
                rt.shutdown_timeout(Duration::from_secs(5));
            }));
            let _ = done.send(outcome);
        })
        .expect("spawn test thread");
    match finished.recv_timeout(limit) {
        Ok(Ok(())) => {}
        Ok(Err(panic)) => panic::resume_unwind(panic),
        Err(_) => panic!(
            "{name} did not finish within {} s: it hangs (see the log above for where it stopped)",
            limit.as_secs()
        ),
    }
}

/// The session cookie's pair (`gantry_session=…`, or with `__Host-` when
/// served with secure cookies) among a response's `Set-Cookie` values:
/// what a test sends back as `Cookie` on a raw request.
pub fn session_cookie<'a>(set_cookies: impl IntoIterator<Item = &'a str>) -> Option<String> {
    set_cookies
        .into_iter()
        .find(|c| c.starts_with("gantry_session=") || c.starts_with("__Host-gantry_session="))
        .and_then(|c| c.split(';').next())
        .map(str::to_string)
}

/// `timed_test!` turns `async fn name() { … }` into a `#[test]` that runs
/// through [`run`] with [`DEFAULT_LIMIT`] (or `limit = SECS`).
#[macro_export]
macro_rules! timed_test {
    ($(#[$meta:meta])* async fn $name:ident() $body:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            $crate::run(stringify!($name), $crate::DEFAULT_LIMIT, || async move $body)
        }
    };
    (limit = $secs:expr; $(#[$meta:meta])* async fn $name:ident() $body:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            $crate::run(stringify!($name), ::std::time::Duration::from_secs($secs), || async move $body)
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hang_fails_with_its_name() {
        let caught = panic::catch_unwind(|| {
            run("sleeper", Duration::from_millis(200), || async {
                std::future::pending::<()>().await;
            })
        });
        let message = *caught.unwrap_err().downcast::<String>().unwrap();
        assert!(message.contains("sleeper did not finish within 0 s"), "{message}");
    }

    #[test]
    fn a_failing_assertion_is_passed_on() {
        let caught =
            panic::catch_unwind(|| run("fails", DEFAULT_LIMIT, || async { assert_eq!(1 + 1, 3, "arithmetic") }));
        assert!(caught.is_err());
    }

    timed_test! {
        async fn a_passing_test_passes() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}
