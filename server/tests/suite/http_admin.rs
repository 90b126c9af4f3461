//! The admin boundary, foreign origins and the 404 page, over real HTTP.

use crate::common;

use common::{count, login, TestServer, ADMIN_PASSWORD};
use gantry_core::Role;
use reqwest::{header, StatusCode};

gantry_testkit::timed_test! {
    async fn non_admins_get_403_from_admin_pages_and_functions() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        server.add_user("dave", "daves-password", Role::User).await;
        let client = server.client();
        assert_eq!(login(&server, &client, "dave", "daves-password").await.status(), StatusCode::OK);

        let page = client.get(server.url("/admin")).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::FORBIDDEN);
        assert!(page.text().await.unwrap().contains("Administrators only"));
        let list = client.post(server.url("/api/admin/users")).send().await.unwrap();
        assert_eq!(list.status(), StatusCode::FORBIDDEN);
        let create = client
            .post(server.url("/api/admin/create_user"))
            .form(&[("username", "mallory"), ("password", "mallorys-pass"), ("role", "admin"), ("group", "")])
            .send()
            .await
            .unwrap();
        assert_eq!(create.status(), StatusCode::FORBIDDEN);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM users WHERE username = 'mallory'").await, 0);

        let anonymous = server.client().post(server.url("/api/admin/users")).send().await.unwrap();
        assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    }
}

gantry_testkit::timed_test! {
    async fn admin_creates_users_and_bad_input_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let client = server.client();
        assert_eq!(login(&server, &client, "admin", ADMIN_PASSWORD).await.status(), StatusCode::OK);
        let create = |u: &str, p: &str, role: &str, group: &str| {
            client
                .post(server.url("/api/admin/create_user"))
                .form(&[("username", u), ("password", p), ("role", role), ("group", group)])
                .send()
        };
        let ok = create("erin", "erins-password", "user", "").await.unwrap();
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(login(&server, &server.client(), "erin", "erins-password").await.status(), StatusCode::OK);

        let long = "e".repeat(300);
        let bad = [
            ("erin", "erins-password", "user", "", StatusCode::CONFLICT, "the username \\\"erin\\\" is taken"),
            ("", "some-password", "user", "", StatusCode::BAD_REQUEST, "username is required"),
            (long.as_str(), "some-password", "user", "", StatusCode::BAD_REQUEST, "username must be at most 32 characters"),
            ("frank", "short", "user", "", StatusCode::BAD_REQUEST, "password must be at least 8 characters"),
            ("frank", "franks-password", "root", "", StatusCode::BAD_REQUEST, "unknown role"),
            ("frank", "franks-password", "user", "no-such", StatusCode::NOT_FOUND, "group \\\"no-such\\\" not found"),
        ];
        for (u, p, r, g, status, message) in bad {
            let res = create(u, p, r, g).await.unwrap();
            assert_eq!(res.status(), status, "{}", &u[..u.len().min(10)]);
            let body = res.text().await.unwrap();
            assert!(body.contains(message), "{body} should say {message}");
        }
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM users").await, 2, "admin and erin only");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM audit_log WHERE action = 'user.create'").await, 2);
    }
}

gantry_testkit::timed_test! {
    async fn foreign_origins_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let raw = reqwest::Client::new();
        let res = raw
            .post(server.url("/api/login"))
            .header(header::ORIGIN, "http://attacker.example")
            .form(&[("username", "admin"), ("password", ADMIN_PASSWORD)])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN);
        assert_eq!(res.text().await.unwrap(), "cross-origin request refused");
        let fetch_meta = raw
            .post(server.url("/api/login"))
            .header("sec-fetch-site", "cross-site")
            .form(&[("username", "admin"), ("password", ADMIN_PASSWORD)])
            .send()
            .await
            .unwrap();
        assert_eq!(fetch_meta.status(), StatusCode::FORBIDDEN);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM tower_sessions").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn unknown_pages_are_404_and_missing_files_too() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let client = server.client();
        login(&server, &client, "admin", ADMIN_PASSWORD).await;
        let page = client.get(server.url("/no/such/page")).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::NOT_FOUND);
        assert!(page.text().await.unwrap().contains("Page not found"));
        let file = client.get(server.url("/pkg/missing.js")).send().await.unwrap();
        assert_eq!(file.status(), StatusCode::NOT_FOUND);
    }
}

gantry_testkit::timed_test! {
    async fn admin_sets_a_groups_images_and_regions_and_bad_ids_change_nothing() {
        use gantry_platform::{accounts, images};
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let pool = &server.pool;
        let group = accounts::create_group(pool, None, "ml", 4).await.unwrap().id;
        images::create_image(pool, None, "devbox", "gantry/devbox:1", "", true).await.unwrap();
        let other = images::create_image(pool, None, "other", "gantry/other:1", "", false).await.unwrap().id.to_string();
        let local = count(pool, "SELECT id FROM regions WHERE code = 'local'").await.to_string();
        let group_s = group.to_string();
        let save = |client: &reqwest::Client, quota: &str, extra: &[(&str, &str)]| {
            let mut form = vec![("group_id", group_s.as_str()), ("gpu_quota", quota), ("max_gpus_per_machine", "2"), ("allowed_models", "")];
            form.extend_from_slice(extra);
            client.post(server.url("/api/admin/update_group")).form(&form).send()
        };
        let images_of = |g: i64| format!("SELECT COUNT(*) FROM group_images WHERE group_id = {g}");
        let regions_of = |g: i64| format!("SELECT COUNT(*) FROM group_regions WHERE group_id = {g}");

        // A member may not.
        server.add_user("dave", "daves-password", Role::User).await;
        let dave = server.client();
        login(&server, &dave, "dave", "daves-password").await;
        let res = save(&dave, "4", &[("allowed_images[]", ""), ("allowed_images[]", &other)]).await.unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN);
        assert_eq!(dave.post(server.url("/api/admin/group_access")).send().await.unwrap().status(), StatusCode::FORBIDDEN);
        assert_eq!(count(pool, &images_of(group)).await, 0);

        // The admin saves both lists as the page's checkboxes post them.
        let admin = server.client();
        login(&server, &admin, "admin", ADMIN_PASSWORD).await;
        let res = save(&admin, "4", &[("allowed_images[]", ""), ("allowed_images[]", &other), ("allowed_regions[]", ""), ("allowed_regions[]", &local)]).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{}", res.text().await.unwrap());
        assert_eq!(count(pool, &format!("SELECT image_id FROM group_images WHERE group_id = {group}")).await.to_string(), other);
        assert_eq!(count(pool, &format!("SELECT region_id FROM group_regions WHERE group_id = {group}")).await.to_string(), local);
        let audit: String = sqlx::query_scalar("SELECT detail FROM audit_log WHERE action = 'group.update' ORDER BY id DESC LIMIT 1").fetch_one(pool).await.unwrap();
        assert!(audit.contains("images all → other") && audit.contains("regions all → local"), "{audit}");
        let shown = admin.post(server.url("/api/admin/group_access")).send().await.unwrap().text().await.unwrap();
        assert!(shown.contains("\"other\"") && shown.contains("\"local\""), "{shown}");

        // An unknown id (or one that is not a number): 400, nothing changes, not even the quota.
        let audits = count(pool, "SELECT COUNT(*) FROM audit_log").await;
        for (field, bad, says) in [("allowed_images[]", "9999", "there is no image #9999"), ("allowed_regions[]", "9999", "there is no region #9999"), ("allowed_images[]", "x", "whole number")] {
            let res = save(&admin, "7", &[(field, ""), (field, bad)]).await.unwrap();
            assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{field}={bad}");
            let body = res.text().await.unwrap();
            assert!(body.contains(says), "{body} should say {says}");
        }
        assert_eq!(count(pool, &format!("SELECT gpu_quota FROM groups WHERE id = {group}")).await, 4);
        assert_eq!((count(pool, &images_of(group)).await, count(pool, &regions_of(group)).await), (1, 1));
        assert_eq!(count(pool, "SELECT COUNT(*) FROM audit_log").await, audits);

        // CPU and memory limits: both or neither, and one out of range refuses the whole edit.
        for (extra, says) in [
            (vec![("max_cpus_per_machine", "4")], "both the CPUs and the memory"),
            (vec![("max_memory_gb_per_machine", "8")], "both the CPUs and the memory"),
            (vec![("max_cpus_per_machine", "4"), ("max_memory_gb_per_machine", "0")], "memory per machine"),
        ] {
            let res = save(&admin, "7", &extra).await.unwrap();
            assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{extra:?}");
            let body = res.text().await.unwrap();
            assert!(body.contains(says), "{body} should say {says}");
        }
        assert_eq!(count(pool, &format!("SELECT gpu_quota FROM groups WHERE id = {group}")).await, 4, "nothing of a refused edit is kept");
        assert_eq!(count(pool, "SELECT COUNT(*) FROM audit_log").await, audits);
        let res = save(&admin, "4", &[("max_cpus_per_machine", "4"), ("max_memory_gb_per_machine", "8")]).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(count(pool, &format!("SELECT max_cpus_per_machine * 1000 + max_memory_gb_per_machine FROM groups WHERE id = {group}")).await, 4008);

        // The snapshot quota: a bad one refuses the edit; a good one is kept, and shown.
        for bad in ["-1", "1001", "many"] {
            let res = save(&admin, "7", &[("snapshot_quota", bad)]).await.unwrap();
            assert_eq!(res.status(), StatusCode::BAD_REQUEST, "snapshot_quota={bad}");
            assert!(res.text().await.unwrap().contains("snapshot quota"));
        }
        assert_eq!(count(pool, &format!("SELECT gpu_quota * 1000 + snapshot_quota FROM groups WHERE id = {group}")).await, 4010);
        let res = save(&admin, "4", &[("snapshot_quota", "3")]).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(res.text().await.unwrap().contains("\"snapshot_quota\":3"));
        assert_eq!(count(pool, &format!("SELECT snapshot_quota FROM groups WHERE id = {group}")).await, 3);

        // None ticked: all images again; a post without the regions field leaves them.
        let res = save(&admin, "4", &[("allowed_images[]", "")]).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!((count(pool, &images_of(group)).await, count(pool, &regions_of(group)).await), (0, 1));
        let audit: String = sqlx::query_scalar("SELECT detail FROM audit_log WHERE action = 'group.update' ORDER BY id DESC LIMIT 1").fetch_one(pool).await.unwrap();
        assert!(audit.contains("images other → all") && !audit.contains("regions"), "{audit}");
    }
}

gantry_testkit::timed_test! {
    async fn a_group_policy_saved_from_a_stale_page_is_refused_with_409_and_changes_nothing() {
        use gantry_platform::{accounts, catalogue};
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let pool = &server.pool;
        let group = accounts::create_group(pool, None, "ml", 16).await.unwrap().id.to_string();
        let root = count(pool, "SELECT id FROM users WHERE username = 'admin'").await;
        let east = catalogue::create_region(pool, root, "east", "East", "").await.unwrap().id.to_string();
        let admin = server.client();
        login(&server, &admin, "admin", ADMIN_PASSWORD).await;
        let rev_of = format!("SELECT policy_rev FROM groups WHERE id = {group}");
        // (GPU quota, snapshot quota, allowed regions, revision) of ml as stored.
        let state = format!("SELECT gpu_quota * 1000000 + snapshot_quota * 10000 + (SELECT COUNT(*) FROM group_regions WHERE group_id = g.id) * 100 + policy_rev FROM groups g WHERE id = {group}");

        // The page's forms carry the revision they show.
        let loaded = count(pool, &rev_of).await.to_string();
        let html = admin.get(server.url("/admin/groups")).send().await.unwrap().text().await.unwrap();
        assert!(html.contains(&format!(r#"name="policy_rev" value="{loaded}""#)), "the policy form posts its revision");

        let save = |quota: &'static str, regions: &[&str], snapshots: &'static str, rev: &str| {
            let mut form = vec![("group_id", group.clone()), ("gpu_quota", quota.into()), ("max_gpus_per_machine", "2".into()), ("allowed_models", String::new())];
            form.push(("allowed_regions[]", String::new()));
            form.extend(regions.iter().map(|r| ("allowed_regions[]", r.to_string())));
            form.extend([("snapshot_quota", snapshots.to_string()), ("policy_rev", rev.to_string())]);
            admin.post(server.url("/api/admin/update_group")).form(&form)
        };

        // Admin A restricts ml to east and cuts its quota from the page loaded at `loaded`.
        let res = save("8", &[&east], "10", &loaded).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{}", res.text().await.unwrap());
        let after_a = count(pool, &state).await;
        assert_eq!(after_a, 8_100_101, "quota 8, snapshots 10, one region, revision 1");
        let audits = count(pool, "SELECT COUNT(*) FROM audit_log").await;

        // Admin B, from a page loaded at the same time, changes only the snapshot quota.
        let res = save("16", &[], "3", &loaded).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CONFLICT);
        let body = res.text().await.unwrap();
        assert!(body.contains("group ml was changed by someone else since this page was loaded") && body.contains("reload to see it; nothing was saved"), "{body}");
        assert_eq!(count(pool, &state).await, after_a, "A's region and quota stand");
        assert_eq!(count(pool, "SELECT COUNT(*) FROM audit_log").await, audits);

        // Without JavaScript the form is sent back to its page, which shows why.
        let res = save("16", &[], "3", &loaded)
            .header(header::ACCEPT, "text/html,application/xhtml+xml")
            .header(header::REFERER, server.url("/admin/groups"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::FOUND);
        let back = res.headers()[header::LOCATION].to_str().unwrap().to_owned();
        let html = admin.get(&back).send().await.unwrap().text().await.unwrap();
        assert!(html.contains(r#"data-testid="form-error""#) && html.contains("group ml was changed by someone else"), "{back}");
        assert_eq!(count(pool, &state).await, after_a);

        // A revision that is not a whole number: refused, nothing saved.
        let res = save("16", &[], "3", "abc").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        assert!(res.text().await.unwrap().contains("policy revision"));
        assert_eq!(count(pool, &state).await, after_a);

        // Reloaded, B saves over the current revision; a post without one (scripts) is not checked.
        let res = save("8", &[&east], "3", &count(pool, &rev_of).await.to_string()).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{}", res.text().await.unwrap());
        assert_eq!(count(pool, &state).await, 8_030_102);
        let res = save("8", &[&east], "3", "").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(count(pool, &rev_of).await, 3);
    }
}
