//! The SSH gateway (issue #34) driven by OpenSSH's own client — `ssh`,
//! `scp`, `sftp`, `ssh -L` — against the real gateway on 127.0.0.1:0, the
//! real local Docker Engine and a real machine, with keys `ssh-keygen`
//! makes for the test: a shell's output and PTY, a command's exit status,
//! a 20 MB round trip by scp (SFTP) with equal SHA-256, an HTTP request
//! answered by busybox httpd inside the machine through a forward; and who
//! is refused: an unknown key, another user's or group's machine, a
//! disabled account (whose open session ends too), a password.
//!
//! Needs `bash scripts/dockerd.sh && bash scripts/demo-image.sh` (the demo
//! image carries OpenSSH's sftp-server) and openssh-client.

use crate::terminal::{env, Env};
use gantry_platform::{
    accounts::{self, User},
    fleet::Fleet,
    ssh_keys,
    workspace::Limits,
};
use gantry_server::ssh::Gateway;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::process::Command;

struct Ssh {
    _gateway: Gateway,
    port: u16,
    keys: tempfile::TempDir,
}

impl Ssh {
    async fn start(env: &Env) -> Ssh {
        let data = tempfile::tempdir().unwrap();
        let listener = Gateway::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let limits = Limits { idle_secs: 600, ..Limits::default() };
        let gateway =
            Gateway::start(listener, data.path(), env.pool.clone(), Fleet::new(), limits, std::future::pending())
                .await
                .unwrap();
        assert!(gateway.host_fingerprint.starts_with("SHA256:"));
        let port = gateway.addr.port();
        Ssh { _gateway: gateway, port, keys: data }
    }

    /// A new ed25519 key, added to `user`'s account when given.
    async fn key(&self, env: &Env, name: &str, user: Option<&User>) -> PathBuf {
        let file = self.keys.path().join(name);
        let made = Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(&file).status().await;
        assert!(made.expect("ssh-keygen (openssh-client) is installed").success());
        if let Some(user) = user {
            let public = std::fs::read_to_string(file.with_extension("pub")).unwrap();
            ssh_keys::add(&env.pool, user, name, &public).await.unwrap();
        }
        file
    }

    /// OpenSSH's options for a test: this key only, no prompts, no host
    /// key bookkeeping, no user configuration.
    fn opts(&self, key: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            ["-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        for o in ["IdentitiesOnly=yes", "BatchMode=yes", "LogLevel=ERROR", "ConnectTimeout=20"] {
            v.extend(["-o".to_string(), o.to_string()]);
        }
        v.extend(["-i".to_string(), key.display().to_string()]);
        v
    }

    fn ssh(&self, key: &Path, user: &str) -> Command {
        let mut c = Command::new("ssh");
        c.args(self.opts(key)).args(["-p", &self.port.to_string()]).arg(format!("{user}@127.0.0.1"));
        c.kill_on_drop(true);
        c
    }

    /// `ssh … user@gateway command`: exit code, stdout, stderr.
    async fn run(&self, key: &Path, user: &str, args: &[&str]) -> (i32, String, String) {
        let out = self.ssh(key, user).args(args).stdin(Stdio::null()).output().await.unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    async fn scp(&self, key: &Path, from: &str, to: &str) {
        let out = Command::new("scp")
            .args(self.opts(key))
            .args(["-P", &self.port.to_string(), from, to])
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "scp {from} {to}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

async fn user(env: &Env, name: &str) -> User {
    accounts::list_users(&env.pool).await.unwrap().into_iter().find(|u| u.username == name).unwrap()
}

fn sha256_file(path: &Path) -> String {
    format!("{:x}", Sha256::digest(std::fs::read(path).unwrap()))
}

gantry_testkit::timed_test! {
    limit = 300;
    async fn openssh_reaches_a_machine_shell_command_scp_sftp_and_forward() {
        let env = env(Limits::default()).await;
        let (_id, _container) = env.machine(&env.alice, "dev").await;
        let ssh = Ssh::start(&env).await;
        let key = ssh.key(&env, "alice", Some(&env.alice)).await;

        // A command: its output, in the data volume, as the image's user.
        let (code, out, err) = ssh.run(&key, "dev", &["echo hello-from-$(hostname); pwd"]).await;
        assert_eq!(code, 0, "stderr: {err}");
        assert!(out.contains("hello-from-") && out.contains("/data"), "{out}");
        // Its exit status comes back.
        assert_eq!(ssh.run(&key, "dev", &["exit 3"]).await.0, 3);
        // stderr stays stderr.
        let (_, out, err) = ssh.run(&key, "dev", &["echo to-err >&2"]).await;
        assert!(err.contains("to-err") && !out.contains("to-err"), "out {out:?} err {err:?}");
        // A PTY when asked for one, sized as the client's.
        let (code, out, _) = ssh.run(&key, "dev", &["-tt", "tty; echo cols=$(stty size)"]).await;
        assert_eq!(code, 0);
        assert!(out.contains("/dev/pts/") && out.contains("cols="), "{out}");

        // 20 MB up and down by scp (SFTP), byte for byte.
        let work = tempfile::tempdir().unwrap();
        let up = work.path().join("up.bin");
        let data: Vec<u8> = (0..20 * 1024 * 1024u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        std::fs::write(&up, &data).unwrap();
        ssh.scp(&key, &up.display().to_string(), "dev@127.0.0.1:/data/big.bin").await;
        let down = work.path().join("down.bin");
        ssh.scp(&key, "dev@127.0.0.1:/data/big.bin", &down.display().to_string()).await;
        assert_eq!(sha256_file(&down), sha256_file(&up));
        let (_, inside, _) = ssh.run(&key, "dev", &["sha256sum /data/big.bin"]).await;
        assert!(inside.starts_with(&sha256_file(&up)), "inside: {inside}");

        // sftp in batch mode.
        let batch = work.path().join("batch");
        std::fs::write(&batch, "ls /data\n").unwrap();
        let out = Command::new("sftp")
            .args(ssh.opts(&key))
            .args(["-P", &ssh.port.to_string(), "-b"])
            .arg(&batch)
            .arg("dev@127.0.0.1")
            .output()
            .await
            .unwrap();
        assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("big.bin"), "{out:?}");

        // A forward to busybox httpd listening inside the machine.
        let (code, _, err) = ssh
            .run(&key, "dev", &["mkdir -p /data/www && echo forwarded-ok > /data/www/index.html && httpd -p 127.0.0.1:8080 -h /data/www"])
            .await;
        assert_eq!(code, 0, "{err}");
        let local = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut forward = ssh
            .ssh(&key, "dev")
            .args(["-N", "-o", "ExitOnForwardFailure=yes", "-L", &format!("{local}:localhost:8080")])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        // The forward listens once ssh has authenticated: wait for that.
        let body = loop {
            if let Ok(Some(status)) = forward.try_wait() {
                panic!("ssh -L exited: {status}");
            }
            match reqwest::get(format!("http://127.0.0.1:{local}/index.html")).await {
                Ok(res) => break res.text().await.unwrap(),
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            }
        };
        assert_eq!(body.trim(), "forwarded-ok");
        forward.kill().await.unwrap();
        let _ = ssh.run(&key, "dev", &["pkill httpd || killall httpd"]).await;

        // Each connection is a session row and audited.
        let sessions = env.scalar("SELECT COUNT(*) FROM terminal_sessions WHERE client_addr LIKE 'ssh %'").await;
        assert!(sessions >= 8, "{sessions} SSH session rows");
        assert!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'ssh.channel'").await >= 8);
    }
}

gantry_testkit::timed_test! {
    limit = 300;
    async fn unknown_keys_other_machines_disabled_accounts_and_passwords_are_refused() {
        let env = env(Limits::default()).await;
        let (_id, _container) = env.machine(&env.alice, "dev").await;
        let ssh = Ssh::start(&env).await;
        let alice_key = ssh.key(&env, "alice", Some(&env.alice)).await;
        let bob_key = ssh.key(&env, "bob", Some(&user(&env, "bob").await)).await;
        let carol_key = ssh.key(&env, "carol", Some(&user(&env, "carol").await)).await;
        let stranger = ssh.key(&env, "stranger", None).await;
        let denied = |(code, _, err): (i32, String, String)| code == 255 && err.contains("Permission denied");

        assert!(denied(ssh.run(&stranger, "dev", &["true"]).await), "an unknown key");
        assert!(denied(ssh.run(&bob_key, "dev", &["true"]).await), "bob has no machine dev");
        assert!(denied(ssh.run(&bob_key, "alice/dev", &["true"]).await), "bob is not an admin");
        assert!(denied(ssh.run(&carol_key, "alice/dev", &["true"]).await), "another group's machine");
        // A password is never asked for, let alone taken.
        let (code, _, err) = ssh
            .run(&alice_key, "dev", &["-o", "PubkeyAuthentication=no", "-o", "PasswordAuthentication=yes", "true"])
            .await;
        assert!(code == 255 && err.contains("Permission denied (publickey)"), "{err}");

        // Alice gets in; disabling her account ends her open session and
        // refuses the next.
        let mut open = ssh.ssh(&alice_key, "dev").args(["echo in; sleep 120"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut stdout = open.stdout.take().unwrap();
        let mut first = [0u8; 3];
        tokio::io::AsyncReadExt::read_exact(&mut stdout, &mut first).await.unwrap();
        assert_eq!(&first, b"in\n");
        let admin = user(&env, "admin").await;
        accounts::set_disabled(&env.pool, admin.id, env.alice.id, true).await.unwrap();
        let ended = open.wait_with_output().await.unwrap();
        assert!(!ended.status.success());
        let said = String::from_utf8_lossy(&ended.stderr);
        assert!(said.contains("account was changed"), "{said}");
        assert!(denied(ssh.run(&alice_key, "dev", &["true"]).await), "a disabled account");
        // The row is closed as the server drops the connection, just after
        // the client saw it go.
        let closed = loop {
            let row: Option<String> = sqlx::query_scalar(
                "SELECT close_reason FROM terminal_sessions WHERE client_addr LIKE 'ssh %' AND closed_at IS NOT NULL ORDER BY id DESC LIMIT 1",
            )
            .fetch_optional(&env.pool)
            .await
            .unwrap();
            match row {
                Some(r) => break r,
                None => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            }
        };
        assert!(closed.contains("account was changed"), "{closed}");
    }
}
