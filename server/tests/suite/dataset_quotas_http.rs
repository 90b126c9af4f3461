//! The admin console's dataset quotas over real HTTP: only admins set them,
//! bad figures change nothing, a set quota is listed and audited, and an
//! upload over it is refused with the numbers.

use crate::datasets_support;

use datasets_support::{limits, start, PASSWORD};
use gantry_core::Role;
use gantry_platform::accounts::{self, NewUser};
use reqwest::StatusCode;
use serde_json::Value;

gantry_testkit::timed_test! {
    async fn admins_set_dataset_quotas_and_uploads_respect_them() {
        let s = start(limits()).await;
        accounts::create_user(&s.pool, None, NewUser { username: "root", password: PASSWORD, role: Role::Admin, group: None }).await.unwrap();
        let admin = s.browser("root").await;
        let alice = s.browser("alice").await;
        let set = |client: &reqwest::Client, quota: &str| {
            client.post(s.url("/api/admin/set_dataset_quota")).form(&[("group", "ml"), ("quota_gb", quota)]).send()
        };

        assert_eq!(set(&alice, "1").await.unwrap().status(), StatusCode::FORBIDDEN, "users cannot set quotas");
        for bad in ["abc", "-1", "1e9", ""] {
            let res = set(&admin, bad).await.unwrap();
            assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{bad:?}");
            assert!(res.text().await.unwrap().contains("dataset quota"), "{bad:?}");
        }
        let res = admin.post(s.url("/api/admin/set_dataset_quota")).form(&[("group", "nope"), ("quota_gb", "1")]).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_quotas").await, 0, "refusals change nothing");

        // 0.00000002 GB = 21 bytes.
        assert_eq!(set(&admin, "0.00000002").await.unwrap().status(), StatusCode::OK);
        assert_eq!(s.count("SELECT max_bytes FROM dataset_quotas").await, 21);
        assert_eq!(s.count("SELECT COUNT(*) FROM audit_log WHERE action = 'dataset.quota'").await, 1);
        assert_eq!(set(&admin, "0.00000003").await.unwrap().status(), StatusCode::OK);
        let details: Vec<String> =
            sqlx::query_scalar("SELECT detail FROM audit_log WHERE action = 'dataset.quota' ORDER BY id").fetch_all(&s.pool).await.unwrap();
        assert_eq!(details, ["group ml dataset quota the default → 21 bytes", "group ml dataset quota 21 bytes → 32 bytes"], "old and new values");
        assert_eq!(set(&admin, "0.00000002").await.unwrap().status(), StatusCode::OK);

        let http = reqwest::Client::new();
        let put = |name: &str, body: &'static str| http.put(s.file_url(name)).bearer_auth(&s.alice_token).body(body).send();
        assert_eq!(put("a.txt", "0123456789").await.unwrap().status(), StatusCode::CREATED);
        let res = put("b.txt", "0123456789abcdef").await.unwrap();
        let status = res.status();
        let body: Value = res.json().await.unwrap();
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
        assert_eq!(body["error"], "group ml holds 10 B of its 21 B dataset quota; this file needs 16 B more");

        let list: Vec<Value> = admin.post(s.url("/api/admin/dataset_storage")).send().await.unwrap().json().await.unwrap();
        let ml = list.iter().find(|r| r["group"] == "ml").expect("group ml listed");
        assert_eq!((ml["used_bytes"].as_u64(), ml["quota_bytes"].as_u64(), ml["own_quota"].as_bool()), (Some(10), Some(21), Some(true)));
        let other = list.iter().find(|r| r["group"] == "other").expect("group other listed");
        assert_eq!(other["own_quota"], false, "the default applies");
        assert_eq!(alice.post(s.url("/api/admin/dataset_storage")).send().await.unwrap().status(), StatusCode::FORBIDDEN);
    }
}

/// The ml group with a quota of `bytes`, set by an admin; the admin's
/// browser, for the console's storage overview.
async fn with_quota(s: &datasets_support::Server, bytes: u64) -> reqwest::Client {
    let root = accounts::create_user(
        &s.pool,
        None,
        NewUser { username: "root", password: PASSWORD, role: Role::Admin, group: None },
    )
    .await
    .unwrap();
    gantry_platform::datasets::set_quota(&s.pool, &root, "ml", bytes).await.unwrap();
    s.browser("root").await
}

/// Group ml's (used, reserved) bytes as the admin console shows them.
async fn ml_storage(s: &datasets_support::Server, admin: &reqwest::Client) -> (u64, u64) {
    let list: Vec<Value> = admin.post(s.url("/api/admin/dataset_storage")).send().await.unwrap().json().await.unwrap();
    let ml = list.iter().find(|r| r["group"] == "ml").expect("group ml listed");
    (ml["used_bytes"].as_u64().unwrap(), ml["reserved_bytes"].as_u64().unwrap())
}

gantry_testkit::timed_test! {
    async fn a_replace_in_progress_reserves_only_what_it_adds() {
        let s = start(limits()).await;
        let admin = with_quota(&s, 15).await;
        let http = reqwest::Client::new();
        let put = |name: &str, body: &'static str| http.put(s.file_url(name)).bearer_auth(&s.alice_token).body(body).send();
        assert_eq!(put("a.txt", "0123456789").await.unwrap().status(), StatusCode::CREATED);

        // A replace of a.txt by a file of the same size needs no more room:
        // the file it replaces already counts.
        let uploads = s.url("/api/v1/datasets/coco/versions/v1/uploads/a.txt");
        let res = http.post(format!("{uploads}?replace=1")).bearer_auth(&s.alice_token).header("upload-length", "10").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED, "{}", res.text().await.unwrap());
        assert_eq!(ml_storage(&s, &admin).await, (10, 0), "the replace reserves nothing more");

        // So the 5 bytes left are still there for another file.
        let res = put("b.txt", "01234").await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED, "{}", res.text().await.unwrap());
        assert_eq!(ml_storage(&s, &admin).await, (15, 0));

        // And the replace finishes within the quota.
        let res = http
            .patch(&uploads)
            .bearer_auth(&s.alice_token)
            .header("upload-offset", "0")
            .header("content-type", "application/offset+octet-stream")
            .body("abcdefghij")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::CREATED, "{}", res.text().await.unwrap());
        assert_eq!(ml_storage(&s, &admin).await, (15, 0));
    }
}

gantry_testkit::timed_test! {
    async fn an_upload_of_unknown_length_over_the_quota_is_refused_with_the_groups_numbers() {
        let s = start(limits()).await;
        let admin = with_quota(&s, 15).await;
        let http = reqwest::Client::new();
        assert_eq!(http.put(s.file_url("a.txt")).bearer_auth(&s.alice_token).body("0123456789").send().await.unwrap().status(), StatusCode::CREATED);

        // Ten bytes with no Content-Length (a chunked PUT): only 5 fit.
        let auth = vec![("Authorization", format!("Bearer {}", s.alice_token))];
        let answer = datasets_support::raw_chunked(s.addr, "PUT", "/api/v1/datasets/coco/versions/v1/files/b.txt", &auth, &[b"01234", b"56789"]).await;
        assert_eq!(answer.status, 413, "{}", answer.body);
        let error = &answer.body;
        assert!(error.contains("group ml holds 10 B of its 15 B dataset quota; this file needs "), "{error}");
        assert!(!error.contains("upload limit"), "the quota was the bound, not the size limit: {error}");
        assert_eq!(ml_storage(&s, &admin).await, (10, 0), "nothing kept, nothing reserved");
    }
}
