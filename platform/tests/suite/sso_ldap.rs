//! Sign-in through a real OpenLDAP directory (issue #37): Debian's slapd
//! started by `gantry_testkit::slapd` on loopback, LDAPS and StartTLS with
//! a CA made for it. Accounts made just in time in their mapped group,
//! wrong passwords, users in no mapped group, a move in the directory
//! between two sign-ins, admin from a directory group, hostile user names,
//! a CA that did not sign the server's certificate, a directory that is
//! down, and the flags checked at start.

use gantry_core::Role;
use gantry_platform::{
    accounts,
    db::Pool,
    password::Gate,
    sso,
    sso::ldap::{LdapConfig, LdapSettings},
    tokens, PlatformError,
};
use gantry_testkit::{
    install::Install,
    slapd::{self, Slapd},
};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);

pub fn settings(url: String, starttls: bool, ca_file: Option<std::path::PathBuf>) -> LdapSettings {
    LdapSettings {
        url,
        starttls,
        bind_dn: Some(slapd::SERVICE_DN.into()),
        bind_password: Some(slapd::SERVICE_PASSWORD.into()),
        user_base: slapd::PEOPLE.into(),
        user_filter: "(uid={username})".into(),
        group_base: Some(slapd::GROUPS.into()),
        group_filter: "(member={dn})".into(),
        ca_file,
        username_attr: "uid".into(),
        timeout: Duration::from_secs(10),
    }
}

/// The directory over LDAPS trusting its CA, and an installation with
/// groups ml, vision, ops mapped from cn=ml (by DN), vision (by name) and
/// gantry-admins (admin).
async fn setup() -> (Slapd, LdapConfig, Install) {
    let dir = Slapd::start();
    let ca = dir.write_file("ca-file.pem", &dir.ca_pem);
    let cfg = settings(dir.ldaps_url(), false, Some(ca)).check().unwrap();
    let inst = Install::new().await;
    let admin = inst.user("root", "root-password-1", Role::Admin, None).await;
    for g in ["ml", "vision", "ops"] {
        inst.group(g, 4).await;
    }
    let p = &inst.pool;
    sso::mapping::add_mapping(p, admin.id, "cn=ml,ou=groups,dc=example,dc=org", "ml", Role::User, 10).await.unwrap();
    sso::mapping::add_mapping(p, admin.id, "vision", "vision", Role::User, 20).await.unwrap();
    sso::mapping::add_mapping(p, admin.id, "gantry-admins", "ops", Role::Admin, 30).await.unwrap();
    (dir, cfg, inst)
}

async fn sign_in(pool: &Pool, cfg: &LdapConfig, name: &str, pw: &str) -> Result<accounts::User, PlatformError> {
    sso::password_sign_in(pool, &Gate::shared(), Some(cfg), name, pw, Some("127.0.0.1")).await
}

async fn audits(inst: &Install, action: &str) -> i64 {
    inst.count(&format!("SELECT COUNT(*) FROM audit_log WHERE action = '{action}'")).await
}

#[test]
fn sign_in_makes_the_account_in_its_mapped_group_once() {
    gantry_testkit::run("sso_ldap_first_sign_in", LIMIT, || async {
        let (_dir, cfg, inst) = setup().await;
        let alice = sign_in(&inst.pool, &cfg, "alice", "pw-alice").await.unwrap();
        assert_eq!((alice.username.as_str(), alice.group_name.as_str(), alice.role), ("alice", "ml", Role::User));
        let again = sign_in(&inst.pool, &cfg, "Alice ", "pw-alice").await.unwrap();
        assert_eq!(again.id, alice.id, "the second sign-in finds the same account");
        assert_eq!(inst.count("SELECT COUNT(*) FROM users WHERE username = 'alice'").await, 1);
        assert_eq!(
            inst.count("SELECT COUNT(*) FROM external_identities WHERE provider = 'ldap' AND subject = 'uid=alice,ou=people,dc=example,dc=org'").await,
            1
        );
        assert_eq!(audits(&inst, "sso.account_created").await, 1);
        assert_eq!(audits(&inst, "sso.sign_in").await, 2);
        // No local password signs in to a directory account.
        let local = accounts::authenticate(&inst.pool, "alice", "pw-alice", None).await;
        assert!(matches!(local, Err(PlatformError::BadCredentials)), "{local:?}");
    });
}

#[test]
fn wrong_password_unknown_user_and_empty_password_answer_alike() {
    gantry_testkit::run("sso_ldap_wrong_password", LIMIT, || async {
        let (_dir, cfg, inst) = setup().await;
        for (name, pw) in [("alice", "wrong"), ("nobody", "pw-alice"), ("alice", "pw-bob")] {
            let r = sign_in(&inst.pool, &cfg, name, pw).await;
            assert!(matches!(r, Err(PlatformError::BadCredentials)), "{name}/{pw}: {r:?}");
        }
        // An empty password never reaches a bind (an unauthenticated bind
        // would "succeed"): refused as a missing password by the form's
        // check, and by the directory sign-in itself.
        assert!(sign_in(&inst.pool, &cfg, "alice", "").await.is_err());
        assert!(matches!(cfg.authenticate("alice", "").await, Err(sso::ldap::LdapFailure::BadCredentials)));
        assert_eq!(inst.count("SELECT COUNT(*) FROM users WHERE username = 'alice'").await, 0);
    });
}

#[test]
fn hostile_user_names_cannot_change_the_filter() {
    gantry_testkit::run("sso_ldap_hostile_names", LIMIT, || async {
        let (_dir, cfg, inst) = setup().await;
        for name in ["al*", "*", "*)(uid=alice", "alice)(|(uid=*", "alice\\2a", "a\0lice"] {
            let r = sign_in(&inst.pool, &cfg, name, "pw-alice").await;
            assert!(
                matches!(r, Err(PlatformError::BadCredentials) | Err(PlatformError::Invalid(_))),
                "{name:?}: {r:?}"
            );
        }
        assert_eq!(inst.count("SELECT COUNT(*) FROM users WHERE username <> 'root'").await, 0);
    });
}

#[test]
fn a_user_in_no_mapped_group_is_refused_and_an_unmapped_account_disabled() {
    gantry_testkit::run("sso_ldap_unmapped", LIMIT, || async {
        let (_dir, cfg, inst) = setup().await;
        let r = sign_in(&inst.pool, &cfg, "bob", "pw-bob").await;
        match r {
            Err(PlatformError::Refused(m)) => assert_eq!(m, sso::NO_GROUP_MESSAGE),
            other => panic!("{other:?}"),
        }
        assert_eq!(inst.count("SELECT COUNT(*) FROM users WHERE username = 'bob'").await, 0);
        assert_eq!(audits(&inst, "sso.refused").await, 1);

        // Alice has an account and a token; her group's mapping goes.
        let alice = sign_in(&inst.pool, &cfg, "alice", "pw-alice").await.unwrap();
        tokens::create(&inst.pool, &alice, "script").await.unwrap();
        let ml = sso::mapping::list_mappings(&inst.pool).await.unwrap().into_iter().find(|m| m.gantry_group == "ml");
        let root = accounts::list_users(&inst.pool).await.unwrap().into_iter().find(|u| u.username == "root").unwrap();
        sso::mapping::remove_mapping(&inst.pool, root.id, ml.unwrap().id).await.unwrap();
        let r = sign_in(&inst.pool, &cfg, "alice", "pw-alice").await;
        assert!(matches!(&r, Err(PlatformError::Refused(m)) if m == sso::NO_GROUP_MESSAGE), "{r:?}");
        let after = accounts::user_by_id(&inst.pool, alice.id).await.unwrap().unwrap();
        assert!(after.disabled, "the account is disabled");
        assert!(after.session_gen > alice.session_gen, "its sessions ended");
        assert_eq!(
            inst.count("SELECT COUNT(*) FROM api_tokens WHERE revoked_at IS NULL").await,
            0,
            "its tokens revoked"
        );

        // Mapped again: the next sign-in enables it.
        sso::mapping::add_mapping(&inst.pool, root.id, "ml", "ml", Role::User, 5).await.unwrap();
        let back = sign_in(&inst.pool, &cfg, "alice", "pw-alice").await.unwrap();
        assert!(!back.disabled);
        assert_eq!(back.id, alice.id);
    });
}

#[test]
fn a_move_in_the_directory_moves_the_account_and_ends_its_sessions() {
    gantry_testkit::run("sso_ldap_group_change", LIMIT, || async {
        let (dir, cfg, inst) = setup().await;
        let before = sign_in(&inst.pool, &cfg, "dave", "pw-dave").await.unwrap();
        assert_eq!(before.group_name, "ml");
        tokens::create(&inst.pool, &before, "script").await.unwrap();
        dir.modify(
            "dn: cn=ml,ou=groups,dc=example,dc=org\nchangetype: modify\ndelete: member\nmember: uid=dave,ou=people,dc=example,dc=org\n\n\
             dn: cn=vision,ou=groups,dc=example,dc=org\nchangetype: modify\nadd: member\nmember: uid=dave,ou=people,dc=example,dc=org\n",
        );
        let after = sign_in(&inst.pool, &cfg, "dave", "pw-dave").await.unwrap();
        assert_eq!((after.id, after.group_name.as_str()), (before.id, "vision"));
        assert!(after.session_gen > before.session_gen, "sessions of the old group end");
        assert_eq!(inst.count("SELECT COUNT(*) FROM api_tokens WHERE revoked_at IS NULL").await, 0);
        assert_eq!(audits(&inst, "sso.group_changed").await, 1);
        assert_eq!(audits(&inst, "user.group").await, 1, "through the accounts' own group change");
    });
}

#[test]
fn admin_comes_from_a_directory_group() {
    gantry_testkit::run("sso_ldap_admin", LIMIT, || async {
        let (_dir, cfg, inst) = setup().await;
        let carol = sign_in(&inst.pool, &cfg, "carol", "pw-carol").await.unwrap();
        assert_eq!((carol.role, carol.group_name.as_str()), (Role::Admin, "ops"));
    });
}

#[test]
fn a_local_account_of_the_same_name_is_not_taken_over() {
    gantry_testkit::run("sso_ldap_local_same_name", LIMIT, || async {
        let (_dir, cfg, inst) = setup().await;
        inst.user("erin", "local-password-1", Role::User, None).await;
        // Local passwords on: the local account's password, as before.
        assert!(sign_in(&inst.pool, &cfg, "erin", "local-password-1").await.is_ok());
        assert!(matches!(sign_in(&inst.pool, &cfg, "erin", "pw-erin").await, Err(PlatformError::BadCredentials)));
        // Local passwords off: the directory's erin is refused, not linked.
        let root = accounts::list_users(&inst.pool).await.unwrap().into_iter().find(|u| u.username == "root").unwrap();
        sso::settings::set_local_passwords(&inst.pool, root.id, true, Some("root")).await.unwrap();
        let r = sign_in(&inst.pool, &cfg, "erin", "pw-erin").await;
        assert!(matches!(&r, Err(PlatformError::Refused(m)) if m.contains("already exists")), "{r:?}");
        assert_eq!(inst.count("SELECT COUNT(*) FROM external_identities").await, 0);
        assert!(matches!(
            sign_in(&inst.pool, &cfg, "erin", "local-password-1").await,
            Err(PlatformError::BadCredentials)
        ));
        // The break-glass admin still signs in locally.
        assert!(sign_in(&inst.pool, &cfg, "root", "root-password-1").await.is_ok());
    });
}

#[test]
fn starttls_works_and_a_ca_that_did_not_sign_is_refused() {
    gantry_testkit::run("sso_ldap_tls", LIMIT, || async {
        let (dir, _cfg, inst) = setup().await;
        let ca = dir.write_file("ca2.pem", &dir.ca_pem);
        let starttls = settings(dir.ldap_url(), true, Some(ca)).check().unwrap();
        assert_eq!(sign_in(&inst.pool, &starttls, "alice", "pw-alice").await.unwrap().group_name, "ml");
        let other = dir.write_file("other.pem", &dir.other_ca_pem);
        for cfg in [settings(dir.ldaps_url(), false, Some(other.clone())), settings(dir.ldap_url(), true, Some(other))]
        {
            let r = sign_in(&inst.pool, &cfg.check().unwrap(), "alice", "pw-alice").await;
            match r {
                Err(PlatformError::Refused(m)) => {
                    assert!(m.contains("TLS") && m.contains("--ldap-ca-file"), "{m}")
                }
                other => panic!("{other:?}"),
            }
        }
    });
}

#[test]
fn a_directory_that_is_down_says_so_and_local_admins_still_sign_in() {
    gantry_testkit::run("sso_ldap_down", LIMIT, || async {
        let (mut dir, cfg, inst) = setup().await;
        dir.stop();
        let r = sign_in(&inst.pool, &cfg, "alice", "pw-alice").await;
        assert!(matches!(&r, Err(PlatformError::Refused(m)) if m.contains("the directory does not answer")), "{r:?}");
        assert!(sign_in(&inst.pool, &cfg, "root", "root-password-1").await.is_ok());
    });
}

#[test]
fn bad_flags_say_what_is_wrong() {
    let ok = || settings("ldaps://127.0.0.1:636".into(), false, None);
    let cases: Vec<(LdapSettings, &str)> = vec![
        (LdapSettings { url: "ldap//nowhere".into(), ..ok() }, "--ldap-url"),
        (LdapSettings { url: "ldap://127.0.0.1".into(), ..ok() }, "in clear"),
        (LdapSettings { url: "http://127.0.0.1".into(), ..ok() }, "ldaps://"),
        (LdapSettings { starttls: true, ..ok() }, "--ldap-starttls"),
        (LdapSettings { user_filter: "(uid=alice)".into(), ..ok() }, "{username}"),
        (LdapSettings { user_filter: "(uid={username}".into(), ..ok() }, "not an LDAP filter"),
        (LdapSettings { bind_password: None, ..ok() }, "go together"),
        (LdapSettings { ca_file: Some("/nonexistent/ca.pem".into()), ..ok() }, "--ldap-ca-file"),
    ];
    for (s, says) in cases {
        let e = s.clone().check().unwrap_err();
        assert!(e.contains(says), "{s:?}: {e}");
    }
    assert!(ok().check().is_ok());
}
