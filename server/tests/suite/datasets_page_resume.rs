//! The upload page's resumable uploads ride the signed-in session (no API
//! token), on names with dots; asking again for the same name and length
//! (the page after a dropped connection, or the file chosen again) finds
//! the unfinished upload at the offset the server holds.

use crate::datasets_support;

use datasets_support::{limits, start};
use reqwest::StatusCode;

gantry_testkit::timed_test! {
    async fn the_page_resumes_uploads_with_its_session() {
        let s = start(limits()).await;
        let alice = s.browser("alice").await;
        let url = s.url("/api/v1/datasets/coco/versions/v1/uploads/train.bin");
        let res = alice.post(&url).header("Upload-Length", "10").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        assert_eq!(res.headers()["upload-offset"], "0");
        let res = alice.patch(&url).header("Upload-Offset", "0").body("01234").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NO_CONTENT);

        let res = alice.post(&url).header("Upload-Length", "10").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "the unfinished upload is found, not restarted");
        assert_eq!(res.headers()["upload-offset"], "5");
        assert_eq!(alice.head(&url).send().await.unwrap().headers()["upload-offset"], "5");
        let res = alice.patch(&url).header("Upload-Offset", "5").body("56789").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_files WHERE name = 'train.bin' AND size = 10").await, 1);
        assert_eq!(std::fs::read(s.region.join("coco/v1/images/train.bin")).unwrap(), b"0123456789");

        let anonymous = reqwest::Client::new();
        let res = anonymous.post(s.url("/api/v1/datasets/coco/versions/v1/uploads/other.bin")).header("Upload-Length", "3").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 0, "nothing started");
    }
}
