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
