//! A Docker Engine reached over mutual TLS (`tls://host:port`), as remote
//! nodes are. The local engine is put behind a TLS listener on 127.0.0.1
//! (stunnel, with certificates made here by openssl), so the real TLS path of
//! the executor — client certificate, CA check, API calls — is exercised.

use gantry_platform::executor::{DockerExecutor, ExecError, Executor};
use std::{path::Path, process::Command, time::Duration};

fn openssl(dir: &Path, args: &[&str]) {
    let out =
        Command::new("openssl").args(args).current_dir(dir).output().expect("openssl is installed (scripts/setup.sh)");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, in
/// the file layout the docker CLI uses.
fn make_certs(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca-key.pem",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=gantry-test-ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    for (name, usage, san) in
        [("server", "serverAuth", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"), ("client", "clientAuth", "")]
    {
        std::fs::write(
            dir.join(format!("{name}.ext")),
            format!("{san}extendedKeyUsage={usage}\nbasicConstraints=CA:FALSE\n"),
        )
        .unwrap();
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                &format!("{name}-key.pem"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                &format!("/CN={name}"),
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca-key.pem",
                "-CAcreateserial",
                "-out",
                &format!("{name}-cert.pem"),
                "-days",
                "2",
                "-extfile",
                &format!("{name}.ext"),
            ],
        );
    }
    let client = dir.join("client-dir");
    std::fs::create_dir_all(&client).unwrap();
    std::fs::copy(dir.join("ca.pem"), client.join("ca.pem")).unwrap();
    std::fs::copy(dir.join("client-cert.pem"), client.join("cert.pem")).unwrap();
    std::fs::copy(dir.join("client-key.pem"), client.join("key.pem")).unwrap();
}

/// The TLS listener; stopped by its PID when dropped.
struct Proxy(std::process::Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn tls_proxy(dir: &Path) -> (Proxy, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let d = dir.display();
    let conf = format!(
        "foreground = yes\npid =\n[docker]\naccept = 127.0.0.1:{port}\nconnect = /var/run/docker.sock\n\
         cert = {d}/server-cert.pem\nkey = {d}/server-key.pem\nCAfile = {d}/ca.pem\nverifyChain = yes\nrequireCert = yes\n"
    );
    std::fs::write(dir.join("stunnel.conf"), conf).unwrap();
    let child = Command::new("stunnel")
        .arg(dir.join("stunnel.conf"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("stunnel is installed (scripts/setup.sh)");
    let proxy = Proxy(child);
    // Wait until the listener accepts connections (bounded).
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return (proxy, port);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("stunnel did not listen on 127.0.0.1:{port}");
}

gantry_testkit::timed_test! {
    async fn engine_over_mutual_tls() {
        let local = Executor::from(DockerExecutor::connect("").unwrap());
        if let Err(e) = local.ping().await {
            panic!("{e}\nThe Docker Engine is not answering: run `bash scripts/dockerd.sh`.");
        }
        let dir = tempfile::tempdir().unwrap();
        make_certs(dir.path());
        let (_proxy, port) = tls_proxy(dir.path()).await;

        // Missing certificates are refused up front, naming the file.
        std::env::set_var("GANTRY_DOCKER_CERT_DIR", dir.path().join("nowhere"));
        let missing = DockerExecutor::connect(&format!("tls://127.0.0.1:{port}")).unwrap_err();
        assert!(matches!(missing, ExecError::Failed(ref m) if m.contains("nowhere/ca.pem is missing")), "{missing}");

        std::env::set_var("GANTRY_DOCKER_CERT_DIR", dir.path().join("client-dir"));
        let remote = Executor::from(DockerExecutor::connect(&format!("tls://127.0.0.1:{port}")).unwrap());
        let info = remote.ping().await.expect("ping over TLS");
        assert_eq!(info.version, local.ping().await.unwrap().version, "same engine behind the TLS listener");
        assert!(remote.list_managed("no-such-instance").await.unwrap().is_empty());

        // Without a client certificate the listener refuses the handshake.
        let plain = Executor::from(DockerExecutor::connect(&format!("tcp://127.0.0.1:{port}")).unwrap());
        assert!(matches!(plain.ping().await, Err(ExecError::Unavailable(_))));
    }
}
