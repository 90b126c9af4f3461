//! Notifications reach the channel each user chose: an idle reclaim's
//! warning is queued for email in the warning's own commit (before any
//! reclaim can happen) and reaches a real SMTP server over STARTTLS
//! (aiosmtpd on loopback); a server whose certificate does not verify gets
//! nothing and the failure is listed. A quota change reaches every member's
//! webhook, signed with their secret; a failing receiver is retried with
//! backoff under an injected clock, every attempt listed, until it answers.

use crate::reclaim_common::{admin, short_settings, steady};
use gantry_platform::{
    executor::{Executor, SimulatedExecutor},
    notifications::{
        self,
        deliver::deliver_due,
        email::{Mailer, SmtpConfig},
        webhook::WebhookClient,
        Kind, SettingsInput,
    },
    reclaim,
};
use gantry_testkit::{engine, smtp::SmtpServer};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::{Arc, Mutex};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::mpsc,
};

fn mailer(server: &SmtpServer, ca: &[u8]) -> Mailer {
    Mailer::new(&SmtpConfig {
        url: server.url(),
        from: "Gantry <gantry@example.org>".into(),
        username: None,
        password: None,
        ca_pem: Some(ca.to_vec()),
    })
    .unwrap()
}

/// A mail as read: headers unfolded, quoted-printable soft breaks joined.
fn readable(mail: &str) -> String {
    mail.replace("=\r\n", "").replace("\r\n ", " ").replace("\r\n", "\n")
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn a_reclaim_warning_is_emailed_before_the_reclaim_and_a_bad_certificate_is_listed() {
        let env = engine::env("simulated", 2, 2).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        short_settings(&env.pool, &root, 60, 0).await;
        let input = SettingsInput {
            email: "alice@example.org".into(),
            email_kinds: vec![Kind::ReclaimWarning, Kind::Reclaim],
            ..Default::default()
        };
        notifications::save_settings(&env.pool, &alice, &input).await.unwrap();
        let m = env.admissions.create(env.create(&alice, "box-a", 1)).await.unwrap().machine_id;
        env.drive().await;
        let gpu = env.scalar(&format!("SELECT gpu_id FROM machine_gpus WHERE machine_id = {m}")).await;
        let t0 = gantry_platform::now() + 5;
        steady(&env.pool, gpu, env.node_id, Some(m), t0, t0 + 60, 0.0, 40.0).await;
        assert_eq!(reclaim::pass(&env.pool, t0 + 60).await.unwrap().warned, vec![m]);

        // The warning's commit queued its email: nothing is reclaimed unannounced.
        let page = notifications::list(&env.pool, &alice, Default::default()).await.unwrap();
        assert_eq!(page.unread, 1);
        assert_eq!(page.items[0].kind, "reclaim_warning");
        assert!(page.items[0].subject.contains("box-a"), "{}", page.items[0].subject);
        let queued = notifications::deliveries(&env.pool, &alice, 10).await.unwrap();
        assert_eq!((queued.len(), queued[0].channel.as_str(), queued[0].state.as_str()), (1, "email", "pending"));

        // A server whose certificate this CA did not sign: nothing is sent,
        // the failure is listed with its reason and the next try's time.
        let server = SmtpServer::start();
        let now = t0 + 61;
        let wrong = deliver_due(&env.pool, now, &mailer(&server, &server.other_ca_pem), &WebhookClient::default()).await.unwrap();
        assert_eq!(wrong.retrying.len(), 1, "{wrong:?}");
        assert!(server.received().is_empty(), "a mail went to a server that did not verify");
        let listed = &notifications::deliveries(&env.pool, &alice, 10).await.unwrap()[0];
        assert_eq!((listed.state.as_str(), listed.attempts, listed.next_attempt_at), ("pending", 1, Some(now + 30)));
        let error = listed.tries[0].error.clone().unwrap_or_default();
        assert!(!listed.tries[0].ok && error.to_lowercase().contains("certificate"), "{error}");

        // Not due before its backoff; then sent over STARTTLS with the right CA.
        let good = mailer(&server, &server.ca_pem);
        assert!(deliver_due(&env.pool, now + 29, &good, &WebhookClient::default()).await.unwrap().sent.is_empty());
        assert_eq!(deliver_due(&env.pool, now + 30, &good, &WebhookClient::default()).await.unwrap().sent.len(), 1);
        let mails = server.received();
        assert_eq!(mails.len(), 1);
        let mail = readable(&mails[0]);
        assert!(mail.contains("X-Test-Tls: yes") && mail.contains("X-Test-Rcpt: alice@example.org"), "{mail}");
        assert!(mail.contains("Subject: Machine box-a will be reclaimed unless it is used or extended"), "{mail}");
        assert!(mail.contains("Deadline:") && mail.contains("GPUs"), "{mail}");
        let listed = &notifications::deliveries(&env.pool, &alice, 10).await.unwrap()[0];
        assert_eq!((listed.state.as_str(), listed.tries.len(), listed.tries[1].ok), ("sent", 2, true));

        // The deadline passes: the reclaim is queued and done, and told too.
        steady(&env.pool, gpu, env.node_id, Some(m), t0 + 70, t0 + 130, 0.0, 40.0).await;
        assert_eq!(reclaim::pass(&env.pool, t0 + 130).await.unwrap().reclaims_queued, vec![m]);
        env.drive().await;
        let page = notifications::list(&env.pool, &alice, Default::default()).await.unwrap();
        assert_eq!(page.items[0].kind, "reclaim", "{:?}", page.items);
        deliver_due(&env.pool, t0 + 200, &good, &WebhookClient::default()).await.unwrap();
        assert!(readable(&server.received()[1]).contains("Subject: Machine box-a was reclaimed"));
    }
}

/// A loopback HTTP receiver answering the given statuses in turn (the
/// last one for ever), passing each request's headers and body on.
async fn receiver(statuses: Vec<u16>) -> (String, mpsc::UnboundedReceiver<(String, Vec<u8>)>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}/hook", listener.local_addr().unwrap().port());
    let (tx, rx) = mpsc::unbounded_channel();
    let statuses = Arc::new(Mutex::new(statuses));
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let head_end = loop {
                let n = sock.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the client hung up mid-request");
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .unwrap_or(0);
            while buf.len() < head_end + len {
                let n = sock.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
            }
            let status = {
                let mut s = statuses.lock().unwrap();
                if s.len() > 1 {
                    s.remove(0)
                } else {
                    s[0]
                }
            };
            let _ = tx.send((head, buf[head_end..head_end + len].to_vec()));
            let answer = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let _ = sock.write_all(answer.as_bytes()).await;
        }
    });
    (url, rx)
}

fn header<'a>(head: &'a str, name: &str) -> &'a str {
    head.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).map(str::trim).unwrap_or_default()
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn a_quota_change_reaches_each_members_webhook_signed_and_retried_until_it_answers() {
        let env = engine::env("simulated", 2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        gantry_platform::accounts::create_group(&env.pool, None, "other-team", 1).await.unwrap();
        let bob = env.user("bob", "other-team").await;
        let root = admin(&env.pool).await;
        let (url, mut got) = receiver(vec![500, 503, 204]).await;
        let input = SettingsInput { webhook_url: url.clone(), webhook_kinds: vec![Kind::QuotaChanged], ..Default::default() };
        let (saved, secret) = notifications::save_settings(&env.pool, &alice, &input).await.unwrap();
        let secret = secret.expect("the first webhook save makes its secret, shown once");
        assert!(saved.has_webhook_secret && saved.webhook_url.as_deref() == Some(url.as_str()));
        // Saved again, the secret stays and is not shown again.
        assert!(notifications::save_settings(&env.pool, &alice, &input).await.unwrap().1.is_none());

        gantry_platform::policy::update_group_policy(&env.pool, Some(root.id), alice.group_id, 1, 1, &[]).await.unwrap();
        let page = notifications::list(&env.pool, &alice, Default::default()).await.unwrap();
        assert_eq!((page.unread, page.items[0].kind.as_str()), (1, "quota_changed"));
        assert!(page.items[0].body.contains("GPU quota 2 → 1"), "{}", page.items[0].body);
        // Another group's member is not told, and cannot see or mark alice's.
        assert_eq!(notifications::list(&env.pool, &bob, Default::default()).await.unwrap().total, 0);
        assert!(notifications::mark_read(&env.pool, &bob, page.items[0].id).await.is_err());
        assert_eq!(notifications::unread_count(&env.pool, alice.id).await.unwrap(), 1);

        let http = WebhookClient::default();
        let mail = Mailer::disabled();
        let t = gantry_platform::now();
        // 500, then 503 (30 s later), then 204 (60 s after that).
        for (at, sent) in [(t, false), (t + 30, false), (t + 90, true)] {
            assert!(deliver_due(&env.pool, at - 1, &mail, &http).await.unwrap().sent.is_empty() || at == t);
            let report = deliver_due(&env.pool, at, &mail, &http).await.unwrap();
            assert_eq!(report.sent.len(), usize::from(sent), "at +{}: {report:?}", at - t);
            let (head, body) = got.recv().await.unwrap();
            let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
            mac.update(&body);
            let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
            assert_eq!(header(&head, "x-gantry-signature"), expected, "the signature covers the exact body");
            assert!(!header(&head, "x-gantry-delivery").is_empty() && !header(&head, "x-gantry-timestamp").is_empty());
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(json["kind"], "quota_changed");
            assert_eq!(json["sent_at"], at);
        }
        let listed = &notifications::deliveries(&env.pool, &alice, 10).await.unwrap()[0];
        let codes: Vec<_> = listed.tries.iter().map(|a| (a.status_code, a.ok)).collect();
        assert_eq!(codes, vec![(Some(500), false), (Some(503), false), (Some(204), true)]);
        assert_eq!((listed.state.as_str(), listed.next_attempt_at), ("sent", None));
        assert!(listed.tries[0].error.as_deref().unwrap_or_default().contains("500"));

        notifications::mark_all_read(&env.pool, &alice).await.unwrap();
        assert_eq!(notifications::unread_count(&env.pool, alice.id).await.unwrap(), 0);
    }
}

gantry_testkit::timed_test! {
    limit = 60;
    async fn bad_addresses_and_hostile_webhook_urls_are_refused_and_change_nothing() {
        let env = engine::env("simulated", 2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        let good = SettingsInput { email: "alice@example.org".into(), email_kinds: vec![Kind::Reclaim], ..Default::default() };
        let before = notifications::save_settings(&env.pool, &alice, &good).await.unwrap().0;
        let long = format!("https://example.org/{}", "a".repeat(2100));
        let cases = [
            ("alice-at-example.org", "", "no @"),
            ("alice@example .org", "", "spaces"),
            ("", "ftp://example.org/hook", "http:// or https://"),
            ("", "javascript:alert(1)", "http:// or https://"),
            ("", "https://example.org/a hook", "spaces"),
            ("", &long, "at most 2000"),
            ("", "http://169.254.169.254/latest/meta-data", "link-local"),
            ("", "http://user:pw@example.org/", "password"),
        ];
        for (email, url, why) in cases {
            let input = SettingsInput { email: email.into(), webhook_url: url.into(), ..Default::default() };
            let err = notifications::save_settings(&env.pool, &alice, &input).await.unwrap_err().to_string();
            assert!(err.contains(why), "{email:?} {url:?}: {err}");
            assert_eq!(notifications::settings(&env.pool, &alice).await.unwrap(), before, "a refused save changed something");
        }
        assert!(notifications::regenerate_secret(&env.pool, &alice).await.is_err(), "no webhook, no secret");
    }
}

gantry_testkit::timed_test! {
    limit = 60;
    async fn a_compute_task_that_ends_tells_its_requester_in_the_portal() {
        use gantry_platform::compute::{self, Command};
        let (env, _sim, _root, alice) = crate::compute_sim::sim_compute_env().await;
        let job = engine::compute_job("train", Command::Argv(vec!["true".into()]));
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job).await.unwrap();
        assert!(notifications::list(&env.pool, &alice, Default::default()).await.unwrap().items.is_empty());
        compute::cancel(&env.pool, &alice, t.id).await.unwrap();
        env.drive().await;
        let page = notifications::list(&env.pool, &alice, Default::default()).await.unwrap();
        assert_eq!(page.items.len(), 1, "{:?}", page.items);
        assert_eq!(page.items[0].kind, "compute_finished");
        assert!(page.items[0].subject.contains(&format!("#{} (train) cancelled", t.id)), "{}", page.items[0].subject);
    }
}

gantry_testkit::timed_test! {
    limit = 60;
    async fn two_delivery_passes_at_once_send_a_webhook_once() {
        // Two servers' loops passing at the same moment: the claim under a
        // lease lets one of them have the delivery, never both.
        let env = engine::env("simulated", 2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        let (url, mut got) = receiver(vec![204]).await;
        let input = SettingsInput { webhook_url: url, webhook_kinds: vec![Kind::QuotaChanged], ..Default::default() };
        notifications::save_settings(&env.pool, &alice, &input).await.unwrap();
        gantry_platform::policy::update_group_policy(&env.pool, Some(root.id), alice.group_id, 1, 1, &[]).await.unwrap();
        let (http, mail) = (WebhookClient::default(), Mailer::disabled());
        let now = gantry_platform::now();
        let (a, b) = tokio::join!(
            deliver_due(&env.pool, now, &mail, &http),
            deliver_due(&env.pool, now, &mail, &http)
        );
        let sent = a.unwrap().sent.len() + b.unwrap().sent.len();
        assert_eq!(sent, 1, "exactly one pass sent it");
        got.recv().await.expect("the receiver got it");
        assert!(got.try_recv().is_err(), "and only once");
        // Later passes find nothing left to send.
        assert!(deliver_due(&env.pool, now + 3600, &mail, &http).await.unwrap().sent.is_empty());
        let listed = &notifications::deliveries(&env.pool, &alice, 10).await.unwrap()[0];
        assert_eq!((listed.state.as_str(), listed.tries.len()), ("sent", 1));
    }
}
