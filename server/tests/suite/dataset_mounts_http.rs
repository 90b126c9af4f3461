//! Compute tasks asking for dataset mounts over the JSON API: an open
//! (unsealed) version, another group's private dataset, an unknown version
//! and a malformed name are refused with nothing written; a sealed version
//! is accepted, recorded with the task, and keeps the version from being
//! deleted while the task waits.

use crate::datasets_support;

use datasets_support::{limits, start};
use gantry_platform::{
    catalogue,
    datasets::{self, store::DirStore, Datasets},
};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::{collections::HashMap, sync::Arc};

fn task(datasets: &[&str]) -> Value {
    json!({
        "name": "train", "framework": "PyTorch", "framework_version": "2.4", "interpreter": "Python",
        "interpreter_version": "3.11", "command": ["ls", "/datasets/coco/v1"], "gpus": 1, "datasets": datasets
    })
}

gantry_testkit::timed_test! {
    async fn compute_tasks_mount_only_sealed_visible_versions() {
        let s = start(limits()).await;
        let image = catalogue::create_region_image(&s.pool, s.alice.id, "local", "gantry/devbox:latest", "amd64", "training").await.unwrap();
        let master = catalogue::create_master_image(
            &s.pool,
            s.alice.id,
            &catalogue::NewMasterImage { name: "torch", interpreter: "Python", interpreter_version: "3.11", framework: "PyTorch", framework_version: "2.4" },
        )
        .await
        .unwrap();
        catalogue::set_link(&s.pool, s.alice.id, master, image.id, true).await.unwrap();
        let http = reqwest::Client::new();
        let put = http.put(s.file_url("train.txt")).bearer_auth(&s.alice_token).body("row 1\n").send().await.unwrap();
        assert_eq!(put.status(), StatusCode::CREATED, "{}", put.text().await.unwrap());
        let submit = |token: &str, body: Value| http.post(s.url("/api/v1/compute-tasks")).bearer_auth(token).json(&body).send();

        let refusals = [
            (&s.alice_token, task(&["coco/v1"]), StatusCode::CONFLICT, "not sealed"),
            (&s.alice_token, task(&["coco/v7"]), StatusCode::NOT_FOUND, "version v7"),
            (&s.alice_token, task(&["coco/../etc"]), StatusCode::BAD_REQUEST, "dataset mount"),
            (&s.alice_token, task(&["coco/v1,coco/v2"]), StatusCode::BAD_REQUEST, "one dataset-code/version"),
        ];
        for (token, body, status, says) in refusals {
            let res = submit(token, body.clone()).await.unwrap();
            assert_eq!(res.status(), status, "{body}");
            let text = res.text().await.unwrap();
            assert!(text.contains(says), "{body}: {text}");
        }
        datasets::seal_version(&s.pool, &s.alice, "coco", "v1").await.unwrap();
        let res = submit(&s.carol_token, task(&["coco/v1"])).await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "another group's private dataset does not exist for carol");
        assert_eq!(s.count("SELECT COUNT(*) FROM compute_tasks").await, 0, "refusals write nothing");

        let res = submit(&s.alice_token, task(&["coco/v1"])).await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED, "{}", res.text().await.unwrap());
        let targets: Vec<String> =
            sqlx::query_scalar("SELECT json_extract(j.value, '$.target') FROM compute_tasks c, json_each(c.datasets) j").fetch_all(&s.pool).await.unwrap();
        assert_eq!(targets, ["/datasets/coco/v1"]);
        let host: String = sqlx::query_scalar("SELECT json_extract(j.value, '$.host_dir') FROM compute_tasks c, json_each(c.datasets) j")
            .fetch_one(&s.pool)
            .await
            .unwrap();
        assert!(std::path::Path::new(&host).join("images/train.txt").is_file(), "the recorded directory holds the version's files: {host}");

        // The task waits (no node in this server): its version stays.
        let stores = Datasets::new(Arc::new(DirStore::new(&s.central)), HashMap::new(), Some(s.dir.path().join("regions")), limits());
        let err = datasets::delete_version(&s.pool, &stores, &s.alice, "coco", "v1").await.unwrap_err();
        assert!(err.to_string().contains("compute task #"), "{err}");
    }
}

gantry_testkit::timed_test! {
    async fn deleting_a_mounted_public_version_names_only_the_owners_own_users() {
        let s = start(limits()).await;
        let image = catalogue::create_region_image(&s.pool, s.alice.id, "local", "gantry/devbox:latest", "amd64", "training").await.unwrap();
        let torch = catalogue::NewMasterImage { name: "torch", interpreter: "Python", interpreter_version: "3.11", framework: "PyTorch", framework_version: "2.4" };
        let master = catalogue::create_master_image(&s.pool, s.alice.id, &torch).await.unwrap();
        catalogue::set_link(&s.pool, s.alice.id, master, image.id, true).await.unwrap();
        sqlx::query("UPDATE datasets SET visibility = 'public' WHERE code = 'coco'").execute(&s.pool).await.unwrap();
        datasets::seal_version(&s.pool, &s.alice, "coco", "v1").await.unwrap();

        // Alice's group waits with one task on the version, carol's with two.
        let http = reqwest::Client::new();
        let mut ids = Vec::new();
        for token in [&s.alice_token, &s.carol_token, &s.carol_token] {
            let res = http.post(s.url("/api/v1/compute-tasks")).bearer_auth(token).json(&task(&["coco/v1"])).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::CREATED, "{}", res.text().await.unwrap());
            ids.push(s.count("SELECT MAX(id) FROM compute_tasks").await);
        }

        // Alice is told about her own task, and only counts of the others:
        // another group's task ids (and machine names) are not hers to see.
        let stores = Datasets::new(Arc::new(DirStore::new(&s.central)), HashMap::new(), Some(s.dir.path().join("regions")), limits());
        let refused = datasets::delete_version(&s.pool, &stores, &s.alice, "coco", "v1").await.unwrap_err().to_string();
        assert!(refused.contains(&format!("compute task #{}", ids[0])), "{refused}");
        for other in &ids[1..] {
            assert!(!refused.contains(&format!("#{other}")), "names another group's task: {refused}");
        }
        assert!(refused.contains("2 machines or compute tasks of other groups"), "{refused}");

        // Once hers is cancelled, the refusal still holds, for theirs alone.
        sqlx::query("UPDATE compute_tasks SET state = 'cancelled' WHERE id = ?").bind(ids[0]).execute(&s.pool).await.unwrap();
        let refused = datasets::delete_version(&s.pool, &stores, &s.alice, "coco", "v1").await.unwrap_err().to_string();
        assert!(!refused.contains('#'), "{refused}");
        assert!(refused.contains("2 machines or compute tasks of other groups"), "{refused}");
    }
}
