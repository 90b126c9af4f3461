//! `gantry serve` with the SMTP flags delivers notification email on its
//! own: a real server process (the flags read from its environment, the
//! delivery loop every second) and a real SMTP server (aiosmtpd on
//! loopback, STARTTLS required, its CA given by --smtp-ca-file). A quota
//! change an admin makes over HTTP reaches the member who chose email.

use crate::common::child;
use gantry_testkit::smtp::SmtpServer;
use reqwest::StatusCode;
use std::time::Duration;

const ADMIN_PASSWORD: &str = "admin-password-1";

gantry_testkit::timed_test! {
    limit = 120;
    async fn a_served_quota_change_is_emailed_over_starttls() {
        let dir = tempfile::tempdir().unwrap();
        let smtp = SmtpServer::start();
        let ca = smtp.write_file("ca.pem", &smtp.ca_pem);
        let url = smtp.url();
        let ca = ca.display().to_string();
        let env = [
            ("GANTRY_EXECUTOR", "simulated"),
            ("GANTRY_SIM_GPUS", "2"),
            ("GANTRY_SMTP_URL", url.as_str()),
            ("GANTRY_SMTP_FROM", "Gantry <gantry@example.org>"),
            ("GANTRY_SMTP_CA_FILE", ca.as_str()),
            ("GANTRY_NOTIFY_INTERVAL_SECS", "1"),
        ];
        let server = child::spawn(dir.path(), "log", ADMIN_PASSWORD, &env).await;
        let admin = &server.client;
        let at = |path: &str| format!("http://{}{path}", server.addr);

        let fields = [("email", "admin@example.org"), ("email_kinds[]", "quota_changed")];
        let res = admin.post(at("/api/save_notification_settings")).form(&fields).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{}", res.text().await.unwrap());
        let groups: serde_json::Value = admin.post(at("/api/admin/groups")).send().await.unwrap().json().await.unwrap();
        let default = groups.as_array().unwrap().iter().find(|g| g["name"] == "default").expect("the default group");
        let group = default["id"].as_i64().unwrap();
        let fields = [("group_id", group.to_string()), ("gpu_quota", "3".into()), ("max_gpus_per_machine", "2".into()), ("allowed_models", "".into())];
        let res = admin.post(at("/api/admin/update_group")).form(&fields).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{}", res.text().await.unwrap());

        let mails = smtp.wait_for(1, Duration::from_secs(60)).await;
        assert_eq!(mails.len(), 1, "no mail within 60 s; see {}/log", dir.path().display());
        let mail = mails[0].replace("=\r\n", "").replace("\r\n ", " ");
        assert!(mail.contains("X-Test-Tls: yes") && mail.contains("X-Test-Rcpt: admin@example.org"), "{mail}");
        assert!(mail.contains("Subject: The quota of your group") && mail.contains("GPU quota"), "{mail}");
    }
}
