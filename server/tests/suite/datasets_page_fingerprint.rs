//! The upload page names the file it sends (`X-Gantry-Fingerprint`, from
//! the file's modification time and its first and last bytes) when it
//! begins and continues a resumable upload. An unfinished upload of the
//! same name and length that holds bytes of a *different* file is started
//! over from 0, never continued: the listed file is the chosen one, not
//! the old file's first bytes followed by the new one's last. The same
//! file chosen again still continues; scripts that send no fingerprint
//! keep finding their upload by name and length.

use crate::datasets_support::{limits, sha, start, Server};
use reqwest::{Client, StatusCode};
use serde_json::Value;

const FILE_A: &str = "1700000000000-aaaaaaaaaaaaaaaa";
const FILE_B: &str = "1700000099999-bbbbbbbbbbbbbbbb";
const URL: &str = "/api/v1/datasets/coco/versions/v1/uploads/same.bin";

async fn begin(s: &Server, c: &Client, fingerprint: Option<&str>) -> (StatusCode, Option<String>, String) {
    let mut req = c.post(s.url(URL)).header("Upload-Length", "10");
    if let Some(f) = fingerprint {
        req = req.header("X-Gantry-Fingerprint", f);
    }
    let res = req.send().await.unwrap();
    let offset = res.headers().get("upload-offset").map(|v| v.to_str().unwrap().to_string());
    (res.status(), offset, res.text().await.unwrap())
}

async fn patch(s: &Server, c: &Client, fingerprint: &str, offset: u64, body: &'static [u8]) -> reqwest::Response {
    c.patch(s.url(URL))
        .header("X-Gantry-Fingerprint", fingerprint)
        .header("Upload-Offset", offset.to_string())
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn listed_sha(s: &Server, c: &Client) -> String {
    let list: Value =
        c.get(s.url("/api/v1/datasets/coco/versions/v1/files")).send().await.unwrap().json().await.unwrap();
    let file = list["files"].as_array().unwrap().iter().find(|f| f["name"] == "same.bin").expect("same.bin is listed");
    file["sha256"].as_str().unwrap().to_string()
}

gantry_testkit::timed_test! {
    async fn another_file_of_the_same_name_and_length_starts_over_instead_of_continuing() {
        let s = start(limits()).await;
        let alice = s.browser("alice").await;
        assert_eq!(begin(&s, &alice, Some(FILE_A)).await.0, StatusCode::CREATED);
        assert_eq!(patch(&s, &alice, FILE_A, 0, b"AAAAA").await.status(), StatusCode::NO_CONTENT);

        // The user chooses another file of the same name and size.
        let (status, offset, _) = begin(&s, &alice, Some(FILE_B)).await;
        assert_eq!(offset.as_deref(), Some("0"), "the held bytes of the other file must not be continued");
        assert_eq!(status, StatusCode::CREATED);
        let res = patch(&s, &alice, FILE_B, 0, b"BBBBBBBBBB").await;
        assert_eq!(res.status(), StatusCode::CREATED);
        assert_eq!(listed_sha(&s, &alice).await, sha(b"BBBBBBBBBB"));
        assert_eq!(std::fs::read(s.region.join("coco/v1/images/same.bin")).unwrap(), b"BBBBBBBBBB");
        assert_eq!(std::fs::read(s.central.join("coco/v1/images/same.bin")).unwrap(), b"BBBBBBBBBB");
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn the_same_file_chosen_again_continues_and_a_script_without_a_fingerprint_too() {
        let s = start(limits()).await;
        let alice = s.browser("alice").await;
        begin(&s, &alice, Some(FILE_A)).await;
        assert_eq!(patch(&s, &alice, FILE_A, 0, b"01234").await.status(), StatusCode::NO_CONTENT);
        let (status, offset, _) = begin(&s, &alice, Some(FILE_A)).await;
        assert_eq!((status, offset.as_deref()), (StatusCode::OK, Some("5")), "the same file continues");
        // A script asking without a fingerprint finds it by name and length, as before.
        let (status, offset, _) = begin(&s, &alice, None).await;
        assert_eq!((status, offset.as_deref()), (StatusCode::OK, Some("5")));
        let res = alice.patch(s.url(URL)).header("Upload-Offset", "5").body("56789").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        assert_eq!(listed_sha(&s, &alice).await, sha(b"0123456789"));
    }
}

gantry_testkit::timed_test! {
    async fn a_page_never_continues_bytes_it_cannot_vouch_for_nor_writes_into_another_files_upload() {
        let s = start(limits()).await;
        let alice = s.browser("alice").await;
        // Begun by a script (no fingerprint): the page cannot know whose bytes these are.
        begin(&s, &alice, None).await;
        let res = alice.patch(s.url(URL)).header("Upload-Offset", "0").body("SSSSS").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NO_CONTENT);
        let (status, offset, _) = begin(&s, &alice, Some(FILE_A)).await;
        assert_eq!((status, offset.as_deref()), (StatusCode::CREATED, Some("0")));
        assert_eq!(patch(&s, &alice, FILE_A, 0, b"AAAAA").await.status(), StatusCode::NO_CONTENT);

        // Another tab starts file B over; tab A's next piece is refused, with no offset to follow.
        begin(&s, &alice, Some(FILE_B)).await;
        let res = patch(&s, &alice, FILE_A, 0, b"AAAAA").await;
        assert_eq!(res.status(), StatusCode::CONFLICT);
        assert!(res.headers().get("upload-offset").is_none());
        let body: Value = res.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("different file"), "{body}");
        assert_eq!(alice.head(s.url(URL)).send().await.unwrap().headers()["upload-offset"], "0");

        // While a request writes the upload, it is not thrown away under it.
        let writing = "UPDATE dataset_uploads SET writer = 'other', writer_expires = strftime('%s','now') + 60";
        sqlx::query(writing).execute(&s.pool).await.unwrap();
        let (status, _, body) = begin(&s, &alice, Some(FILE_A)).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(body.contains("another request is writing"), "{body}");
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads WHERE fingerprint = '1700000099999-bbbbbbbbbbbbbbbb'").await, 1);

        // A fingerprint that is not one is refused, changing nothing.
        let res = alice.post(s.url(URL)).header("Upload-Length", "10").header("X-Gantry-Fingerprint", "x".repeat(200)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    }
}
