//! The sign-in form with an LDAP directory behind it (issue #37), through
//! the real router on port 0 and Debian's slapd on loopback: a directory
//! account signs in and gets its mapped group; wrong passwords and unknown
//! names answer alike; a user in no mapped group reads why; a move in the
//! directory ends the sessions of the old group; a directory that is down
//! says so while the local admin still signs in.

use gantry_core::Role;
use gantry_platform::{db::Pool, fleet::Fleet, machines::Admissions, sso, workspace::Limits};
use gantry_server::{bootstrap, ldap_args, router, security::Security};
use gantry_testkit::{
    install,
    serve::Served,
    slapd::{self, Slapd},
};
use reqwest::StatusCode;
use std::{sync::Arc, time::Duration};

const ADMIN_PASSWORD: &str = "admin-password-1";

struct Site {
    served: Served,
    pool: Pool,
    dir: Slapd,
    _tmp: tempfile::TempDir,
}

async fn start() -> Site {
    let dir = Slapd::start();
    let ldap = sso::ldap::LdapSettings {
        url: dir.ldaps_url(),
        starttls: false,
        bind_dn: Some(slapd::SERVICE_DN.into()),
        bind_password: Some(slapd::SERVICE_PASSWORD.into()),
        user_base: slapd::PEOPLE.into(),
        user_filter: "(uid={username})".into(),
        group_base: Some(slapd::GROUPS.into()),
        group_filter: "(member={dn})".into(),
        ca_file: Some(dir.write_file("ca-file.pem", &dir.ca_pem)),
        username_attr: "uid".into(),
        timeout: Duration::from_secs(10),
    }
    .check()
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let pool = install::database(tmp.path()).await;
    bootstrap::ensure_admin(&pool, "admin", Some(ADMIN_PASSWORD)).await.unwrap();
    for g in ["ml", "vision"] {
        gantry_platform::accounts::create_group(&pool, None, g, 2).await.unwrap();
    }
    let admin = gantry_platform::accounts::list_users(&pool).await.unwrap().remove(0);
    sso::mapping::add_mapping(&pool, admin.id, "ml", "ml", Role::User, 10).await.unwrap();
    sso::mapping::add_mapping(&pool, admin.id, "vision", "vision", Role::User, 20).await.unwrap();
    let site = tmp.path().join("site");
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    let (router_pool, ldap) = (pool.clone(), Some(Arc::new(ldap)));
    let served = Served::start(site, false, |opts| async move {
        let dispatch = Arc::new(tokio::sync::Notify::new());
        let admissions = Admissions::start(router_pool.clone(), dispatch.clone());
        let app = router::build_secured(
            opts,
            Security::default(),
            Limits::default(),
            router_pool,
            admissions,
            dispatch,
            Fleet::new(),
        )
        .await
        .unwrap();
        ldap_args::layer(app, ldap)
    })
    .await;
    Site { served, pool, dir, _tmp: tmp }
}

async fn login(site: &Site, client: &reqwest::Client, user: &str, pw: &str) -> (StatusCode, String) {
    let res = gantry_testkit::serve::sign_in(client, site.served.addr, user, pw).await;
    (res.status(), res.text().await.unwrap())
}

/// The dashboard as `client` sees it: 200 when signed in.
async fn dashboard(site: &Site, client: &reqwest::Client) -> StatusCode {
    client.get(site.served.url("/")).send().await.unwrap().status()
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn the_sign_in_form_signs_directory_accounts_in() {
        let site = start().await;
        let alice = site.served.client();
        let (status, body) = login(&site, &alice, "alice", "pw-alice").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let me: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!((me["username"].as_str(), me["group_name"].as_str()), (Some("alice"), Some("ml")));
        assert_eq!(dashboard(&site, &alice).await, StatusCode::OK);

        // A wrong password and an unknown name: the same answer.
        let (s1, b1) = login(&site, &site.served.client(), "alice", "nope").await;
        let (s2, b2) = login(&site, &site.served.client(), "nobody-here", "nope").await;
        assert_eq!((s1, &b1), (s2, &b2));
        // (the page words it "wrong username or password")
        assert_eq!(s1, StatusCode::UNAUTHORIZED, "{b1}");
        assert!(b1.contains("BadCredentials"), "{b1}");

        // In no mapped group: told why, and no account.
        let (status, body) = login(&site, &site.served.client(), "bob", "pw-bob").await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert!(body.contains("no group that may use Gantry"), "{body}");
    }
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn a_move_in_the_directory_ends_the_old_sessions_and_a_down_directory_says_so() {
        let mut site = start().await;
        let first = site.served.client();
        assert_eq!(login(&site, &first, "dave", "pw-dave").await.0, StatusCode::OK);
        assert_eq!(dashboard(&site, &first).await, StatusCode::OK);
        site.dir.modify(
            "dn: cn=ml,ou=groups,dc=example,dc=org\nchangetype: modify\ndelete: member\nmember: uid=dave,ou=people,dc=example,dc=org\n\n\
             dn: cn=vision,ou=groups,dc=example,dc=org\nchangetype: modify\nadd: member\nmember: uid=dave,ou=people,dc=example,dc=org\n",
        );
        let second = site.served.client();
        let (status, body) = login(&site, &second, "dave", "pw-dave").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body.contains("\"group_name\":\"vision\""), "{body}");
        assert_eq!(dashboard(&site, &second).await, StatusCode::OK);
        assert_ne!(dashboard(&site, &first).await, StatusCode::OK, "the session of the old group ended");

        site.dir.stop();
        let (status, body) = login(&site, &site.served.client(), "alice", "pw-alice").await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert!(body.contains("the directory does not answer"), "{body}");
        let admin = site.served.client();
        assert_eq!(login(&site, &admin, "admin", ADMIN_PASSWORD).await.0, StatusCode::OK);
        let audit: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'sso.group_changed'")
            .fetch_one(&site.pool)
            .await
            .unwrap();
        assert_eq!(audit, 1);
    }
}
