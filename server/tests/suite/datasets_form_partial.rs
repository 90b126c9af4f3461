//! The no-JavaScript upload form with several files: when a later file is
//! refused, the page still says which of the earlier ones were stored (they
//! are listed), beside the refusal, so that sending the form again is not
//! refused in turn for a file that is already there.

use crate::datasets_support::{limits, start};
use reqwest::StatusCode;

gantry_testkit::timed_test! {
    async fn a_refused_later_file_still_names_the_files_stored_before_it() {
        let s = start(limits()).await;
        let alice = s.browser("alice").await;
        let res = alice.put(s.url("/datasets/coco/v1/upload?name=b.bin")).body("already here").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);

        let boundary = "gantryboundary";
        let mut form = String::new();
        for (name, text) in [("a.bin", "new file"), ("b.bin", "a second b")] {
            form.push_str(&format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n{text}\r\n"));
        }
        form.push_str(&format!("--{boundary}--\r\n"));
        let res = alice
            .post(s.url("/datasets/coco/v1/upload"))
            .header("Content-Type", format!("multipart/form-data; boundary={boundary}"))
            .header("Accept", "text/html")
            .body(form)
            .send()
            .await
            .unwrap();
        assert!(res.status().is_redirection(), "{}", res.status());
        let location = res.headers()["location"].to_str().unwrap().to_string();
        assert_eq!(location, "/datasets/coco/v1", "the outcome is kept in the session, not the URL");
        assert_eq!(std::fs::read(s.region.join("coco/v1/images/a.bin")).unwrap(), b"new file");

        // Both show on the version page: the stored file and the refused one.
        let page = alice.get(s.url(&location)).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        let page = page.text().await.unwrap();
        assert!(page.contains("data-testid=\"upload-done\""), "{page}");
        assert!(page.contains("data-testid=\"upload-error\""), "{page}");
        assert!(page.contains("already exists") && page.contains("b.bin"), "{page}");
        assert!(page.replace("<!>", "").contains("Uploaded: a.bin"), "the stored a.bin is not mentioned: {page}");
    }
}
