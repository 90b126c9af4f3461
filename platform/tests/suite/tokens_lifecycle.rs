//! An API token's life (issue 33, item 7): asked for with the account's
//! password (checked and throttled as a sign-in), expiring, and revoked —
//! with the audit row of the change saying so — by every change that is a
//! remedy for a leaked session or password: the user's own password
//! change, an admin's reset, disabling (enabling again revives nothing), a
//! role change, a group change. Before, only the reset revoked them, and
//! disabling only suspended them.

use gantry_testkit::install::Install;

use gantry_core::Role;
use gantry_platform::{
    accounts::{self, NewUser, User},
    db::Pool,
    password::Gate,
    tokens::{self, TokenLifetime},
    PlatformError,
};

const PW: &str = "alice-password-1";

async fn setup() -> (Install, User, User) {
    let install = Install::new().await;
    let pool = &install.pool;
    accounts::create_group(pool, None, "ml", 4).await.unwrap();
    let alice =
        accounts::create_user(pool, None, NewUser { username: "alice", password: PW, role: Role::User, group: None })
            .await
            .unwrap();
    let root = accounts::create_user(
        pool,
        None,
        NewUser { username: "root", password: "root-password-1", role: Role::Admin, group: None },
    )
    .await
    .unwrap();
    (install, alice, root)
}

async fn me(pool: &Pool, id: i64) -> User {
    accounts::user_by_id(pool, id).await.unwrap().unwrap()
}

async fn live(pool: &Pool, user_id: i64) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM api_tokens WHERE user_id = ? AND revoked_at IS NULL")
        .bind(user_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn audit_detail(pool: &Pool, action: &str) -> String {
    sqlx::query_scalar("SELECT detail FROM audit_log WHERE action = ? ORDER BY id DESC LIMIT 1")
        .bind(action)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Two tokens for the account as it is now, both working.
async fn two_tokens(pool: &Pool, id: i64) -> [String; 2] {
    let who = me(pool, id).await;
    let (_, a) = tokens::create(pool, &who, "laptop").await.unwrap();
    let (_, b) = tokens::create(pool, &who, "ci").await.unwrap();
    for t in [&a, &b] {
        assert!(tokens::authenticate(pool, t).await.unwrap().is_some(), "a new token works");
    }
    [a, b]
}

async fn dead(pool: &Pool, secrets: &[String]) {
    for t in secrets {
        assert_eq!(tokens::authenticate(pool, t).await.unwrap(), None, "the token still authenticates");
    }
}

gantry_testkit::timed_test! {
    async fn the_users_own_password_change_revokes_their_tokens() {
        let (Install { dir: _dir, pool }, alice, _) = setup().await;
        let secrets = two_tokens(&pool, alice.id).await;
        accounts::change_password(&pool, &Gate::shared(), &me(&pool, alice.id).await, PW, "alice-password-2", None).await.unwrap();
        dead(&pool, &secrets).await;
        assert_eq!(live(&pool, alice.id).await, 0);
        let detail = audit_detail(&pool, "user.change_password").await;
        assert!(detail.contains("2 API token(s) revoked"), "{detail}");
    }
}

gantry_testkit::timed_test! {
    async fn an_admins_reset_revokes_the_tokens() {
        let (Install { dir: _dir, pool }, alice, root) = setup().await;
        let secrets = two_tokens(&pool, alice.id).await;
        accounts::reset_password(&pool, root.id, alice.id, "temporary-password-1").await.unwrap();
        dead(&pool, &secrets).await;
        assert_eq!(live(&pool, alice.id).await, 0);
        let detail = audit_detail(&pool, "user.reset_password").await;
        assert!(detail.contains("2 API token(s) revoked"), "{detail}");
    }
}

gantry_testkit::timed_test! {
    async fn disabling_revokes_the_tokens_and_enabling_revives_none() {
        let (Install { dir: _dir, pool }, alice, root) = setup().await;
        let secrets = two_tokens(&pool, alice.id).await;
        accounts::set_disabled(&pool, root.id, alice.id, true).await.unwrap();
        dead(&pool, &secrets).await;
        assert_eq!(live(&pool, alice.id).await, 0, "revoked, not suspended");
        let detail = audit_detail(&pool, "user.disable").await;
        assert!(detail.contains("2 API token(s) revoked"), "{detail}");

        accounts::set_disabled(&pool, root.id, alice.id, false).await.unwrap();
        dead(&pool, &secrets).await;
        assert_eq!(live(&pool, alice.id).await, 0, "enabling again revives none");
        // The account itself works again: a new token does.
        let (_, fresh) = tokens::create(&pool, &me(&pool, alice.id).await, "new laptop").await.unwrap();
        assert!(tokens::authenticate(&pool, &fresh).await.unwrap().is_some());
    }
}

gantry_testkit::timed_test! {
    async fn a_role_change_revokes_the_tokens_either_way() {
        let (Install { dir: _dir, pool }, alice, root) = setup().await;
        let secrets = two_tokens(&pool, alice.id).await;
        accounts::set_role(&pool, root.id, alice.id, Role::Admin).await.unwrap();
        dead(&pool, &secrets).await;
        let detail = audit_detail(&pool, "user.role").await;
        assert!(detail.contains("user → admin") && detail.contains("2 API token(s) revoked"), "{detail}");

        let secrets = two_tokens(&pool, alice.id).await;
        accounts::set_role(&pool, root.id, alice.id, Role::User).await.unwrap();
        dead(&pool, &secrets).await;
        assert_eq!(live(&pool, alice.id).await, 0);

        // Setting the role it already has changes nothing, and revokes nothing.
        let secrets = two_tokens(&pool, alice.id).await;
        accounts::set_role(&pool, root.id, alice.id, Role::User).await.unwrap();
        assert_eq!(live(&pool, alice.id).await, 2);
        assert!(tokens::authenticate(&pool, &secrets[0]).await.unwrap().is_some());
    }
}

gantry_testkit::timed_test! {
    async fn a_group_change_revokes_the_tokens() {
        let (Install { dir: _dir, pool }, alice, root) = setup().await;
        let secrets = two_tokens(&pool, alice.id).await;
        accounts::set_group(&pool, root.id, alice.id, "ml").await.unwrap();
        dead(&pool, &secrets).await;
        assert_eq!(live(&pool, alice.id).await, 0);
        let detail = audit_detail(&pool, "user.group").await;
        assert!(detail.contains("group ml") && detail.contains("2 API token(s) revoked"), "{detail}");
        // A session from before the move makes no token (it would be one
        // of the old group's, made after the revocation).
        let refused = tokens::create(&pool, &alice, "stale session").await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("no token was made")), "{refused:?}");
        assert_eq!(live(&pool, alice.id).await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn an_expired_token_authenticates_as_nothing_and_a_use_is_noted() {
        let (Install { dir: _dir, pool }, alice, _) = setup().await;
        let (view, secret) = tokens::create(&pool, &alice, "laptop").await.unwrap();
        assert_eq!(view.expires_at, Some(view.created_at + 90 * 86_400), "90 days by default");
        assert_eq!(view.last_used_at, None);

        assert_eq!(tokens::authenticate(&pool, &secret).await.unwrap().map(|u| u.id), Some(alice.id));
        let listed = tokens::list(&pool, &alice).await.unwrap();
        assert!(listed[0].last_used_at.is_some(), "the use is noted and listed");
        assert!(!listed[0].expired);

        // Its expiry passed (moved back rather than waited for).
        sqlx::query("UPDATE api_tokens SET expires_at = strftime('%s', 'now') - 1 WHERE id = ?")
            .bind(view.id)
            .execute(&pool)
            .await
            .unwrap();
        assert_eq!(tokens::authenticate(&pool, &secret).await.unwrap(), None, "an expired token");
        let listed = tokens::list(&pool, &alice).await.unwrap();
        assert!(listed[0].expired && listed[0].revoked_at.is_none(), "listed as expired: {listed:?}");
    }
}

gantry_testkit::timed_test! {
    async fn a_token_is_made_only_with_the_accounts_password_and_its_lifetime() {
        let (Install { dir: _dir, pool }, alice, _) = setup().await;
        let gate = Gate::shared();
        let lifetime = TokenLifetime::days(7);
        let count = || sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM api_tokens").fetch_one(&pool);

        let wrong = tokens::create_confirmed(&pool, &gate, &alice, "not-her-password", "laptop", Some("192.0.2.7"), lifetime).await.unwrap_err();
        assert!(matches!(&wrong, PlatformError::BadRequest(why) if why.contains("password is wrong")), "{wrong:?}");
        assert_eq!(count().await.unwrap(), 0, "nothing made");
        let empty = tokens::create_confirmed(&pool, &gate, &alice, "", "laptop", Some("192.0.2.7"), lifetime).await.unwrap_err();
        assert!(matches!(empty, PlatformError::Invalid(_)), "{empty:?}");
        assert_eq!(count().await.unwrap(), 0);

        let (view, secret) = tokens::create_confirmed(&pool, &gate, &alice, PW, "laptop", Some("192.0.2.7"), lifetime).await.unwrap();
        assert_eq!(view.expires_at, Some(view.created_at + 7 * 86_400), "the lifetime asked for");
        assert!(tokens::authenticate(&pool, &secret).await.unwrap().is_some());
        assert_eq!(count().await.unwrap(), 1);

        // Wrong passwords count against the sign-in throttle: after its
        // allowance even the right one is refused, and no token is made.
        for _ in 0..5 {
            let _ = tokens::create_confirmed(&pool, &gate, &alice, "guess-guess", "more", Some("192.0.2.7"), lifetime).await;
        }
        let throttled = tokens::create_confirmed(&pool, &gate, &alice, PW, "more", Some("192.0.2.7"), lifetime).await.unwrap_err();
        assert!(matches!(throttled, PlatformError::Throttled { .. }), "{throttled:?}");
        let signin = accounts::authenticate(&pool, "alice", PW, Some("192.0.2.7")).await.unwrap_err();
        assert!(matches!(signin, PlatformError::Throttled { .. }), "the same throttle as a sign-in: {signin:?}");
        assert_eq!(count().await.unwrap(), 1);
    }
}
