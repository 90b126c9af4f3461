//! A real SMTP server for tests: Python's aiosmtpd (installed into a venv
//! by scripts/setup.sh) on 127.0.0.1, port 0, requiring STARTTLS with a
//! certificate from a CA made for this server alone (openssl). Every mail it
//! accepts is written to a file in its directory before it answers 250, so
//! a send that returned has its file. Killed by PID when dropped.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

/// The server's script: one handler that writes each message, then 250.
const SCRIPT: &str = r#"
import asyncio, logging, os, ssl, sys
from aiosmtpd.smtp import SMTP

# A client refusing the certificate (a test does that) is not news.
logging.getLogger("mail.log").setLevel(logging.CRITICAL)

class Handler:
    def __init__(self, out):
        self.out, self.n = out, 0
    async def handle_DATA(self, server, session, envelope):
        self.n += 1
        path = os.path.join(self.out, "%04d.eml" % self.n)
        with open(path + ".tmp", "wb") as f:
            f.write(b"X-Test-Tls: " + (b"yes" if session.ssl else b"no") + b"\r\n")
            f.write(b"X-Test-Rcpt: " + ",".join(envelope.rcpt_tos).encode() + b"\r\n")
            f.write(envelope.original_content or envelope.content)
        os.rename(path + ".tmp", path)
        return "250 OK"

async def main():
    cert, key, out = sys.argv[1:4]
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    handler = Handler(out)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(handler, tls_context=ctx, require_starttls=True, hostname="localhost"), "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"#;

/// The venv's python: `$GANTRY_SMTP_VENV` or scripts/setup.sh's default.
pub fn python() -> PathBuf {
    let venv = std::env::var_os("GANTRY_SMTP_VENV").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".local/share/gantry/smtp-venv")
    });
    venv.join("bin/python3")
}

pub struct SmtpServer {
    pub port: u16,
    /// PEM of the CA that signed the server's certificate.
    pub ca_pem: Vec<u8>,
    /// PEM of another CA, which did not: a client trusting only it must fail.
    pub other_ca_pem: Vec<u8>,
    dir: tempfile::TempDir,
    child: Child,
}

impl SmtpServer {
    /// Makes the certificates and starts the server; panics saying what is missing.
    pub fn start() -> SmtpServer {
        let python = python();
        assert!(python.exists(), "{} is missing: run scripts/setup.sh (it installs aiosmtpd)", python.display());
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        std::fs::create_dir(d.join("mail")).unwrap();
        make_ca(d, "ca");
        make_ca(d, "other-ca");
        std::fs::write(
            d.join("ext.cnf"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(
            d,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ],
        );
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.pem",
                "-days",
                "2",
                "-extfile",
                "ext.cnf",
            ],
        );
        std::fs::write(d.join("smtpd.py"), SCRIPT).unwrap();
        let mut child = Command::new(&python)
            .arg(d.join("smtpd.py"))
            .arg(d.join("server.pem"))
            .arg(d.join("server.key"))
            .arg(d.join("mail"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start aiosmtpd");
        // The script prints its port once it listens (or exits on an error).
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("read the port");
        let port = match line.trim().parse() {
            Ok(p) => p,
            Err(_) => {
                let _ = child.kill();
                panic!("aiosmtpd did not start (printed {line:?}; see its error above)");
            }
        };
        let ca_pem = std::fs::read(d.join("ca.pem")).unwrap();
        let other_ca_pem = std::fs::read(d.join("other-ca.pem")).unwrap();
        SmtpServer { port, ca_pem, other_ca_pem, dir, child }
    }

    /// `smtp://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// The mails received so far, in order, each with the test headers
    /// `X-Test-Tls` (yes once STARTTLS was done) and `X-Test-Rcpt` first.
    pub fn received(&self) -> Vec<String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.dir.path().join("mail"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "eml"))
            .collect();
        files.sort();
        files.iter().map(|p| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned()).collect()
    }

    /// Waits (at most `limit`) until `n` mails have arrived: for a sender in
    /// another process, whose only sign is the file; the mails so far.
    pub async fn wait_for(&self, n: usize, limit: std::time::Duration) -> Vec<String> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let got = self.received();
            if got.len() >= n || std::time::Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Writes `pem` to a file in the server's directory (for --smtp-ca-file).
    pub fn write_file(&self, name: &str, pem: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        path
    }
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn make_ca(dir: &Path, name: &str) {
    let key = format!("{name}.key");
    let pem = format!("{name}.pem");
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &pem,
            "-days",
            "2",
            "-subj",
            &format!("/CN=Gantry test {name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl (apt-get install openssl)");
    assert!(out.status.success(), "openssl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}
