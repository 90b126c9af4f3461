//! Accounts against a real SQLite file with the real migrations.

use crate::reclaim_common;
use gantry_testkit::engine;
use gantry_testkit::install::Install;

use gantry_core::Role;
use gantry_platform::{accounts, accounts::NewUser, db, PlatformError};

fn alice() -> NewUser<'static> {
    NewUser { username: "alice", password: "correct horse", role: Role::User, group: None }
}

async fn user_count(pool: &db::Pool) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM users").fetch_one(pool).await.unwrap()
}

gantry_testkit::timed_test! {
    async fn migrations_apply_to_a_new_file_and_are_idempotent() {
        let Install { dir: _dir, pool } = Install::new().await;
        db::migrate(&pool).await.unwrap();
        let tables: Vec<String> = sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .fetch_all(&pool)
            .await
            .unwrap();
        for t in ["audit_log", "groups", "login_failures", "tower_sessions", "users"] {
            assert!(tables.iter().any(|n| n == t), "missing table {t}: {tables:?}");
        }
    }
}

gantry_testkit::timed_test! {
    async fn created_user_signs_in_with_the_right_password_only() {
        let Install { dir: _dir, pool } = Install::new().await;
        let user = accounts::create_user(&pool, None, alice()).await.unwrap();
        assert_eq!(user.group_name, accounts::DEFAULT_GROUP);
        assert_eq!(user.role, Role::User);

        let stored: String = sqlx::query_scalar("SELECT password_hash FROM users WHERE id = ?").bind(user.id).fetch_one(&pool).await.unwrap();
        assert!(stored.starts_with("$argon2id$"), "password must be stored as argon2id, got {stored}");

        let signed_in = accounts::authenticate(&pool, "alice", "correct horse", None).await.unwrap();
        assert_eq!(signed_in, user);
        assert!(matches!(accounts::authenticate(&pool, "alice", "wrong", None).await, Err(PlatformError::BadCredentials)));
        assert!(matches!(accounts::authenticate(&pool, "nobody", "correct horse", None).await, Err(PlatformError::BadCredentials)));
    }
}

gantry_testkit::timed_test! {
    async fn duplicate_or_invalid_users_change_nothing() {
        let Install { dir: _dir, pool } = Install::new().await;
        accounts::create_user(&pool, None, alice()).await.unwrap();
        let err = accounts::create_user(&pool, None, alice()).await.unwrap_err();
        assert_eq!(err.to_string(), "the username \"alice\" is taken");

        let bad = [
            NewUser { username: "", ..alice() },
            NewUser { username: "Bob Smith", ..alice() },
            NewUser { username: &"b".repeat(200), ..alice() },
            NewUser { username: "bob", password: "short", ..alice() },
            NewUser { username: "bob", password: "", ..alice() },
            NewUser { username: "bob", group: Some("no-such-group"), ..alice() },
        ];
        for new in bad {
            let name = new.username.chars().take(10).collect::<String>();
            assert!(accounts::create_user(&pool, None, new).await.is_err(), "accepted {name}");
        }
        assert_eq!(user_count(&pool).await, 1);
        let audit: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'user.create'").fetch_one(&pool).await.unwrap();
        assert_eq!(audit, 1, "only the successful creation is audited");
        let detail: String = sqlx::query_scalar("SELECT detail FROM audit_log WHERE action = 'user.create'").fetch_one(&pool).await.unwrap();
        assert_eq!(detail, format!("user alice (user) in group {}", accounts::DEFAULT_GROUP), "the audit says where the account went");
    }
}

gantry_testkit::timed_test! {
    async fn login_input_is_validated_before_any_lookup() {
        let Install { dir: _dir, pool } = Install::new().await;
        let empty = accounts::authenticate(&pool, "  ", "x", None).await.unwrap_err();
        assert_eq!(empty.to_string(), "username is required");
        let no_pw = accounts::authenticate(&pool, "alice", "", None).await.unwrap_err();
        assert_eq!(no_pw.to_string(), "password is required");
        let long = accounts::authenticate(&pool, "alice", &"p".repeat(10_000), None).await.unwrap_err();
        assert_eq!(long.to_string(), "password must be at most 128 characters");
        let failures: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM login_failures").fetch_one(&pool).await.unwrap();
        assert_eq!(failures, 0, "malformed input is not a guess and is not counted");
    }
}

gantry_testkit::timed_test! {
    async fn repeated_failures_lock_the_account_from_that_client_but_not_its_owner_elsewhere() {
        let Install { dir: _dir, pool } = Install::new().await;
        accounts::create_user(&pool, None, alice()).await.unwrap();
        for _ in 0..5 {
            assert!(matches!(
                accounts::authenticate(&pool, "alice", "guess", Some("127.0.0.9")).await,
                Err(PlatformError::BadCredentials)
            ));
        }
        // The guesser's client is locked out of this account, even with the
        // right password...
        let locked = accounts::authenticate(&pool, "alice", "correct horse", Some("127.0.0.9")).await.unwrap_err();
        assert!(matches!(locked, PlatformError::Throttled { busy: false, .. }), "{locked:?}");
        assert!(locked.to_string().starts_with("too many failed sign-in attempts; try again in "), "{locked}");
        // ...while the owner, from their own client, still gets in.
        accounts::authenticate(&pool, "alice", "correct horse", Some("127.0.0.10")).await.unwrap();
    }
}

gantry_testkit::timed_test! {
    async fn groups_have_unique_names_and_report_quota() {
        let Install { dir: _dir, pool } = Install::new().await;
        let g = accounts::create_group(&pool, None, "ml-team", 8).await.unwrap();
        assert_eq!((g.gpu_quota, g.gpus_in_use, g.members), (8, 0, 0));
        assert_eq!(accounts::create_group(&pool, None, "ml-team", 2).await.unwrap_err().to_string(), "a group named \"ml-team\" already exists");
        assert!(accounts::create_group(&pool, None, "neg", -1).await.is_err());
        let u = accounts::create_user(&pool, None, NewUser { group: Some("ml-team"), ..alice() }).await.unwrap();
        assert_eq!(u.group_id, g.id);
        let listed = accounts::list_groups(&pool).await.unwrap();
        assert_eq!(listed.iter().find(|x| x.name == "ml-team").unwrap().members, 1);
    }
}

gantry_testkit::timed_test! {
    async fn a_locked_client_is_refused_without_a_write_and_old_counts_are_pruned() {
        let Install { dir: _dir, pool } = Install::new().await;
        let rows = || async { sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM login_failures").fetch_one(&pool).await.unwrap() };
        let allowance = gantry_core::throttle::ThrottlePolicy::PER_ADDRESS.max_failures;
        for i in 0..allowance {
            let r = accounts::authenticate(&pool, &format!("ghost{i}"), "guess", Some("198.51.100.1")).await;
            assert!(matches!(r, Err(PlatformError::BadCredentials)), "{r:?}");
        }
        let before = rows().await;
        assert_eq!(before, allowance as i64 + 1, "one row per guessed name and one for the address");
        // The address is locked: new names are refused and leave no row.
        for i in 0..20 {
            let r = accounts::authenticate(&pool, &format!("other{i}"), "guess", Some("198.51.100.1")).await;
            assert!(matches!(r, Err(PlatformError::Throttled { busy: false, .. })), "{r:?}");
        }
        assert_eq!(rows().await, before, "a locked client grows nothing");
        // Counts inside their window stay; past it, they go.
        let now = gantry_platform::now();
        assert_eq!(gantry_platform::throttle::prune(&pool, now).await.unwrap(), 0);
        assert_eq!(gantry_platform::throttle::prune(&pool, now + 15 * 60).await.unwrap(), before as u64);
        assert_eq!(rows().await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn a_user_who_owns_a_machine_is_not_moved_to_another_group() {
        let env = engine::env("simulated", 2, 2).await;
        env.use_executor(gantry_platform::executor::Executor::from(gantry_platform::executor::SimulatedExecutor::new()));
        let root = reclaim_common::admin(&env.pool).await;
        let alice = env.user("alice", "ml-team").await;
        let bob = env.user("bob", "ml-team").await;
        accounts::create_group(&env.pool, None, "vision", 2).await.unwrap();
        env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap();
        env.drive().await;

        // Her machine would stay charged to ml-team where nobody could act on it.
        let refused = accounts::set_group(&env.pool, root.id, alice.id, "vision").await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Refused(why) if why.contains("1 machine") && why.contains("first")), "{refused}");
        let group = |id: i64| format!("SELECT group_id FROM users WHERE id = {id}");
        assert_eq!(env.scalar(&group(alice.id)).await, alice.group_id, "nothing changed");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'user.group'").await, 0);

        let moved = accounts::set_group(&env.pool, root.id, bob.id, "vision").await.unwrap();
        assert_eq!(moved.group_name, "vision", "owning nothing, bob moves");
    }
}

gantry_testkit::timed_test! {
    async fn a_password_reset_lifts_the_lock_its_guessers_left() {
        let Install { dir: _dir, pool } = Install::new().await;
        let admin = accounts::create_user(&pool, None, NewUser { username: "root", role: Role::Admin, ..alice() }).await.unwrap();
        let alice = accounts::create_user(&pool, None, alice()).await.unwrap();
        for _ in 0..5 {
            assert!(matches!(accounts::authenticate(&pool, "alice", "guess", Some("127.0.0.9")).await, Err(PlatformError::BadCredentials)));
        }
        assert!(matches!(accounts::authenticate(&pool, "alice", "correct horse", Some("127.0.0.9")).await, Err(PlatformError::Throttled { .. })));
        accounts::reset_password(&pool, admin.id, alice.id, "a-temporary-password").await.unwrap();
        let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM login_failures WHERE key LIKE 'user:alice|%'").fetch_one(&pool).await.unwrap();
        assert_eq!(left, 0, "the reset cleared the account's failures");
        accounts::authenticate(&pool, "alice", "a-temporary-password", Some("127.0.0.9")).await.unwrap();
    }
}
