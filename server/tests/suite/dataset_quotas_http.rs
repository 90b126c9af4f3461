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
