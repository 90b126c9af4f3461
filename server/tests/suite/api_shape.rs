//! Every `/api/v1/` path answers in the API's JSON shape, `{"error": "…",
//! "code": "…"}` (a stable code per kind of refusal), with the right status — an empty dataset file name (400), a path that
//! names nothing (404), a method a path does not take (405 with `Allow`) —
//! over raw HTTP, as a script's client sees it. Before, the empty name fell
//! to the server functions' route and answered 405 with an empty body.

use crate::datasets_support::{self, raw};
use gantry_testkit::raw_http::Answer;

async fn ask(s: &datasets_support::Server, method: &str, path: &str, token: Option<&str>) -> Answer {
    let mut headers = vec![("Accept", "*/*".to_string())];
    if let Some(t) = token {
        headers.push(("Authorization", format!("Bearer {t}")));
    }
    let body = b"x";
    let len = if matches!(method, "PUT" | "POST" | "PATCH") { body.len() as u64 } else { 0 };
    raw(s.addr, method, path, &headers, len, None, |at, buf| buf.copy_from_slice(&body[at as usize..][..buf.len()]))
        .await
        .expect("an answer")
}

/// The answer is the API's error: JSON with an `error` that says `says`
/// and the `code` of its kind.
fn api_error(answer: &Answer, status: u16, says: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    assert!(answer.header("content-type").is_some_and(|t| t.starts_with("application/json")), "{answer:?}");
    let body: serde_json::Value = serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("{e}: {answer:?}"));
    let error = body["error"].as_str().unwrap_or_else(|| panic!("no error in {answer:?}"));
    assert!(error.contains(says), "{error:?} should say {says:?}");
    let code = match status {
        400 => "bad_request",
        404 => "no_such_path",
        405 => "method_not_allowed",
        other => panic!("no code expected for {other}"),
    };
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body.as_object().unwrap().len(), 2, "only the error and its code: {body}");
}

gantry_testkit::timed_test! {
    async fn every_api_path_answers_in_the_apis_json_shape() {
        let s = datasets_support::start(datasets_support::limits()).await;
        let token = Some(s.alice_token.as_str());
        let version = "/api/v1/datasets/coco/versions/v1";

        // An empty file name: 400, whoever asks and whichever method the route takes.
        for (method, path) in [("PUT", "files/"), ("GET", "files/"), ("POST", "uploads/"), ("PATCH", "uploads/"), ("DELETE", "uploads/")] {
            let answer = ask(&s, method, &format!("{version}/{path}"), token).await;
            api_error(&answer, 400, "a file name is required");
            let anonymous = ask(&s, method, &format!("{version}/{path}"), None).await;
            api_error(&anonymous, 400, "a file name is required");
        }
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_files").await + s.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);

        // Paths that name nothing under /api/v1: the API's 404, for any method.
        for (method, path) in [
            ("GET", "/api/v1"),
            ("GET", "/api/v1/"),
            ("GET", "/api/v1/nothing-here"),
            ("POST", "/api/v1/nothing-here"),
            ("GET", "/api/v1/compute-tasks/7/nope"),
            ("PUT", "/api/v1/datasets/coco"),
        ] {
            let answer = ask(&s, method, path, token).await;
            api_error(&answer, 404, "no such API path");
        }

        // A method a path does not take: 405, with what it takes.
        for (method, path, allow) in [
            ("DELETE", "/api/v1/compute-tasks".to_string(), vec!["GET", "POST"]),
            ("PUT", "/api/v1/compute-tasks/7".to_string(), vec!["GET"]),
            ("GET", "/api/v1/compute-tasks/7/cancel".to_string(), vec!["POST"]),
            ("POST", "/api/v1/datasets".to_string(), vec!["GET"]),
            ("POST", format!("{version}/files"), vec!["GET"]),
            ("DELETE", format!("{version}/files/a.txt"), vec!["GET", "PUT"]),
            ("DELETE", format!("{version}/files/"), vec!["GET", "PUT"]),
            ("PUT", format!("{version}/uploads/a.txt"), vec!["POST", "HEAD", "PATCH", "DELETE"]),
        ] {
            let answer = ask(&s, method, &path, token).await;
            api_error(&answer, 405, &format!("does not take {method}"));
            let allowed = answer.header("allow").unwrap_or_else(|| panic!("no Allow: {answer:?}"));
            let allowed: Vec<&str> = allowed.split(',').map(str::trim).collect();
            for m in allow {
                assert!(allowed.contains(&m), "{method} {path}: Allow {allowed:?} should name {m}");
            }
        }

        // What works still works, and the server functions beside the API too.
        let answer = ask(&s, "PUT", &format!("{version}/files/a.txt"), token).await;
        assert_eq!(answer.status, 201, "{answer:?}");
        let answer = ask(&s, "GET", &format!("{version}/files"), token).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        let answer = ask(&s, "GET", "/api/v1/compute-tasks", token).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        let answer = ask(&s, "POST", "/api/logout", None).await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
}
