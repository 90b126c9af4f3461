//! `If-Range` on downloads (RFC 9110 §13.1.5): a download resumed after
//! the file was replaced must not get the new file's bytes spliced onto
//! the old one's. The range is served only while the validator is the
//! file's current strong ETag; anything else gets 200 and the whole file.

use crate::datasets_support;

use datasets_support::*;
use reqwest::StatusCode;

gantry_testkit::timed_test! {
    async fn a_resumed_download_of_a_replaced_file_gets_the_whole_new_file() {
        let s = start(limits()).await;
        let http = reqwest::Client::new();
        let put = |url: String, body: &'static str| http.put(url).bearer_auth(&s.alice_token).body(body).send();
        assert_eq!(put(s.file_url("f"), "AAAAAAAAAA").await.unwrap().status(), StatusCode::CREATED);
        let first = http.get(s.file_url("f")).bearer_auth(&s.alice_token).send().await.unwrap();
        let old_etag = first.headers()["etag"].to_str().unwrap().to_string();
        assert_eq!(put(s.file_url("f?replace=1"), "BBBBBBBBBB").await.unwrap().status(), StatusCode::CREATED);

        let get = |if_range: String| http.get(s.file_url("f")).bearer_auth(&s.alice_token).header("Range", "bytes=2-5").header("If-Range", if_range).send();
        // The old file's ETag, a date (no Last-Modified is sent), a weak tag: the whole file.
        for stale in [old_etag.clone(), "Wed, 21 Oct 2015 07:28:00 GMT".to_string(), format!("W/{old_etag}")] {
            let res = get(stale.clone()).await.unwrap();
            assert_eq!(res.status(), StatusCode::OK, "If-Range: {stale}");
            assert!(res.headers().get("content-range").is_none(), "If-Range: {stale}");
            assert_eq!(res.text().await.unwrap(), "BBBBBBBBBB", "If-Range: {stale}");
        }
        // The current ETag: the range.
        let now = http.get(s.file_url("f")).bearer_auth(&s.alice_token).send().await.unwrap();
        let etag = now.headers()["etag"].to_str().unwrap().to_string();
        assert_ne!(etag, old_etag);
        let res = get(etag.clone()).await.unwrap();
        assert_eq!(res.status(), StatusCode::PARTIAL_CONTENT);
        assert_eq!(res.headers()["content-range"], "bytes 2-5/10");
        assert_eq!(res.text().await.unwrap(), "BBBB");
        // Weak: never a match for a range, even of the current tag.
        let res = get(format!("W/{etag}")).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.text().await.unwrap(), "BBBBBBBBBB");
    }
}

gantry_testkit::timed_test! {
    async fn a_download_while_a_replace_moves_its_copies_is_refused_for_that_moment() {
        let scratch = tempfile::tempdir().unwrap();
        let region = std::sync::Arc::new(Hooked::new("test store", scratch.path()));
        let s = start_with(limits(), Some(region.clone())).await;
        let http = reqwest::Client::new();
        let res = http.put(s.file_url("f")).bearer_auth(&s.alice_token).body("AAAAAAAAAA").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        let old_etag = http.get(s.file_url("f")).bearer_auth(&s.alice_token).send().await.unwrap().headers()["etag"].to_str().unwrap().to_string();

        // The replace's move into the region's store waits: the central
        // store's key holds the new bytes, the listed row the old file's.
        let (entered, at_move) = tokio::sync::oneshot::channel();
        let (go, wait_go) = tokio::sync::oneshot::channel::<()>();
        region.on_rename.before_once(async move {
            let _ = entered.send(());
            let _ = wait_go.await;
        });
        let replace = tokio::spawn(http.put(s.file_url("f?replace=1")).bearer_auth(&s.alice_token).body("BBBBBBBBBBBB").send());
        at_move.await.unwrap();
        // Neither the old tag with the new bytes nor a range of them spliced
        // onto the old file: after waiting a moment for the moves, a
        // refusal to try again.
        for range in [None, Some("bytes=2-5")] {
            let mut get = http.get(s.file_url("f")).bearer_auth(&s.alice_token);
            if let Some(r) = range {
                get = get.header("Range", r).header("If-Range", &old_etag);
            }
            let res = get.send().await.unwrap();
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE, "{range:?}");
            assert_eq!(res.headers()["retry-after"], "1");
            let body: serde_json::Value = res.json().await.unwrap();
            assert_eq!(body["error"], "f is being replaced right now; try again in a moment");
        }

        go.send(()).unwrap();
        assert_eq!(replace.await.unwrap().unwrap().status(), StatusCode::CREATED);
        let res = http.get(s.file_url("f")).bearer_auth(&s.alice_token).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()["etag"], format!("\"{}\"", sha(b"BBBBBBBBBBBB")));
        assert_eq!(res.text().await.unwrap(), "BBBBBBBBBBBB");
    }
}

gantry_testkit::timed_test! {
    async fn a_download_that_read_the_row_before_a_replace_reads_again_and_sends_the_new_file_under_its_tag() {
        let scratch = tempfile::tempdir().unwrap();
        let central = std::sync::Arc::new(Hooked::new("test store", scratch.path()));
        let s = start_with_stores(limits(), Some(central.clone()), None).await;
        let http = reqwest::Client::new();
        let res = http.put(s.file_url("f")).bearer_auth(&s.alice_token).body("AAAAAAAAAA").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);

        // The download has read the old file's row and is about to open the
        // file when a whole replace runs: it opens the new bytes.
        let (entered, at_open) = tokio::sync::oneshot::channel();
        let (go, wait_go) = tokio::sync::oneshot::channel::<()>();
        central.on_get.before_once(async move {
            let _ = entered.send(());
            let _ = wait_go.await;
        });
        let download = tokio::spawn(http.get(s.file_url("f")).bearer_auth(&s.alice_token).send());
        at_open.await.unwrap();
        let res = http.put(s.file_url("f?replace=1")).bearer_auth(&s.alice_token).body("BBBBBBBBBBBB").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        go.send(()).unwrap();
        // Its second look at the row sees the replace: it reads again and
        // sends the new file under the new file's tag and length.
        let res = download.await.unwrap().unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()["etag"], format!("\"{}\"", sha(b"BBBBBBBBBBBB")));
        assert_eq!(res.headers()["content-length"], "12");
        assert_eq!(res.text().await.unwrap(), "BBBBBBBBBBBB");
    }
}
