//! Dataset routes over real HTTP: tokens and group isolation, sealed
//! versions and byte quotas refused with nothing changed, downloads with
//! `Range`, the resumable protocol (POST/HEAD/PATCH with Upload-Offset),
//! a cut PUT leaving nothing, the page's session upload and its no-JS
//! form. (The 1 GiB memory test is datasets_memory.rs, alone in its process.)

use crate::datasets_support;

use datasets_support::*;
use gantry_platform::datasets;
use reqwest::StatusCode;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

gantry_testkit::timed_test! {
    async fn tokens_and_groups_decide_who_sees_and_writes_a_dataset() {
        let s = start(limits()).await;
        let http = reqwest::Client::new();
        // No token or a bad one: 401, nothing written.
        let res = http.put(s.file_url("a.txt")).body("hello").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        let res = http.put(s.file_url("a.txt")).bearer_auth("gnt_nope").body("hello").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await + s.count("SELECT COUNT(*) FROM dataset_files").await, 0);

        let res = http.put(s.file_url("dir/a.txt")).bearer_auth(&s.alice_token).body("hello").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        let file: Value = res.json().await.unwrap();
        assert_eq!(file["sha256"], "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
        assert_eq!(std::fs::read(s.central.join("coco/v1/images/dir/a.txt")).unwrap(), b"hello");
        assert_eq!(std::fs::read(s.region.join("coco/v1/images/dir/a.txt")).unwrap(), b"hello");

        // Listed and downloadable by its group.
        let list: Value = http.get(s.url("/api/v1/datasets/coco/versions/v1/files")).bearer_auth(&s.alice_token).send().await.unwrap().json().await.unwrap();
        assert_eq!(list["files"][0]["name"], "dir/a.txt");
        assert_eq!(list["files"][0]["uploaded_by"], "alice");
        let got = http.get(s.file_url("dir/a.txt")).bearer_auth(&s.alice_token).send().await.unwrap();
        assert_eq!(got.status(), StatusCode::OK);
        assert_eq!(got.text().await.unwrap(), "hello");

        // Another group: private means not found, everywhere.
        for url in [s.file_url("dir/a.txt"), s.url("/api/v1/datasets/coco/versions/v1/files")] {
            let res = http.get(&url).bearer_auth(&s.carol_token).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::NOT_FOUND, "{url}");
        }
        let res = http.put(s.file_url("b.txt")).bearer_auth(&s.carol_token).body("x").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        let all: Value = http.get(s.url("/api/v1/datasets")).bearer_auth(&s.carol_token).send().await.unwrap().json().await.unwrap();
        assert_eq!(all, serde_json::json!([]));
        let carol_browser = s.browser("carol").await;
        let page = carol_browser.get(s.url("/datasets/coco/v1/download?name=dir/a.txt")).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::NOT_FOUND);

        // Public: readable by every group, still written only by its own.
        sqlx::query("UPDATE datasets SET visibility = 'public'").execute(&s.pool).await.unwrap();
        let got = http.get(s.file_url("dir/a.txt")).bearer_auth(&s.carol_token).send().await.unwrap();
        assert_eq!(got.text().await.unwrap(), "hello");
        let res = http.put(s.file_url("b.txt")).bearer_auth(&s.carol_token).body("x").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN);
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_files").await, 1);

        // Names that climb out are refused; a duplicate needs ?replace=1.
        for bad in ["..%2Fx", "a%2F..%2F..%2Fx", "%2Fetc%2Fpasswd", "a%0Ab"] {
            let res = http.put(s.file_url(bad)).bearer_auth(&s.alice_token).body("x").send().await.unwrap();
            assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{bad}");
        }
        let res = http.put(s.file_url("dir/a.txt")).bearer_auth(&s.alice_token).body("again").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CONFLICT);
        let res = http.put(s.file_url("dir/a.txt?replace=1")).bearer_auth(&s.alice_token).body("again").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        assert_eq!(files_under(&s.central), vec!["coco/v1/images/dir/a.txt".to_string()]);
    }
}

gantry_testkit::timed_test! {
    async fn sealed_versions_and_byte_quotas_refuse_and_change_nothing() {
        let s = start(limits()).await;
        let http = reqwest::Client::new();
        let put = |name: &str, body: &'static str| http.put(s.file_url(name)).bearer_auth(&s.alice_token).body(body).send();
        assert_eq!(put("a.txt", "0123456789").await.unwrap().status(), StatusCode::CREATED);
        sqlx::query("INSERT INTO dataset_quotas (group_id, max_bytes) VALUES (?, 15)").bind(s.alice.group_id).execute(&s.pool).await.unwrap();
        let res = put("b.txt", "0123456789").await.unwrap();
        assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"], "group ml holds 10 B of its 15 B dataset quota; this file needs 10 B more");
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_files").await, 1);
        assert_eq!(files_under(&s.central), vec!["coco/v1/images/a.txt".to_string()]);

        datasets::seal_version(&s.pool, &s.alice, "coco", "v1").await.unwrap();
        let res = put("c.txt", "1").await.unwrap();
        assert_eq!(res.status(), StatusCode::CONFLICT);
        assert!(res.text().await.unwrap().contains("sealed"));
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_files").await, 1);
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
        assert_eq!(files_under(&s.central), vec!["coco/v1/images/a.txt".to_string()]);
    }
}

gantry_testkit::timed_test! {
    async fn downloads_answer_ranges() {
        let s = start(limits()).await;
        let http = reqwest::Client::new();
        http.put(s.file_url("r.bin")).bearer_auth(&s.alice_token).body("0123456789").send().await.unwrap();
        let res = http.get(s.file_url("r.bin")).bearer_auth(&s.alice_token).header("Range", "bytes=2-5").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::PARTIAL_CONTENT);
        assert_eq!(res.headers()["content-range"], "bytes 2-5/10");
        assert_eq!(res.text().await.unwrap(), "2345");
        let res = http.get(s.file_url("r.bin")).bearer_auth(&s.alice_token).header("Range", "bytes=-3").send().await.unwrap();
        assert_eq!(res.text().await.unwrap(), "789");
        let res = http.get(s.file_url("r.bin")).bearer_auth(&s.alice_token).header("Range", "bytes=10-").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::RANGE_NOT_SATISFIABLE);
        let res = http.get(s.file_url("r.bin")).bearer_auth(&s.alice_token).send().await.unwrap();
        assert_eq!(res.headers()["accept-ranges"], "bytes");
        assert_eq!(res.text().await.unwrap(), "0123456789");
    }
}

gantry_testkit::timed_test! {
    async fn a_cut_put_leaves_no_file_and_no_temporary_file() {
        let s = start(limits()).await;
        let auth = [("Authorization", format!("Bearer {}", s.alice_token))];
        let cut = raw(s.addr, "PUT", "/api/v1/datasets/coco/versions/v1/files/cut.bin", &auth, 20 << 20, Some(7 << 20), pattern).await;
        assert!(cut.is_none());
        until_no_uploads(&s).await;
        assert!(files_under(&s.central).is_empty(), "{:?}", files_under(&s.central));
        assert!(files_under(&s.region).is_empty(), "{:?}", files_under(&s.region));
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_files").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn a_resumable_upload_continues_where_the_connection_dropped() {
        let s = start(limits()).await;
        let http = reqwest::Client::new();
        let total: u64 = 12 << 20;
        let url = s.url("/api/v1/datasets/coco/versions/v1/uploads/big.bin");
        let res = http.post(&url).bearer_auth(&s.alice_token).header("Upload-Length", total).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        assert_eq!(res.headers()["upload-offset"], "0");
        // A PATCH cut after 5 MiB: what arrived is kept, invisible.
        let auth = |offset: u64| vec![("Authorization", format!("Bearer {}", s.alice_token)), ("Upload-Offset", offset.to_string())];
        let cut = raw(s.addr, "PATCH", "/api/v1/datasets/coco/versions/v1/uploads/big.bin", &auth(0), total, Some(5 << 20), pattern).await;
        assert!(cut.is_none());
        // The server's task finishes the cut on its own; HEAD says where to go on.
        let mut held = 0;
        for _ in 0..500 {
            let res = http.head(&url).bearer_auth(&s.alice_token).send().await.unwrap();
            held = res.headers()["upload-offset"].to_str().unwrap().parse::<u64>().unwrap();
            // Done when the cut request has also let go of the upload (until
            // then a PATCH would be told to retry).
            if held == 5 << 20 && s.count("SELECT COUNT(*) FROM dataset_uploads WHERE writer IS NOT NULL").await == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(held, 5 << 20);
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_files").await, 0);
        // A wrong offset is refused with the right one.
        let wrong = raw(s.addr, "PATCH", "/api/v1/datasets/coco/versions/v1/uploads/big.bin", &auth(0), 10, None, pattern).await.unwrap();
        assert_eq!(wrong.status, 409);
        assert_eq!(wrong.headers["upload-offset"], (5u64 << 20).to_string());
        // A PATCH still being received holds the upload: a second one (a
        // client retrying too soon) is told to try again, and touches nothing.
        let mut live = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        let head = format!(
            "PATCH /api/v1/datasets/coco/versions/v1/uploads/big.bin HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nAuthorization: Bearer {}\r\nUpload-Offset: {held}\r\n\r\n",
            s.addr,
            total - held,
            s.alice_token
        );
        let mut first = vec![0u8; 1000];
        pattern(held, &mut first);
        live.write_all(head.as_bytes()).await.unwrap();
        live.write_all(&first).await.unwrap();
        for _ in 0..500 {
            if s.count("SELECT COUNT(*) FROM dataset_uploads WHERE writer IS NOT NULL").await == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let busy = raw(s.addr, "PATCH", "/api/v1/datasets/coco/versions/v1/uploads/big.bin", &auth(held), 10, None, |at, buf| pattern(at + held, buf)).await.unwrap();
        assert_eq!(busy.status, 409, "{}", busy.body);
        assert_eq!(busy.headers["retry-after"], "5");
        assert!(busy.body.contains("another request is writing this upload"), "{}", busy.body);
        // That request's connection drops: its 1,000 bytes are kept and the
        // upload is free again.
        drop(live);
        for _ in 0..500 {
            if s.count("SELECT COUNT(*) FROM dataset_uploads WHERE writer IS NOT NULL").await == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let res = http.head(&url).bearer_auth(&s.alice_token).send().await.unwrap();
        let held = res.headers()["upload-offset"].to_str().unwrap().parse::<u64>().unwrap();
        assert_eq!(held, (5 << 20) + 1000);
        // The rest from the offset: the file is whole.
        let rest = raw(s.addr, "PATCH", "/api/v1/datasets/coco/versions/v1/uploads/big.bin", &auth(held), total - held, None, |at, buf| pattern(at + held, buf)).await.unwrap();
        assert_eq!(rest.status, 201, "{}", rest.body);
        let file: Value = serde_json::from_str(rest.body.trim()).unwrap_or_else(|_| serde_json::from_str(rest.body.lines().nth(1).unwrap_or("")).unwrap());
        assert_eq!(file["sha256"], pattern_sha(total));
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
        let res = http.head(&url).bearer_auth(&s.alice_token).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        assert_eq!(files_under(&s.central), vec!["coco/v1/images/big.bin".to_string()]);
    }
}

gantry_testkit::timed_test! {
    async fn the_upload_page_streams_with_the_session_and_the_form_works_without_javascript() {
        let s = start(limits()).await;
        let alice = s.browser("alice").await;
        let res = alice.put(s.url("/datasets/coco/v1/upload?name=page.txt")).body("from the page").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        // Signed out: refused.
        let res = reqwest::Client::new().put(s.url("/datasets/coco/v1/upload?name=x.txt")).body("x").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        // The form: multipart, two files, answered by a redirect to the page.
        let boundary = "gantryboundary";
        let mut form = String::new();
        for (name, text) in [("one.txt", "first file"), ("two.txt", "second file")] {
            form.push_str(&format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: text/plain\r\n\r\n{text}\r\n"));
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
        assert_eq!(location, "/datasets/coco/v1");
        // The message kept in the session shows on the version page, once.
        let back = alice.get(s.url(&location)).send().await.unwrap();
        assert_eq!(back.status(), StatusCode::OK);
        assert!(back.text().await.unwrap().replace("<!>", "").contains("Uploaded: one.txt, two.txt"));
        let again = alice.get(s.url(&location)).send().await.unwrap().text().await.unwrap();
        assert!(!again.replace("<!>", "").contains("Uploaded: one.txt, two.txt"), "said twice");
        assert_eq!(std::fs::read(s.region.join("coco/v1/images/two.txt")).unwrap(), b"second file");
        let got = alice.get(s.url("/datasets/coco/v1/download?name=one.txt")).send().await.unwrap();
        assert_eq!(got.text().await.unwrap(), "first file");
        // The version page lists them with their checksums.
        let page = alice.get(s.url("/datasets/coco/v1")).send().await.unwrap().text().await.unwrap();
        assert!(page.contains("one.txt") && page.contains(&sha_hex(b"second file")), "{page}");
    }
}

gantry_testkit::timed_test! {
    async fn the_upload_form_refuses_a_body_without_its_framing_or_an_overlong_replace() {
        // The form route has no body limit (files are streamed): what multer
        // would buffer whole — all before the first boundary, a part's
        // headers, the `replace` value — is cut with a 400, not held.
        let s = start(limits()).await;
        let cookie = session_cookie(&s, "alice").await;
        let boundary = "gantryboundary";
        let headers = [
            ("Cookie", cookie),
            ("Origin", format!("http://{}", s.addr)),
            ("Accept", "text/html".to_string()),
            ("Content-Type", format!("multipart/form-data; boundary={boundary}")),
        ];
        let len: u64 = 200 * 1024;
        // Zeros, no boundary in them (the version need not exist).
        let res = raw(s.addr, "POST", "/datasets/nope/nothing/upload", &headers, len, None, |_, buf| buf.fill(0)).await.unwrap();
        assert_eq!(res.status, 400, "{}", res.body);
        assert!(res.body.contains("more than 65536 bytes before the form's first boundary"), "{}", res.body);
        // A header block that never ends.
        let open = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\nX: ");
        let res = raw(s.addr, "POST", "/datasets/coco/v1/upload", &headers, len, None, |at, buf| starting_with(open.as_bytes(), b'h', at, buf)).await.unwrap();
        assert_eq!(res.status, 400, "{}", res.body);
        assert!(res.body.contains("a part's headers are longer than 65536 bytes"), "{}", res.body);
        // A `replace` value that never ends.
        let open = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"replace\"\r\n\r\n");
        let res = raw(s.addr, "POST", "/datasets/coco/v1/upload", &headers, len, None, |at, buf| starting_with(open.as_bytes(), b'o', at, buf)).await.unwrap();
        assert_eq!(res.status, 400, "{}", res.body);
        assert!(res.body.contains("the replace field is longer than 16 bytes"), "{}", res.body);
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await + s.count("SELECT COUNT(*) FROM dataset_files").await, 0);
        // The form itself still works, `replace` and all.
        let form = |text: &str| {
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"replace\"\r\n\r\non\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"r.txt\"\r\n\r\n{text}\r\n--{boundary}--\r\n"
            )
        };
        for text in ["first", "second"] {
            let body = form(text);
            let res = raw(s.addr, "POST", "/datasets/coco/v1/upload", &headers, body.len() as u64, None, |at, buf| buf.copy_from_slice(&body.as_bytes()[at as usize..at as usize + buf.len()])).await.unwrap();
            assert_eq!(res.status, 303, "{}", res.body);
            assert_eq!(res.headers["location"], "/datasets/coco/v1", "{:?}", res.headers);
        }
        assert_eq!(std::fs::read(s.region.join("coco/v1/images/r.txt")).unwrap(), b"second");
    }
}

/// `head` then `fill` bytes, for the part of the body at `at`.
fn starting_with(head: &[u8], fill: u8, at: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = head.get(at as usize + i).copied().unwrap_or(fill);
    }
}

/// Signs in; the session cookie, for a raw request.
async fn session_cookie(s: &Server, user: &str) -> String {
    let res = reqwest::Client::new()
        .post(s.url("/api/login"))
        .header("Origin", format!("http://{}", s.addr))
        .form(&[("username", user), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "login: {}", res.status());
    gantry_testkit::session_cookie(res.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok()))
        .expect("a session cookie")
}

fn sha_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

gantry_testkit::timed_test! {
    async fn cancelling_an_upload_another_request_is_writing_is_refused() {
        let s = start(limits()).await;
        let http = reqwest::Client::new();
        let url = s.url("/api/v1/datasets/coco/versions/v1/uploads/held.bin");
        let res = http.post(&url).bearer_auth(&s.alice_token).header("Upload-Length", 100).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        // A PATCH of another request holds the upload.
        let lease = |expires: i64| sqlx::query("UPDATE dataset_uploads SET writer = 'another-request', writer_expires = ?").bind(expires);
        lease(gantry_platform::now() + datasets::writing::LEASE_SECS).execute(&s.pool).await.unwrap();
        let res = http.delete(&url).bearer_auth(&s.alice_token).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CONFLICT);
        assert_eq!(res.headers()["retry-after"], "5");
        let body: Value = res.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("another request is writing this upload"), "{body}");
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 1);
        // Once it has let go, the cancel goes through.
        lease(gantry_platform::now() - 1).execute(&s.pool).await.unwrap();
        let res = http.delete(&url).bearer_auth(&s.alice_token).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NO_CONTENT);
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn store_failures_name_the_store_by_its_role_and_keep_its_details_in_the_log() {
        let s = start(limits()).await;
        let http = reqwest::Client::new();
        assert_eq!(http.put(s.file_url("r.txt")).bearer_auth(&s.alice_token).body("hello").send().await.unwrap().status(), StatusCode::CREATED);
        // Both copies are gone from under the server: the download fails.
        std::fs::remove_dir_all(&s.central).unwrap();
        std::fs::remove_dir_all(&s.region).unwrap();
        let res = http.get(s.file_url("r.txt")).bearer_auth(&s.alice_token).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_GATEWAY);
        let text = res.json::<Value>().await.unwrap()["error"].as_str().unwrap().to_string();
        assert!(text.contains("the central store") && text.contains("the region's store"), "{text}");
        assert!(!text.contains("os error"), "{text}");
        // The central store's directory is a file now: the upload fails.
        std::fs::write(&s.central, b"not a directory").unwrap();
        let res = http.put(s.file_url("w.txt")).bearer_auth(&s.alice_token).body("hello").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_GATEWAY);
        let text = res.json::<Value>().await.unwrap()["error"].as_str().unwrap().to_string();
        assert!(text.contains("the central store") && text.contains("nothing was kept"), "{text}");
        let root = s.dir.path().display().to_string();
        assert!(!text.contains(&root) && !text.contains("directory") && !text.contains("os error"), "{text}");
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn a_version_whose_name_has_a_dot_has_its_page_for_the_signed_in() {
        let s = start(limits()).await;
        gantry_platform::datasets::create_version(&s.pool, &s.alice, "coco", "baseline.1").await.unwrap();
        let alice = s.browser("alice").await;
        let res = alice.get(s.url("/datasets/coco/baseline.1")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let page = res.text().await.unwrap();
        // Its page as alice sees it, not as if nobody were signed in.
        assert!(page.contains("alice") && page.contains("baseline.1"), "{page}");
        assert!(!page.contains("please sign in"), "{page}");
    }
}

gantry_testkit::timed_test! {
    async fn hostile_names_and_searches_get_a_clear_400() {
        let s = start(limits()).await;
        let http = reqwest::Client::new();
        // A name that displays as another (right-to-left override).
        let res = http.put(s.file_url("report%E2%80%AEfdp.exe")).bearer_auth(&s.alice_token).body("x").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        assert!(res.text().await.unwrap().contains("invisible and text-direction characters"));
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_files").await, 0);
        // A search longer than any real one: refused, not a database error.
        let long = "a".repeat(60_000);
        let res = http.get(s.url(&format!("/api/v1/datasets?q={long}"))).bearer_auth(&s.alice_token).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        assert!(res.text().await.unwrap().contains("search text is longer than 200 characters"));
        let res = http.get(s.url("/api/v1/datasets?q=coc")).bearer_auth(&s.alice_token).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
    }
}
