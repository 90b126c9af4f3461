//! `gantry datasets ls` and `gantry datasets upload CODE VERSION FILE…`.
//! Uploads use the API's resumable protocol (README, "Resumable
//! uploads"): `POST …/uploads/{name}` finds or begins the upload and
//! answers the offset the server holds, `PATCH`es send the rest from
//! there in pieces, and after a dropped connection `HEAD` says where to go
//! on. Each request names the file as the upload page does
//! (`X-Gantry-Fingerprint`: its modification time and its first and last
//! 64 KiB), so an upload begun here or on the page is continued only with
//! the same file, and another file of the same name starts over.

use super::{client::Api, output, CliError, Conn};
use app::model::datasets::file_fingerprint;
use clap::Subcommand;
use futures_util::stream;
use http_client::{Body, Method, Response, StatusCode};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;
use std::{
    io::{Read, Seek, SeekFrom},
    path::{Path, PathBuf},
    time::Duration,
};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

#[derive(Debug, Subcommand)]
pub enum DatasetsCommand {
    /// List the datasets you may see.
    #[command(alias = "list")]
    Ls {
        /// Only those whose code, name or description contains this.
        #[arg(long)]
        query: Option<String>,
    },
    /// Upload files into a version (resumable: run it again to go on).
    Upload {
        code: String,
        version: String,
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Replace a file of the same name already in the version.
        #[arg(long)]
        replace: bool,
        /// The most one request sends, in MiB.
        #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=1024))]
        chunk_mib: u64,
    },
}

/// Tries in a row after a dropped connection before giving up (2, 4, 8… s apart).
const TRIES: u32 = 6;

pub async fn run(conn: &Conn, command: DatasetsCommand) -> Result<(), CliError> {
    let api = Api::from_conn(conn)?;
    match command {
        DatasetsCommand::Ls { query } => {
            let mut req = api.request(Method::GET, &["api", "v1", "datasets"]);
            if let Some(q) = query {
                req = req.query(&[("q", q)]);
            }
            let list: Vec<Value> = api.json(req).await?;
            if conn.json {
                return output::json(&list);
            }
            let columns = [
                ("CODE", "code"),
                ("NAME", "name"),
                ("REGION", "region"),
                ("CATEGORY", "category"),
                ("VISIBILITY", "visibility"),
                ("VERSIONS", "versions"),
                ("BYTES", "bytes"),
            ];
            output::table(&list, &columns);
            Ok(())
        }
        DatasetsCommand::Upload { code, version, files, replace, chunk_mib } => {
            let mut done = Vec::new();
            for path in &files {
                let up = Upload { api: &api, code: &code, version: &version, replace, chunk: chunk_mib << 20 };
                let file = up.send(path, conn.json).await?;
                done.push(file);
            }
            if conn.json {
                output::json(&done)?;
            }
            Ok(())
        }
    }
}

/// The upload page's name for a file (`X-Gantry-Fingerprint`).
pub fn fingerprint(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    let modified_ms =
        meta.modified()?.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as f64).unwrap_or(0.0);
    let sample = meta.len().min(64 << 10);
    let mut head = vec![0; sample as usize];
    file.read_exact(&mut head)?;
    let mut tail = vec![0; sample as usize];
    file.seek(SeekFrom::Start(meta.len() - sample))?;
    file.read_exact(&mut tail)?;
    Ok(file_fingerprint(modified_ms, &head, &tail))
}

struct Upload<'a> {
    api: &'a Api,
    code: &'a str,
    version: &'a str,
    replace: bool,
    chunk: u64,
}

impl Upload<'_> {
    fn path<'n>(&'n self, kind: &'n str, name: &'n str) -> Vec<&'n str> {
        let mut p = vec!["api", "v1", "datasets", self.code, "versions", self.version, kind];
        p.extend(name.split('/'));
        p
    }

    fn request(&self, method: Method, name: &str, fp: &str) -> http_client::RequestBuilder {
        let req = self.api.request(method, &self.path("uploads", name)).header("x-gantry-fingerprint", fp);
        if self.replace {
            req.query(&[("replace", "1")])
        } else {
            req
        }
    }

    /// Sends one file from wherever the server's copy of it stands; the
    /// listed file's JSON.
    async fn send(&self, path: &Path, quiet: bool) -> Result<Value, CliError> {
        let unreadable = |e: std::io::Error| CliError(format!("cannot read {}: {e}", path.display()));
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| CliError(format!("{} has no file name in UTF-8", path.display())))?
            .to_string();
        let total = std::fs::metadata(path).map_err(unreadable)?.len();
        let fp = fingerprint(path).map_err(unreadable)?;
        let start = self.request(Method::POST, &name, &fp).header("upload-length", total);
        let res = self.api.send(start).await?;
        let mut offset = upload_offset(&res).unwrap_or(0);
        let bar = progress(&name, total, offset, quiet);
        let resumed_from = offset;
        let mut tries = 0;
        let file = loop {
            let len = (total - offset).min(self.chunk);
            let body = Body::wrap_stream(read_from(path, offset, len, bar.clone()).await.map_err(unreadable)?);
            let patch = self
                .request(Method::PATCH, &name, &fp)
                .header("upload-offset", offset)
                .header("content-type", "application/offset+octet-stream")
                .header("content-length", len)
                .body(body);
            match patch.send().await {
                Ok(res) if res.status() == StatusCode::CREATED => break super::client::read_json::<Value>(res).await?,
                Ok(res) if res.status() == StatusCode::NO_CONTENT => {
                    offset = upload_offset(&res).ok_or_else(|| CliError("the server did not say its offset".into()))?;
                    tries = 0;
                }
                // Another request still holds the upload (an earlier try
                // the server is still receiving): wait, ask, go on.
                Ok(res) if res.status() == StatusCode::CONFLICT && res.headers().contains_key("retry-after") => {
                    tries = retry(tries, &format!("{name}: the server is still busy with it")).await?;
                    offset = self.held(&name, &fp).await?;
                }
                Ok(res) if res.status() == StatusCode::CONFLICT && upload_offset(&res).is_some() => {
                    offset = upload_offset(&res).unwrap_or(offset);
                }
                Ok(res) => return Err(super::client::refusal(res).await),
                Err(e) => {
                    tries = retry(tries, &format!("{name}: {e}")).await?;
                    offset = self.held(&name, &fp).await?;
                }
            }
            bar.set_position(offset);
        };
        bar.finish_and_clear();
        if !quiet {
            let resumed =
                if resumed_from > 0 { format!(", resumed at {}", output::bytes(resumed_from)) } else { String::new() };
            println!(
                "{name}: {} uploaded{resumed}, sha256 {}",
                output::bytes(total),
                file["sha256"].as_str().unwrap_or("?")
            );
        }
        Ok(file)
    }

    /// `HEAD`: the bytes the server holds now.
    async fn held(&self, name: &str, fp: &str) -> Result<u64, CliError> {
        let res = self.api.send(self.request(Method::HEAD, name, fp)).await?;
        upload_offset(&res).ok_or_else(|| CliError(format!("{name}: the server did not say its offset")))
    }
}

fn upload_offset(res: &Response) -> Option<u64> {
    res.headers().get("upload-offset")?.to_str().ok()?.parse().ok()
}

/// Waits 2, 4, 8… s; an error once `TRIES` have failed in a row.
async fn retry(tries: u32, why: &str) -> Result<u32, CliError> {
    if tries + 1 >= TRIES {
        return Err(CliError(format!("{why}; gave up after {TRIES} tries (run the same command again to go on)")));
    }
    eprintln!("{why}; trying again in {} s", 2u64 << tries);
    tokio::time::sleep(Duration::from_secs(2 << tries)).await;
    Ok(tries + 1)
}

fn progress(name: &str, total: u64, at: u64, quiet: bool) -> ProgressBar {
    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(total) };
    let style = ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(name.to_string());
    bar.set_position(at);
    bar
}

/// `len` bytes of the file from `offset`, in 256 KiB pieces, moving the bar.
async fn read_from(
    path: &Path,
    offset: u64,
    len: u64,
    bar: ProgressBar,
) -> std::io::Result<impl futures_util::Stream<Item = std::io::Result<Vec<u8>>> + Send + 'static> {
    let mut file = tokio::fs::File::open(path).await?;
    file.seek(SeekFrom::Start(offset)).await?;
    Ok(stream::try_unfold((file, len, bar), |(mut file, left, bar)| async move {
        if left == 0 {
            return Ok(None);
        }
        let mut buf = vec![0; left.min(256 << 10) as usize];
        file.read_exact(&mut buf).await?;
        let n = buf.len() as u64;
        bar.inc(n);
        Ok(Some((buf, (file, left - n, bar))))
    }))
}
