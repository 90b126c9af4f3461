//! An admin's action on an account commits while one of the account's own
//! requests is under way: the request, checked against the account as it
//! was, must not write over it. A password change waits on argon2 twice
//! (verify, then hash) — before, a reset committed meanwhile was undone
//! (the attacker's new password stored, the temporary one lost, the
//! attacker's session kept); a token asked for just before a reset was
//! made after it, and outlived it.

use gantry_testkit::install::Install;
use std::time::Duration;

use gantry_core::Role;
use gantry_platform::{accounts, accounts::NewUser, password::Gate, tokens, PlatformError};

gantry_testkit::timed_test! {
    async fn a_password_change_under_way_does_not_undo_an_admins_reset() {
        let Install { dir: _dir, pool } = Install::new().await;
        let alice = accounts::create_user(&pool, None, NewUser { username: "alice", password: "stolen-password", role: Role::User, group: None }).await.unwrap();
        let root = accounts::create_user(&pool, None, NewUser { username: "root", password: "root-password-1", role: Role::Admin, group: None }).await.unwrap();
        // One argon2 slot, held: the change reads the stored hash and then
        // waits for it to verify the current password.
        let gate = Gate::new(1, Duration::from_secs(60));
        let held = gate.hold().await;
        let change = tokio::spawn({
            let (pool, gate, alice) = (pool.clone(), gate.clone(), alice.clone());
            async move { accounts::change_password(&pool, &gate, &alice, "stolen-password", "attackers-password", None).await }
        });
        while gate.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        accounts::reset_password(&pool, root.id, alice.id, "temporary-password-1").await.unwrap();
        drop(held);

        let refused = change.await.unwrap().unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("nothing was changed")), "{refused:?}");
        let now = accounts::user_by_id(&pool, alice.id).await.unwrap().unwrap();
        assert!(now.must_change_password, "the reset stands");
        assert_eq!(now.session_gen, alice.session_gen + 1, "only the reset moved the sessions on");
        assert!(accounts::authenticate(&pool, "alice", "temporary-password-1", None).await.is_ok());
        assert!(accounts::authenticate(&pool, "alice", "attackers-password", None).await.is_err());
    }
}

gantry_testkit::timed_test! {
    async fn a_token_asked_for_before_a_reset_or_disable_is_not_made_after_it() {
        let Install { dir: _dir, pool } = Install::new().await;
        let alice = accounts::create_user(&pool, None, NewUser { username: "alice", password: "stolen-password", role: Role::User, group: None }).await.unwrap();
        let root = accounts::create_user(&pool, None, NewUser { username: "root", password: "root-password-1", role: Role::Admin, group: None }).await.unwrap();
        let live = || sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM api_tokens WHERE revoked_at IS NULL").fetch_one(&pool);

        // `alice` is the account as her request's session found it.
        accounts::reset_password(&pool, root.id, alice.id, "temporary-password-1").await.unwrap();
        let refused = tokens::create(&pool, &alice, "after the reset").await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("no token was made")), "{refused:?}");
        assert_eq!(live().await.unwrap(), 0);

        let changed = accounts::change_password(&pool, &Gate::shared(), &accounts::user_by_id(&pool, alice.id).await.unwrap().unwrap(), "temporary-password-1", "her-own-password", None)
            .await
            .unwrap();
        tokens::create(&pool, &changed, "laptop").await.unwrap();
        assert_eq!(live().await.unwrap(), 1, "her session as it is now makes one");
        accounts::set_disabled(&pool, root.id, alice.id, true).await.unwrap();
        assert!(tokens::create(&pool, &changed, "while disabled").await.is_err());
        assert_eq!(live().await.unwrap(), 0, "none made, and disabling revoked the one there was");
    }
}
