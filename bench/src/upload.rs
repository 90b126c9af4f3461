//! `gantry-bench upload`: figures, not assertions. A file of `--size-mib`
//! goes over loopback into the real router (one streamed `PUT`, stored in
//! both directory stores, each copy read back and checked), next to `cp`
//! of the same file to two places on the same disk, in the same run: four
//! rounds, in alternating order, each step timed after a `sync` so no step
//! pays for another's writeback. The process's peak resident memory during
//! the upload is printed too (the router runs in this process; the client
//! sends the file with `sendfile`, holding no buffer).

use gantry_core::Role;
use gantry_platform::{
    accounts::{self, NewUser},
    datasets::{self, store::DirStore, Datasets, Limits, NewDataset},
    db, tokens, PlatformError,
};
use std::{collections::HashMap, io::Write, path::Path, sync::Arc, time::Instant};

#[derive(Debug, Clone, clap::Args)]
pub struct UploadBenchArgs {
    /// Size of the uploaded file, in MiB.
    #[arg(long, default_value_t = 2048)]
    pub size_mib: u64,
    /// Where the source file and both stores go (one disk); default: a temporary directory under the data dir.
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
}

fn fail(e: impl std::fmt::Display) -> PlatformError {
    PlatformError::Internal(e.to_string())
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// The file system and device holding `dir`, from /proc/mounts (longest prefix).
fn disk_of(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && dir.starts_with(f[1])).then(|| (f[1].len(), format!("{} on {} ({})", f[0], f[1], f[2])))
        })
        .max()
        .map(|(_, s)| s)
        .unwrap_or_else(|| "unknown".into())
}

pub async fn run(args: UploadBenchArgs, data_dir: &Path) -> Result<(), PlatformError> {
    let parent = args.dir.clone().unwrap_or_else(|| data_dir.to_path_buf());
    std::fs::create_dir_all(&parent).map_err(fail)?;
    let work = tempfile::Builder::new().prefix("bench-upload-").tempdir_in(&parent).map_err(fail)?;
    let root = work.path();
    let size = args.size_mib << 20;
    println!("disk: {}", disk_of(root));
    let source = root.join("source.bin");
    {
        let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&source).map_err(fail)?);
        let block: Vec<u8> = (0..(1u32 << 20)).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        for _ in 0..args.size_mib {
            f.write_all(&block).map_err(fail)?;
        }
        f.flush().map_err(fail)?;
    }

    // Nothing dirty in the page cache before anything is timed: a source
    // still being written back would slow whichever step comes first.
    sync();

    // The router on a temporary database with directory stores on this disk.
    let pool = db::connect_file(&root.join("gantry.db")).await?;
    db::migrate(&pool).await?;
    let user = accounts::create_user(
        &pool,
        None,
        NewUser { username: "bench", password: "bench-password-1", role: Role::Admin, group: None },
    )
    .await?;
    let (_, token) = tokens::create(&pool, &user, "bench").await?;
    let limits =
        Limits { upload_max_bytes: size + 1, default_quota_bytes: size * (ROUNDS as u64 + 1), ..Limits::default() };
    let stores = Datasets::new(
        Arc::new(DirStore::new(root.join("central"))),
        HashMap::new(),
        Some(root.join("regions")),
        limits,
    );
    let new = NewDataset {
        code: "bench",
        name: "bench",
        region: "local",
        category: "other",
        description: "",
        visibility: "group",
    };
    datasets::create_dataset(&pool, &user, &new).await.map_err(|e| fail(e.to_string()))?;
    datasets::create_version(&pool, &user, "bench", "v1").await.map_err(|e| fail(e.to_string()))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(fail)?;
    let addr = listener.local_addr().map_err(fail)?;
    let opts = gantry_server::router::Options {
        site_root: root.join("site"),
        site_addr: addr,
        secure_cookies: false,
        public_origin: None,
        page_cache_ms: gantry_server::router::PAGE_CACHE_MS,
    };
    let app = gantry_server::router::build(opts, pool.clone()).await?.layer(axum::Extension(stores));
    tokio::spawn(async move {
        let _ = gantry_server::router::serve(listener, app).await;
    });

    let mib = args.size_mib as f64;
    println!("file: {} MiB (page-cached source; both copies fsynced and read back by the upload; a sync before each timed step)", args.size_mib);
    let rss_before = status_kib("VmRSS:");
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let mut ratios: Vec<[f64; 2]> = Vec::new();
    for round in 1..=ROUNDS {
        // Whichever step comes first meets the page cache as the last
        // round's clean-up left it: the order alternates, so neither side
        // always gets that.
        let upload_first = round % 2 == 0;
        let mut up_secs = 0.0;
        if upload_first {
            up_secs = time_upload(addr, &token, &source, size, round, root).await?;
        }
        let (cp_secs, sync_secs) = time_cps(root, &source)?;
        if !upload_first {
            up_secs = time_upload(addr, &token, &source, size, round, root).await?;
        }
        println!(
            "round {round}{}: 2 x cp {cp_secs:5.2} s (+ sync {sync_secs:.2} s); upload into both stores {up_secs:5.2} s ({:6.1} MiB/s): {:.2}x ({:.2}x counting cp's sync)",
            if upload_first { " (upload first)" } else { "" },
            mib / up_secs,
            cp_secs / up_secs,
            (cp_secs + sync_secs) / up_secs
        );
        ratios.push([cp_secs / up_secs, (cp_secs + sync_secs) / up_secs]);
    }
    let peak = status_kib("VmHWM:");
    let [cp, cp_sync] = [0, 1].map(|i| {
        let mut r: Vec<f64> = ratios.iter().map(|x| x[i]).collect();
        r.sort_by(f64::total_cmp);
        (r[(r.len() - 1) / 2] + r[r.len() / 2]) / 2.0
    });
    println!("upload / 2 x cp, median of {ROUNDS} rounds: {cp:.2}x   (counting cp's sync: {cp_sync:.2}x)");
    println!("process RSS: {} MiB before, peak {} MiB during the uploads", rss_before / 1024, peak / 1024);
    Ok(())
}

/// Rounds of (two cp's, one upload): the page cache makes one round noisy.
/// Even, so each order is timed as often.
const ROUNDS: usize = 4;

/// Two cp's of the source on the same disk; their time and their sync's.
/// The copies are removed (and that synced) before it returns.
fn time_cps(root: &Path, source: &Path) -> Result<(f64, f64), PlatformError> {
    std::fs::create_dir_all(root.join("cp-a")).map_err(fail)?;
    std::fs::create_dir_all(root.join("cp-b")).map_err(fail)?;
    let started = Instant::now();
    for to in ["cp-a/x", "cp-b/x"] {
        let ok = std::process::Command::new("cp").arg(source).arg(root.join(to)).status().map_err(fail)?.success();
        if !ok {
            return Err(fail("cp failed"));
        }
    }
    let cp_secs = started.elapsed().as_secs_f64();
    let sync_secs = sync();
    let _ = std::fs::remove_dir_all(root.join("cp-a"));
    let _ = std::fs::remove_dir_all(root.join("cp-b"));
    sync();
    Ok((cp_secs, sync_secs))
}

/// One upload of the source into both stores; its time. The stored copies
/// are removed (and that synced) before it returns.
async fn time_upload(
    addr: std::net::SocketAddr,
    token: &str,
    source: &Path,
    size: u64,
    round: usize,
    root: &Path,
) -> Result<f64, PlatformError> {
    let started = Instant::now();
    let answer = put_file(addr, token.to_string(), source.to_path_buf(), size, format!("big-{round}.bin")).await?;
    let up_secs = started.elapsed().as_secs_f64();
    if !answer.starts_with("HTTP/1.1 201") {
        return Err(fail(format!("the upload was refused: {}", answer.lines().next().unwrap_or(""))));
    }
    for store in ["central", "regions"] {
        let _ = std::fs::remove_dir_all(root.join(store).join("bench"));
    }
    sync();
    Ok(up_secs)
}

/// Runs `sync`; returns the seconds it took.
fn sync() -> f64 {
    let started = Instant::now();
    let _ = std::process::Command::new("sync").status();
    started.elapsed().as_secs_f64()
}

/// One streamed `PUT` of the file over a plain socket; returns the answer's
/// text. The body goes out with `sendfile` (page cache to socket, no copy
/// through this process): on a 2-core machine the client shares the cores
/// with the server it measures, and should take as little of them as it can.
async fn put_file(
    addr: std::net::SocketAddr,
    token: String,
    source: std::path::PathBuf,
    size: u64,
    name: String,
) -> Result<String, PlatformError> {
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut sock = std::net::TcpStream::connect(addr)?;
        let _ = sock.set_nodelay(true);
        // A server that stops reading or answering ends the bench with an
        // error instead of holding it (the upload's own idle limit is 60 s).
        sock.set_write_timeout(Some(SILENCE))?;
        sock.set_read_timeout(Some(SILENCE))?;
        let head = format!(
            "PUT /api/v1/datasets/bench/versions/v1/files/{name} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n"
        );
        sock.write_all(head.as_bytes())?;
        let file = std::fs::File::open(&source)?;
        let silent = |what: &str| {
            let what = what.to_string();
            move |e: std::io::Error| match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => std::io::Error::other(format!("the server {what} for {} s", SILENCE.as_secs())),
                _ => e,
            }
        };
        send_file(&sock, &file, size).map_err(silent("took no bytes"))?;
        let mut answer = Vec::new();
        sock.read_to_end(&mut answer).map_err(silent("did not answer"))?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&answer).into_owned())
    })
    .await
    .map_err(fail)?
    .map_err(fail)
}

/// How long the client waits for the socket to take or give a byte.
const SILENCE: std::time::Duration = std::time::Duration::from_secs(120);

/// `size` bytes of `file` from its start into `sock`.
fn send_file(sock: &std::net::TcpStream, file: &std::fs::File, size: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut offset: libc::off_t = 0;
    while (offset as u64) < size {
        let want = (size - offset as u64).min(1 << 30) as usize;
        // SAFETY: both descriptors are open for the call; `offset` is ours.
        let sent = unsafe { libc::sendfile(sock.as_raw_fd(), file.as_raw_fd(), &mut offset, want) };
        match sent {
            0 => {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the file is shorter than its size"))
            }
            n if n > 0 => {}
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}
