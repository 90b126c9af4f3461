//! Sign-in under bursts (issue 11): every attempt is counted before its
//! password is verified, so parallel guesses verify exactly the allowance;
//! the owner's own client is not locked out by a guesser elsewhere; argon2
//! work never exceeds the gate, and a full gate answers 429, never 500; the
//! trusted-proxy setting decides whether X-Forwarded-For names the client.

use crate::security_support;

use futures_util::future::join_all;
use gantry_core::{throttle::ThrottlePolicy, Role};
use gantry_platform::password::Gate;
use gantry_server::security::Security;
use security_support::{gate, start};
use std::time::Duration;

fn statuses(all: &[u16], code: u16) -> usize {
    all.iter().filter(|s| **s == code).count()
}

gantry_testkit::timed_test! {
    async fn fifty_parallel_wrong_passwords_verify_exactly_the_allowance_and_the_owner_still_gets_in() {
        let dir = tempfile::tempdir().unwrap();
        let g = gate(4);
        let server = start(&dir, Security { trusted_proxy: true, gate: g.clone(), ..Security::default() }, false).await;
        server.add_user("alice", "correct horse", Role::User).await;
        let attacker = server.client_from("203.0.113.7");
        let tries = (0..50).map(|i| {
            let (c, url) = (attacker.clone(), server.url("/api/login"));
            async move {
                let pw = format!("guess-{i}");
                c.post(url).form(&[("username", "alice"), ("password", pw.as_str())]).send().await.unwrap().status().as_u16()
            }
        });
        let got: Vec<u16> = join_all(tries).await;
        let allowed = ThrottlePolicy::PER_ACCOUNT_CLIENT.max_failures as usize;
        assert_eq!(statuses(&got, 401), allowed, "{got:?}");
        assert_eq!(statuses(&got, 429), 50 - allowed, "{got:?}");
        assert_eq!(g.started(), allowed as u64, "only admitted attempts reach argon2");

        // The guesser's client stays locked even with the right password...
        let locked = server.login(&attacker, "alice", "correct horse").await;
        assert_eq!(locked.status(), 429);
        // ...and the owner, from their own client, signs in.
        let owner = server.client_from("198.51.100.20");
        assert_eq!(server.login(&owner, "alice", "correct horse").await.status(), 200);
    }
}

gantry_testkit::timed_test! {
    async fn two_hundred_parallel_sign_ins_never_run_more_verifications_than_the_gate() {
        let dir = tempfile::tempdir().unwrap();
        let g = gate(3);
        let server = start(&dir, Security { trusted_proxy: true, gate: g.clone(), ..Security::default() }, false).await;
        let tries = (0..200).map(|i| {
            // Distinct clients and names: the throttle admits all of them.
            let c = server.client_from(&format!("198.51.{}.{}", i / 200, i % 200 + 1));
            let url = server.url("/api/login");
            async move {
                let name = format!("nobody{i}");
                c.post(url).form(&[("username", name.as_str()), ("password", "whatever")]).send().await.unwrap().status().as_u16()
            }
        });
        let got: Vec<u16> = join_all(tries).await;
        assert_eq!(statuses(&got, 401), 200, "{got:?}");
        assert_eq!(g.started(), 200);
        assert!(g.peak() <= 3, "at most the gate's 3 verifications at once, saw {}", g.peak());
        assert!(g.peak() >= 1);
    }
}

gantry_testkit::timed_test! {
    async fn a_full_gate_answers_busy_not_500() {
        let dir = tempfile::tempdir().unwrap();
        let g = Gate::new(1, Duration::ZERO);
        let server = start(&dir, Security { gate: g.clone(), ..Security::default() }, false).await;
        let held = g.hold().await;
        let c = server.client();
        // More refusals than the account's allowance of failures: turned
        // away unverified, none of them is a guess, so none counts — the
        // owner is not locked out by a flood they were caught in.
        for _ in 0..8 {
            let busy = server.login(&c, "admin", security_support::ADMIN_PASSWORD).await;
            assert_eq!(busy.status(), 429);
            assert!(busy.text().await.unwrap().contains("busy"));
        }
        assert_eq!(g.started(), 0, "nothing was verified");
        drop(held);
        assert_eq!(server.login(&c, "admin", security_support::ADMIN_PASSWORD).await.status(), 200);
    }
}

gantry_testkit::timed_test! {
    async fn forwarded_for_counts_only_behind_a_trusted_proxy() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security { gate: gate(2), ..Security::default() }, false).await;
        server.add_user("bob", "bob-password-1", Role::User).await;
        // Not trusted: every claimed address is really 127.0.0.1.
        for i in 0..5 {
            let c = server.client_from(&format!("203.0.113.{i}"));
            assert_eq!(server.login(&c, "bob", "wrong").await.status(), 401);
        }
        let claims_elsewhere = server.client_from("198.51.100.99");
        assert_eq!(server.login(&claims_elsewhere, "bob", "bob-password-1").await.status(), 429);
    }
}

gantry_testkit::timed_test! {
    async fn an_ipv6_guesser_counts_as_its_64_not_as_each_address() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security { trusted_proxy: true, gate: gate(2), ..Security::default() }, false).await;
        server.add_user("bob", "bob-password-1", Role::User).await;
        // A new address of the same /64 for every guess: still one client.
        for i in 1..=ThrottlePolicy::PER_ACCOUNT_CLIENT.max_failures {
            let c = server.client_from(&format!("2001:db8:7:7::{i:x}"));
            assert_eq!(server.login(&c, "bob", "wrong").await.status(), 401, "guess {i}");
        }
        let next = server.client_from("2001:db8:7:7:ffff::1");
        assert_eq!(server.login(&next, "bob", "wrong").await.status(), 429, "the /64 has used its allowance");
        // Another /64 is another client: the owner gets in.
        let owner = server.client_from("2001:db8:7:8::1");
        assert_eq!(server.login(&owner, "bob", "bob-password-1").await.status(), 200);
    }
}

gantry_testkit::timed_test! {
    async fn a_client_written_forwarded_for_line_does_not_give_each_guess_a_new_address() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security { trusted_proxy: true, gate: gate(2), ..Security::default() }, false).await;
        server.add_user("alice", "correct horse", Role::User).await;
        // The client writes its own X-Forwarded-For line; the proxy appends
        // another line with the address it saw. Both lines are one list, and
        // only its last entry (the proxy's) names the client.
        let c = server.client();
        let allowed = ThrottlePolicy::PER_ACCOUNT_CLIENT.max_failures;
        for i in 1..=allowed + 1 {
            let res = c
                .post(server.url("/api/login"))
                .header("x-forwarded-for", format!("10.9.0.{i}"))
                .header("x-forwarded-for", "203.0.113.7")
                .form(&[("username", "alice"), ("password", "wrong")])
                .send()
                .await
                .unwrap();
            let want = if i <= allowed { 401 } else { 429 };
            assert_eq!(res.status().as_u16(), want, "guess {i}: counted under the proxy's address, 203.0.113.7");
        }
        // The owner, seen by the proxy elsewhere, still gets in.
        let owner = server.client_from("198.51.100.20");
        assert_eq!(server.login(&owner, "alice", "correct horse").await.status(), 200);
    }
}
