//! [`DockerExecutor`]: drives one node's Docker Engine through bollard.
//!
//! The bollard client is made lazily on first use (and retried after a
//! failure), so a node whose engine is down can still be registered: its
//! calls fail with `ExecError::Unavailable` until the engine answers. The
//! first successful connection negotiates the API version down to the
//! daemon's (bollard speaks 1.53; Debian's dockerd 20.10 speaks 1.41).

use super::*;
use bollard::errors::Error as BError;
use bollard::{Docker, API_DEFAULT_VERSION};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::OnceCell;

mod archive;
mod container;
mod disk;
mod exec;
mod exec_stream;
pub use exec_stream::{Piece, Process};
mod image;
pub(crate) use image::split_reference;
mod logs;
mod output;
mod volume;

/// Per-request timeout (seconds). Long enough for a 10 s graceful stop.
/// bollard applies it from sending the request to the response's headers.
const TIMEOUT_SECS: u64 = 30;
/// An archive upload's ceiling instead: the engine answers its `PUT` only
/// once it has read and extracted the whole body, which for a large or
/// slowly sent file takes far longer than [`TIMEOUT_SECS`]. What bounds an
/// upload is [`UPLOAD_IDLE`] between the body's chunks.
const TRANSFER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(12 * 3600);
/// A commit's ceiling instead: the engine answers `POST /commit` only once
/// the container's whole writable layer is written to an image — minutes
/// for gigabytes installed outside /data — so the per-request timeout
/// failed every snapshot (and idle reclaim) of such a machine, each retry
/// starting another commit of the paused container.
const COMMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2 * 3600);
/// An upload whose body sends nothing for this long fails.
const UPLOAD_IDLE: std::time::Duration = std::time::Duration::from_secs(60);
/// Grace period for stop/restart before SIGKILL.
const STOP_GRACE_SECS: i32 = 10;
/// Cap on captured exec output, so a chatty command cannot exhaust memory.
const EXEC_OUTPUT_CAP: usize = 1 << 20;
/// Upper bound on one `exec` (start to exit).
const EXEC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

#[derive(Clone)]
pub struct DockerExecutor {
    inner: Arc<Inner>,
}

struct Inner {
    /// As given, for messages ("unix:///var/run/docker.sock").
    endpoint: String,
    transport: Transport,
    /// Where loop-device volume images live; `None`: plain volumes only.
    volume_dir: Option<PathBuf>,
    client: OnceCell<Docker>,
    /// [`TIMEOUT_SECS`] and [`UPLOAD_IDLE`], unless a test lowered them.
    request_timeout: std::time::Duration,
    upload_idle: std::time::Duration,
    /// Engine has an `nvidia` runtime; asked once, engines don't gain one live.
    nvidia: OnceCell<bool>,
    /// Storage driver and data root (`docker info`), asked once.
    storage: OnceCell<(gantry_core::disk::StorageDriver, Option<String>)>,
}

#[derive(Debug, Clone)]
enum Transport {
    Unix(String),
    Http(String),
    /// Mutual TLS; `cert_dir` holds ca.pem, cert.pem and key.pem.
    Tls {
        addr: String,
        cert_dir: PathBuf,
    },
}

impl std::fmt::Debug for DockerExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerExecutor").field("endpoint", &self.inner.endpoint).finish()
    }
}

impl DockerExecutor {
    /// `""` or `unix:///path` (local socket), `tcp://host:port` (plain
    /// HTTP), or `tls://host:port` / `https://host:port` (mutual TLS with
    /// `ca.pem`, `cert.pem`, `key.pem` from `GANTRY_DOCKER_CERT_DIR`, else
    /// `DOCKER_CERT_PATH`, else `~/.docker`, as the docker CLI does).
    /// Does not contact the engine. Volumes are plain named volumes.
    pub fn connect(endpoint: &str) -> Result<Self, ExecError> {
        Self::connect_inner(endpoint, None)
    }

    /// Like [`connect`](Self::connect), with size-enforced loop-device
    /// volumes whose images live in `volume_dir` — on a local engine only
    /// (a `unix://` socket on this host): `losetup` must run where the
    /// volume lives, so a remote engine keeps plain volumes and says why.
    pub fn connect_with_volume_dir(endpoint: &str, volume_dir: impl Into<PathBuf>) -> Result<Self, ExecError> {
        Self::connect_inner(endpoint, Some(volume_dir.into()))
    }

    fn connect_inner(endpoint: &str, volume_dir: Option<PathBuf>) -> Result<Self, ExecError> {
        let endpoint = if endpoint.trim().is_empty() { "unix:///var/run/docker.sock" } else { endpoint.trim() };
        let transport = if let Some(path) = endpoint.strip_prefix("unix://") {
            Transport::Unix(path.to_string())
        } else if endpoint.starts_with('/') {
            Transport::Unix(endpoint.to_string())
        } else if endpoint.starts_with("tcp://") || endpoint.starts_with("http://") {
            Transport::Http(endpoint.to_string())
        } else if let Some(addr) = endpoint.strip_prefix("https://").or_else(|| endpoint.strip_prefix("tls://")) {
            Transport::Tls { addr: addr.to_string(), cert_dir: tls_cert_dir(endpoint)? }
        } else {
            return Err(ExecError::Failed(format!(
                "Docker endpoint {endpoint:?} is not understood; use unix:///path/to/docker.sock or tcp://host:port"
            )));
        };
        Ok(DockerExecutor {
            inner: Arc::new(Inner {
                endpoint: endpoint.to_string(),
                transport,
                volume_dir,
                client: OnceCell::new(),
                request_timeout: std::time::Duration::from_secs(TIMEOUT_SECS),
                upload_idle: UPLOAD_IDLE,
                nvidia: OnceCell::new(),
                storage: OnceCell::new(),
            }),
        })
    }

    /// Other timeouts than the defaults (30 s per request, 60 s of
    /// silence in an upload's body), so tests of them stay short. Whole
    /// seconds for `request` (bollard's unit); call it before the executor
    /// is cloned or used.
    pub fn with_timeouts(mut self, request: std::time::Duration, upload_idle: std::time::Duration) -> Self {
        let inner = Arc::get_mut(&mut self.inner).expect("with_timeouts is called on a new executor");
        assert!(inner.client.get().is_none(), "with_timeouts is called before the first request");
        inner.request_timeout = request.max(std::time::Duration::from_secs(1));
        inner.upload_idle = upload_idle;
        self
    }

    /// An engine on this host (a `unix://` socket): its disk can be seen.
    pub(crate) fn is_local(&self) -> bool {
        matches!(self.inner.transport, Transport::Unix(_))
    }

    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// The loop-volume directory, or why this engine gets plain volumes.
    pub(crate) fn block_volume_dir(&self) -> Result<&std::path::Path, String> {
        match (&self.inner.transport, &self.inner.volume_dir) {
            (_, None) => Err("no volume directory is configured for this node".into()),
            (Transport::Unix(_), Some(dir)) => Ok(dir),
            _ => Err(format!(
                "node engine {} is remote: block volumes need a node-side helper, which Gantry does not have yet",
                self.inner.endpoint
            )),
        }
    }

    async fn client(&self) -> Result<&Docker, ExecError> {
        self.inner
            .client
            .get_or_try_init(|| async {
                let timeout = self.inner.request_timeout.as_secs();
                let docker = match &self.inner.transport {
                    Transport::Unix(p) => Docker::connect_with_unix(p, timeout, API_DEFAULT_VERSION),
                    Transport::Http(a) => Docker::connect_with_http(a, timeout, API_DEFAULT_VERSION),
                    Transport::Tls { addr, cert_dir } => Docker::connect_with_ssl(
                        addr,
                        &cert_dir.join("key.pem"),
                        &cert_dir.join("cert.pem"),
                        &cert_dir.join("ca.pem"),
                        timeout,
                        API_DEFAULT_VERSION,
                    ),
                }
                .map_err(|e| self.unreachable(&e))?;
                docker.negotiate_version().await.map_err(|e| self.err(e, "API version negotiation"))
            })
            .await
    }

    /// The client for an archive upload: the same connection pool, with
    /// [`TRANSFER_TIMEOUT`] instead of the per-request timeout.
    async fn transfer_client(&self) -> Result<Docker, ExecError> {
        self.client_with(TRANSFER_TIMEOUT).await
    }

    /// The same connection pool with another timeout than the per-request one.
    async fn client_with(&self, timeout: std::time::Duration) -> Result<Docker, ExecError> {
        Ok(self.client().await?.clone().with_timeout(timeout))
    }

    /// Includes the source chain: hyper's top-level "client error (Connect)"
    /// alone does not say *why* (refused, no such file, permission denied).
    fn unreachable(&self, e: &(dyn std::error::Error + 'static)) -> ExecError {
        let mut msg = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            let text = s.to_string();
            if !msg.contains(&text) {
                msg = format!("{msg}: {text}");
            }
            source = s.source();
        }
        ExecError::Unavailable(format!("Docker Engine at {} is unreachable: {msg}", self.inner.endpoint))
    }

    /// Sorts bollard errors into the retryable / not-found / failed kinds.
    fn err(&self, e: BError, what: &str) -> ExecError {
        match e {
            BError::DockerResponseServerError { status_code: 404, message } => {
                ExecError::NotFound(format!("{what}: {message}"))
            }
            BError::DockerResponseServerError { status_code, message } => {
                ExecError::Failed(format!("{what} failed (HTTP {status_code}): {message}"))
            }
            BError::RequestTimeoutError => ExecError::Unavailable(format!(
                "Docker Engine at {} did not answer {what} within {} s",
                self.inner.endpoint,
                self.inner.request_timeout.as_secs()
            )),
            e @ (BError::SocketNotFoundError(_)
            | BError::IOError { .. }
            | BError::HyperResponseError { .. }
            | BError::HyperLegacyError { .. }) => self.unreachable(&e),
            e => ExecError::Failed(format!("{what} failed: {e}")),
        }
    }

    pub async fn ping(&self) -> Result<EngineInfo, ExecError> {
        let v = self.client().await?.version().await.map_err(|e| self.err(e, "version"))?;
        Ok(EngineInfo {
            version: v.version.unwrap_or_default(),
            api_version: v.api_version.unwrap_or_default(),
            has_nvidia_runtime: self.has_nvidia().await?,
        })
    }

    async fn has_nvidia(&self) -> Result<bool, ExecError> {
        let docker = self.client().await?;
        let found = self
            .inner
            .nvidia
            .get_or_try_init(|| async {
                match docker.info().await.map_err(|e| self.err(e, "info")) {
                    Ok(info) => Ok(info.runtimes.is_some_and(|r| r.contains_key("nvidia"))),
                    Err(e @ ExecError::Unavailable(_)) => Err(e),
                    // An engine whose /info we cannot read still runs CPU
                    // containers; GPU pinning then falls back to env + labels.
                    Err(e) => {
                        tracing::warn!(endpoint = %self.inner.endpoint, error = %e, "cannot read engine info; assuming no nvidia runtime");
                        Ok(false)
                    }
                }
            })
            .await?;
        Ok(*found)
    }
}

/// A data volume that could not be mounted: Docker's texts ("error while
/// mounting volume '/var/lib/docker/volumes/…'", "failed to mount local
/// volume: mount /dev/loop9:…") and the refusals of `ensure_volume`, which
/// all begin "data volume NAME: " (its loop device holds another file, its
/// image could not be attached). They name host paths and devices, so
/// callers give their users a plain reason instead.
pub fn is_volume_failure(detail: &str) -> bool {
    detail.starts_with("data volume ")
        || ["failed to mount local volume", "error while mounting volume"].iter().any(|p| detail.contains(p))
}

/// The program a container was to run, when the engine did not find it in
/// the image (`exec: "/no/such/program": stat …: no such file or directory`,
/// or `…: executable file not found in $PATH`). It is the image's or the
/// user's own command, not a host path: worth telling its owner.
pub fn missing_program(detail: &str) -> Option<&str> {
    let rest = &detail[detail.find("exec: \"")? + "exec: \"".len()..];
    let program = &rest[..rest.find('"')?];
    let missing = ["no such file or directory", "executable file not found"].iter().any(|p| detail.contains(p));
    (missing && !program.is_empty() && program.len() <= 200).then_some(program)
}

/// Where the client certificates for TLS endpoints are, checked up front so
/// a missing file is a clear error rather than a handshake failure.
fn tls_cert_dir(endpoint: &str) -> Result<PathBuf, ExecError> {
    let dir = std::env::var_os("GANTRY_DOCKER_CERT_DIR")
        .or_else(|| std::env::var_os("DOCKER_CERT_PATH"))
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))
        .ok_or_else(|| {
            ExecError::Failed(format!(
                "Docker endpoint {endpoint}: set GANTRY_DOCKER_CERT_DIR to the TLS certificate directory"
            ))
        })?;
    for file in ["ca.pem", "cert.pem", "key.pem"] {
        if !dir.join(file).is_file() {
            return Err(ExecError::Failed(format!(
                "Docker endpoint {endpoint}: {} is missing (TLS needs ca.pem, cert.pem and key.pem; set GANTRY_DOCKER_CERT_DIR)",
                dir.join(file).display()
            )));
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(DockerExecutor::connect("").unwrap().endpoint(), "unix:///var/run/docker.sock");
        assert!(DockerExecutor::connect("unix:///nope.sock").is_ok(), "connecting must not touch the engine");
        assert!(DockerExecutor::connect("tcp://10.0.0.2:2375").is_ok());
        let tls = DockerExecutor::connect("https://10.0.0.2:2376").unwrap_err().to_string();
        assert!(tls.contains("TLS"), "{tls}");
        assert!(DockerExecutor::connect("ftp://x").is_err());
    }
}
