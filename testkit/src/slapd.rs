//! A real OpenLDAP server for tests: Debian's `slapd` (installed by
//! scripts/setup.sh) in a temporary directory — slapd.conf, an mdb
//! database loaded with `slapadd` from [`DATA`] — listening on
//! `ldap://127.0.0.1:P` (StartTLS offered) and `ldaps://127.0.0.1:P2`
//! with a certificate from a CA made for it alone (openssl). slapd
//! daemonizes only once it is ready, so its start returning is the signal
//! to go on; it is killed by the PID it wrote when dropped.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::Command,
};

pub const SUFFIX: &str = "dc=example,dc=org";
pub const PEOPLE: &str = "ou=people,dc=example,dc=org";
pub const GROUPS: &str = "ou=groups,dc=example,dc=org";
/// The service account Gantry searches with.
pub const SERVICE_DN: &str = "cn=gantry,ou=services,dc=example,dc=org";
pub const SERVICE_PASSWORD: &str = "service-secret";
const ROOT_DN: &str = "cn=admin,dc=example,dc=org";
const ROOT_PASSWORD: &str = "root-secret";

/// The directory: users alice (ml), bob (hr), carol (gantry-admins), dave
/// (ml), erin (ml; a Gantry account of the same name is the tests' local
/// one); each one's password is `pw-NAME`.
const DATA: &str = include_str!("slapd_data.ldif");

pub struct Slapd {
    pub ldap_port: u16,
    pub ldaps_port: u16,
    /// PEM of the CA that signed the server's certificate.
    pub ca_pem: Vec<u8>,
    /// PEM of another CA, which did not.
    pub other_ca_pem: Vec<u8>,
    dir: tempfile::TempDir,
    pid: i32,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn run(dir: &Path, program: &str, args: &[&str], stdin: Option<&str>) {
    use std::io::Write;
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e} (run scripts/setup.sh: it installs slapd, ldap-utils, openssl)"));
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn make_ca(dir: &Path, name: &str) {
    let (key, pem, subj) = (format!("{name}.key"), format!("{name}.pem"), format!("/CN=Gantry LDAP test {name}"));
    #[rustfmt::skip]
    run(dir, "openssl", &[
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", &key, "-out", &pem, "-days", "2", "-subj", &subj,
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    ], None);
}

fn make_server_cert(dir: &Path) {
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    #[rustfmt::skip]
    run(dir, "openssl", &[
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost",
    ], None);
    #[rustfmt::skip]
    run(dir, "openssl", &[
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf",
    ], None);
}

fn config(d: &Path) -> String {
    let d = d.display();
    format!(
        "include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
pidfile {d}/slapd.pid
argsfile {d}/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
TLSCACertificateFile {d}/ca.pem
TLSCertificateFile {d}/server.pem
TLSCertificateKeyFile {d}/server.key
database mdb
maxsize 10485760
suffix \"{SUFFIX}\"
rootdn \"{ROOT_DN}\"
rootpw {ROOT_PASSWORD}
directory {d}/db
access to attrs=userPassword by anonymous auth by self write by * none
access to * by users read by anonymous auth
"
    )
}

impl Slapd {
    /// Makes the certificates and the database and starts slapd; panics
    /// saying what failed.
    pub fn start() -> Slapd {
        let slapd = Path::new("/usr/sbin/slapd");
        assert!(slapd.exists(), "/usr/sbin/slapd is missing: run scripts/setup.sh (it installs slapd and ldap-utils)");
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        make_ca(d, "ca");
        make_ca(d, "other-ca");
        make_server_cert(d);
        std::fs::create_dir(d.join("db")).unwrap();
        std::fs::write(d.join("slapd.conf"), config(d)).unwrap();
        std::fs::write(d.join("data.ldif"), DATA).unwrap();
        run(d, "/usr/sbin/slapadd", &["-f", "slapd.conf", "-l", "data.ldif"], None);
        let (ldap_port, ldaps_port) = (free_port(), free_port());
        let urls = format!("ldap://127.0.0.1:{ldap_port}/ ldaps://127.0.0.1:{ldaps_port}/");
        // Returns once the daemon is initialised and listening.
        run(d, "/usr/sbin/slapd", &["-f", "slapd.conf", "-h", &urls], None);
        let pid: i32 = std::fs::read_to_string(d.join("slapd.pid")).expect("slapd.pid").trim().parse().unwrap();
        let ca_pem = std::fs::read(d.join("ca.pem")).unwrap();
        let other_ca_pem = std::fs::read(d.join("other-ca.pem")).unwrap();
        Slapd { ldap_port, ldaps_port, ca_pem, other_ca_pem, dir, pid }
    }

    pub fn ldaps_url(&self) -> String {
        format!("ldaps://127.0.0.1:{}", self.ldaps_port)
    }

    /// The plain port's URL (for StartTLS).
    pub fn ldap_url(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.ldap_port)
    }

    /// Writes `pem` to a file in the server's directory (for --ldap-ca-file).
    pub fn write_file(&self, name: &str, pem: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        path
    }

    /// Applies an LDIF change (ldapmodify as the directory's root), e.g.
    /// moving a user between groups.
    pub fn modify(&self, ldif: &str) {
        let url = self.ldap_url();
        run(self.dir.path(), "ldapmodify", &["-x", "-H", &url, "-D", ROOT_DN, "-w", ROOT_PASSWORD], Some(ldif));
    }

    /// Stops the server now (the "directory does not answer" tests): SIGTERM
    /// to the PID it wrote, then `tail --pid` returns once it is gone, so
    /// its ports are closed when this returns.
    pub fn stop(&mut self) {
        if self.pid > 0 {
            let pid = self.pid.to_string();
            let _ = Command::new("kill").arg(&pid).status();
            let _ = Command::new("tail").args([&format!("--pid={pid}"), "-f", "/dev/null"]).status();
            self.pid = 0;
        }
    }
}

impl Drop for Slapd {
    fn drop(&mut self) {
        self.stop();
    }
}
