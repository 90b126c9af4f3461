//! Uploads in progress on the version page: an abandoned upload (a tab
//! closed mid-way) is listed with what the server holds of it, and its
//! Cancel — with JavaScript or without — frees the version for Seal, the
//! name and the quota it reserved. Another group never sees or cancels it;
//! one whose request is writing it now is refused with a word to wait.

use crate::datasets_support;

use datasets_support::*;
use gantry_platform::datasets::{self, Limits, NewDataset};
use reqwest::{header, StatusCode};

const UPLOADS: &str = "/api/v1/datasets/coco/versions/v1/uploads";
const CANCEL: &str = "/api/cancel_dataset_upload";
/// What a browser without JavaScript accepts (server functions redirect it).
const HTML: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

fn small_quota() -> Limits {
    Limits { default_quota_bytes: 1000, ..limits() }
}

/// A resumable upload of 600 bytes begun on the page, 100 of them sent,
/// then the tab closed: nothing cancels it.
async fn abandon(s: &Server, client: &reqwest::Client, name: &str) {
    let url = s.url(&format!("{UPLOADS}/{name}"));
    let res = client.post(&url).header("Upload-Length", "600").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let res = client.patch(&url).header("Upload-Offset", "0").body(vec![7u8; 100]).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
}

async fn page(client: &reqwest::Client, url: &str) -> (StatusCode, String) {
    let res = client.get(url).send().await.unwrap();
    (res.status(), res.text().await.unwrap())
}

/// Where a redirect sends the browser, as a URL to GET.
fn target(s: &Server, res: &reqwest::Response) -> String {
    let location = res.headers()[header::LOCATION].to_str().unwrap();
    if location.starts_with('/') {
        s.url(location)
    } else {
        location.to_string()
    }
}

/// The page's row for the upload of `name` (its opening tag and cells).
fn row<'a>(html: &'a str, name: &str) -> Option<&'a str> {
    let at = html.find(&format!(r#"data-testid="upload-in-progress" data-name="{name}""#))?;
    let end = at + html[at..].find("</tr>")?;
    Some(&html[at..end])
}

async fn seal(s: &Server, client: &reqwest::Client, version: &str) -> (StatusCode, String) {
    let res = client
        .post(s.url("/api/seal_dataset_version"))
        .form(&[("code", "coco"), ("version", version)])
        .send()
        .await
        .unwrap();
    (res.status(), res.text().await.unwrap())
}

gantry_testkit::timed_test! {
    async fn an_abandoned_upload_is_listed_and_its_cancel_frees_seal_name_and_quota() {
        let s = start(small_quota()).await;
        let alice = s.browser("alice").await;
        abandon(&s, &alice, "big.bin").await;

        let (status, html) = page(&alice, &s.url("/datasets/coco/v1")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(html.contains(r#"data-testid="uploads-in-progress""#), "no uploads-in-progress section");
        let listed = row(&html, "big.bin").expect("the abandoned upload is listed");
        assert!(listed.contains(r#"data-held="100""#) && listed.contains(r#"data-total="600""#), "{listed}");
        assert!(listed.contains("100 B of 600 B") && listed.contains("alice"), "{listed}");
        assert!(listed.contains(r#"data-receiving="no""#), "{listed}");
        assert!(listed.contains(&format!(r#"action="{CANCEL}""#)), "a Cancel form: {listed}");

        // What it blocks: Seal (pointing at the section), the name, the quota.
        let (status, refusal) = seal(&s, &alice, "v1").await;
        assert_eq!(status, StatusCode::CONFLICT, "{refusal}");
        assert!(refusal.contains("Uploads in progress"), "{refusal}");
        let other = alice.put(s.url("/datasets/coco/v1/upload?name=big.bin")).body(vec![1u8; 500]).send().await.unwrap();
        assert_eq!(other.status(), StatusCode::CONFLICT);
        let fits = alice.put(s.url("/datasets/coco/v1/upload?name=small.bin")).body(vec![1u8; 500]).send().await.unwrap();
        assert_eq!(fits.status(), StatusCode::PAYLOAD_TOO_LARGE, "600 reserved + 500 > 1000");

        let res = alice.post(s.url(CANCEL)).form(&[("code", "coco"), ("version", "v1"), ("name", "big.bin")]).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{}", res.text().await.unwrap());
        let (_, html) = page(&alice, &s.url("/datasets/coco/v1")).await;
        assert_eq!(row(&html, "big.bin"), None, "cancelled: no longer listed");
        assert!(files_under(&s.central.join(".gantry-tmp")).is_empty() && files_under(&s.region.join(".gantry-tmp")).is_empty());

        // The name and the quota are free: 500 bytes under that name fit now.
        let res = alice.put(s.url("/datasets/coco/v1/upload?name=big.bin")).body(vec![1u8; 500]).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        let (status, answer) = seal(&s, &alice, "v1").await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
}

gantry_testkit::timed_test! {
    async fn another_group_neither_sees_nor_cancels_an_upload_in_progress() {
        let s = start(limits()).await;
        let alice = s.browser("alice").await;
        let carol = s.browser("carol").await;
        abandon(&s, &alice, "big.bin").await;
        let form = [("code", "coco"), ("version", "v1"), ("name", "big.bin")];

        // coco is ml's, group-only: for carol it does not exist.
        let (status, html) = page(&carol, &s.url("/datasets/coco/v1")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(!html.contains("big.bin"));
        let res = carol.post(s.url(CANCEL)).form(&form).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        let res = carol.post(s.url(CANCEL)).header(header::ACCEPT, HTML).header(header::REFERER, s.url("/datasets")).form(&form).send().await.unwrap();
        assert!(res.status().is_redirection());
        // Refused without JavaScript too: sent back, nothing cancelled (below).
        assert!(!res.headers()[header::LOCATION].to_str().unwrap().contains("__err="));
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 1);

        // A public dataset: carol reads its files, never its uploads.
        let public = NewDataset { code: "open", name: "Open", region: "local", category: "images", description: "", visibility: "public" };
        datasets::create_dataset(&s.pool, &s.alice, &public).await.unwrap();
        datasets::create_version(&s.pool, &s.alice, "open", "v1").await.unwrap();
        let res = alice.post(s.url("/api/v1/datasets/open/versions/v1/uploads/pub.bin")).header("Upload-Length", "50").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        let (status, html) = page(&carol, &s.url("/datasets/open/v1")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(!html.contains("pub.bin") && !html.contains(r#"data-testid="uploads-in-progress""#));
        let res = carol.post(s.url(CANCEL)).form(&[("code", "open"), ("version", "v1"), ("name", "pub.bin")]).send().await.unwrap();
        // Refused as the page's server functions refuse (409), in the DELETE route's words.
        assert_eq!(res.status(), StatusCode::CONFLICT);
        assert!(res.text().await.unwrap().contains("only its members may change it"));
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 2, "nothing cancelled");
        let (_, html) = page(&alice, &s.url("/datasets/open/v1")).await;
        assert!(row(&html, "pub.bin").is_some(), "the owning group sees it");
    }
}

gantry_testkit::timed_test! {
    async fn the_cancel_form_works_without_javascript_and_waits_for_a_writer() {
        let s = start(limits()).await;
        let alice = s.browser("alice").await;
        abandon(&s, &alice, "big.bin").await;
        let form = [("code", "coco"), ("version", "v1"), ("name", "big.bin")];
        let post = || alice.post(s.url(CANCEL)).header(header::ACCEPT, HTML).header(header::REFERER, s.url("/datasets/coco/v1")).form(&form).send();

        // A request is writing it now (its lease is held): refused, saying to wait.
        sqlx::query("UPDATE dataset_uploads SET writer = 'a-live-request', writer_expires = ?").bind(gantry_platform::now() + 60).execute(&s.pool).await.unwrap();
        let (_, html) = page(&alice, &s.url("/datasets/coco/v1")).await;
        assert!(row(&html, "big.bin").is_some_and(|r| r.contains(r#"data-receiving="yes""#)), "shown as receiving");
        let res = alice.post(s.url(CANCEL)).form(&form).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CONFLICT);
        assert!(res.text().await.unwrap().contains("still receiving; try again in a few seconds"));
        let res = post().await.unwrap();
        assert!(res.status().is_redirection());
        let back = target(&s, &res);
        let (_, html) = page(&alice, &back).await;
        assert!(html.contains("still receiving; try again in a few seconds"), "{back}");
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 1);

        // The request has ended: the form cancels and comes back to the page.
        sqlx::query("UPDATE dataset_uploads SET writer = NULL, writer_expires = 0").execute(&s.pool).await.unwrap();
        let res = post().await.unwrap();
        assert_eq!(res.status(), StatusCode::FOUND);
        let back = target(&s, &res);
        assert!(back.contains("/datasets/coco/v1"), "{back}");
        let (status, html) = page(&alice, &back).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(row(&html, "big.bin"), None);
        assert!(html.contains("Upload cancelled."), "the page says it worked");
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
    }
}
