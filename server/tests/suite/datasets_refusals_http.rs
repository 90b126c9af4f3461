//! What an upload is refused before its body touches a store, and what a
//! refused resumable request leaves: a name clashing with a folder (409,
//! either way round), a PATCH running past the declared length (400, the
//! bytes held before it kept, with or without Content-Length), a PATCH of
//! an upload cancelled meanwhile (404, nothing begun in its place).

use crate::datasets_support;

use datasets_support::*;
use gantry_platform::datasets::{self, store::DirStore, Datasets};
use reqwest::StatusCode;
use serde_json::Value;
use std::{collections::HashMap, sync::Arc};

const UPLOADS: &str = "/api/v1/datasets/coco/versions/v1/uploads";

async fn error_of(res: reqwest::Response) -> (StatusCode, String) {
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    (status, body["error"].as_str().unwrap_or_default().to_string())
}

gantry_testkit::timed_test! {
    async fn a_name_clashing_with_a_folder_is_refused_before_its_body_either_way_round() {
        let s = start(limits()).await;
        let http = reqwest::Client::new();
        let put = |name: &str| http.put(s.file_url(name)).bearer_auth(&s.alice_token).body("some bytes").send();
        assert_eq!(put("a").await.unwrap().status(), StatusCode::CREATED);
        assert_eq!(put("c/d").await.unwrap().status(), StatusCode::CREATED);

        // A file's name as a folder, and a folder's name as a file; asking
        // to replace does not change that.
        for (name, says) in [("a/b", "a is a file there"), ("a/b?replace=1", "a is a file there"), ("c", "it is a folder there, holding c/d"), ("c?replace=1", "holding c/d")] {
            let (status, error) = error_of(put(name).await.unwrap()).await;
            assert_eq!(status, StatusCode::CONFLICT, "{name}: {error}");
            assert!(error.contains(says), "{name}: {error}");
        }
        // Uploads in progress hold their names the same way.
        let begin = http.post(s.url(&format!("{UPLOADS}/e/f"))).bearer_auth(&s.alice_token).header("upload-length", "10").send().await.unwrap();
        assert_eq!(begin.status(), StatusCode::CREATED);
        let (status, error) = error_of(put("e").await.unwrap()).await;
        assert_eq!(status, StatusCode::CONFLICT, "{error}");
        let again = http.post(s.url(&format!("{UPLOADS}/e"))).bearer_auth(&s.alice_token).header("upload-length", "10").send().await.unwrap();
        assert_eq!(again.status(), StatusCode::CONFLICT);

        // Nothing of the refused ones was stored, not even for a moment.
        assert_eq!(files_under(&s.central), ["coco/v1/images/a", "coco/v1/images/c/d"]);
        assert_eq!(files_under(&s.region), ["coco/v1/images/a", "coco/v1/images/c/d"]);
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 1, "only e/f's");
    }
}

gantry_testkit::timed_test! {
    async fn a_patch_running_past_the_declared_length_keeps_what_the_server_held() {
        let s = start(limits()).await;
        let http = reqwest::Client::new();
        let url = s.url(&format!("{UPLOADS}/a.bin"));
        let res = http.post(&url).bearer_auth(&s.alice_token).header("upload-length", "10").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        let patch = |offset: u64, body: &'static str| {
            http.patch(&url).bearer_auth(&s.alice_token).header("upload-offset", offset).header("content-type", "application/offset+octet-stream").body(body).send()
        };
        let head = || async { http.head(&url).bearer_auth(&s.alice_token).send().await.unwrap() };
        let res = patch(0, "01234").await.unwrap();
        assert_eq!(res.status(), StatusCode::NO_CONTENT);
        assert_eq!(res.headers()["upload-offset"], "5");

        // Six bytes from 5 of a 10-byte file: refused as it stands.
        let (status, error) = error_of(patch(5, "56789!").await.unwrap()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
        let held = head().await;
        assert_eq!(held.status(), StatusCode::OK, "the upload is still there after: {error}");
        assert_eq!(held.headers()["upload-offset"], "5");
        assert!(error.contains("runs past the upload's declared length of 10 bytes"), "{error}");

        // The same without a Content-Length: found out while receiving,
        // and the five bytes held before it are still all that is kept.
        let auth = vec![("Authorization", format!("Bearer {}", s.alice_token)), ("Upload-Offset", "5".to_string())];
        let answer = raw_chunked(s.addr, "PATCH", &format!("{UPLOADS}/a.bin"), &auth, &[b"567", b"89!"]).await;
        assert_eq!(answer.status, 400, "{}", answer.body);
        let held = head().await;
        assert_eq!(held.status(), StatusCode::OK, "the upload is still there after: {}", answer.body);
        assert_eq!(held.headers()["upload-offset"], "5");
        assert!(answer.body.contains("longer than the declared 10 bytes") && answer.body.contains("keeps the 5 bytes"), "{}", answer.body);

        // And it goes on from there to the whole file.
        let res = patch(5, "56789").await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        let file: Value = res.json().await.unwrap();
        assert_eq!(file["sha256"], "84d89877f0d4041efb6bf91a16f0248f2fd573e6af05c19f96bedb9f882f7882", "sha256 of 0123456789");
    }
}

gantry_testkit::timed_test! {
    async fn a_patch_of_an_upload_cancelled_meanwhile_begins_nothing() {
        let scratch = tempfile::tempdir().unwrap();
        let region = Arc::new(Hooked::new("test store", scratch.path()));
        let s = start_with(limits(), Some(region.clone())).await;
        let http = reqwest::Client::new();
        let url = s.url(&format!("{UPLOADS}/a.bin"));
        let res = http.post(&url).bearer_auth(&s.alice_token).header("upload-length", "10").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);

        // The upload is cancelled (another tab, say) just as the PATCH asks
        // how much of it the stores hold.
        let stores = Datasets::new(Arc::new(DirStore::new(&s.central)), HashMap::new(), Some(s.dir.path().join("regions")), limits());
        let (pool, alice) = (s.pool.clone(), s.alice.clone());
        region.on_temp_len.before_once(async move { datasets::cancel_upload(&pool, &stores, &alice, "coco", "v1", "a.bin").await.unwrap() });
        let res = http.patch(&url).bearer_auth(&s.alice_token).header("upload-offset", "0").body("0123456789").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{}", res.text().await.unwrap());

        // No upload was begun in its place, and no file listed.
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_files").await, 0);
        assert_eq!(files_under(&s.central), Vec::<String>::new());
    }
}
