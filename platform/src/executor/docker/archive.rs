//! Files in and out of a container through the engine's archive API
//! (`PUT`/`GET`/`HEAD /containers/{id}/archive`), streamed: an upload is a
//! tar made on the fly around the incoming bytes; a download is the
//! engine's tar read entry by entry, passing one file's bytes through.

use super::super::inside::{ByteStream, Download, PathStat, Upload};
use super::super::ExecError;
use super::DockerExecutor;
use crate::workspace::tar::{self, Item, Kind};
use bollard::query_parameters::{ContainerArchiveInfoOptions, DownloadFromContainerOptions, UploadToContainerOptions};
use bytes::Bytes;
use futures_util::{stream, StreamExt};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Go's `os.ModeDir` and `os.ModeSymlink`, as the stat header reports them.
const MODE_DIR: u32 = 1 << 31;
const MODE_SYMLINK: u32 = 1 << 27;

impl DockerExecutor {
    pub async fn stat_path(&self, container_id: &str, path: &str) -> Result<Option<PathStat>, ExecError> {
        let docker = self.client().await?;
        let opts = ContainerArchiveInfoOptions { path: path.to_string() };
        match docker.get_container_archive_info(container_id, Some(opts)).await {
            Ok(s) => Ok(Some(PathStat {
                name: s.name,
                size: s.size,
                is_dir: s.file_mode & MODE_DIR != 0,
                link_target: (s.file_mode & MODE_SYMLINK != 0).then_some(s.link_target),
            })),
            Err(e) => match self.err(e, &format!("stat {path}")) {
                ExecError::NotFound(_) => Ok(None),
                other => Err(other),
            },
        }
    }

    pub async fn upload(&self, container_id: &str, up: Upload) -> Result<(), ExecError> {
        let mtime = crate::now().max(0) as u64;
        let mut head = Vec::new();
        for dir in &up.missing_dirs {
            head.extend(tar::header(dir, Kind::Dir, 0, 0o755, mtime));
        }
        head.extend(tar::header(&up.path, Kind::File, up.size, 0o644, mtime));
        let mut tail = vec![0u8; tar::padding(up.size)];
        tail.extend_from_slice(&tar::END_OF_ARCHIVE);
        let body = exactly(idle_limited(up.body, self.inner.upload_idle), up.size);
        // Why the body failed (stalled, cut short, too long): the engine's
        // client only sees an aborted request, which reads as an
        // unreachable engine.
        let failure: Arc<Mutex<Option<ExecError>>> = Arc::default();
        let seen = failure.clone();
        let archive = stream::once(async move { Ok(Bytes::from(head)) })
            .chain(body)
            .chain(stream::once(async move { Ok(Bytes::from(tail)) }))
            .map(move |r: Result<Bytes, ExecError>| {
                r.map_err(|e| {
                    let text = e.to_string();
                    seen.lock().expect("upload failure").get_or_insert(e);
                    std::io::Error::other(text)
                })
            });
        let opts = UploadToContainerOptions {
            path: up.root.clone(),
            // Never replace a directory by a file or the other way round,
            // and give the files to the image's user.
            no_overwrite_dir_non_dir: Some("true".into()),
            copy_uidgid: Some("true".into()),
        };
        // Not the per-request timeout: the engine answers after the whole
        // body is in (see `TRANSFER_TIMEOUT`); `idle_limited` bounds it.
        let docker = self.transfer_client().await?;
        let result = docker.upload_to_container(container_id, Some(opts), bollard::body_try_stream(archive)).await;
        if let Some(e) = failure.lock().expect("upload failure").take() {
            return Err(e);
        }
        result.map_err(|e| match e {
            bollard::errors::Error::RequestTimeoutError => ExecError::Unavailable(format!(
                "Docker Engine at {} did not finish the upload to {}/{} within {} h",
                self.endpoint(),
                up.root,
                up.path,
                super::TRANSFER_TIMEOUT.as_secs() / 3600
            )),
            e => self.err(e, &format!("upload to {}/{}", up.root, up.path)),
        })
    }

    pub async fn download(&self, container_id: &str, path: &str) -> Result<Download, ExecError> {
        let docker = self.client().await?;
        let me = self.clone();
        let what = format!("download {path}");
        let mut archive = docker
            .download_from_container(container_id, Some(DownloadFromContainerOptions { path: path.to_string() }))
            .map(move |r| r.map_err(|e| me.err(e, &what)))
            .boxed();
        // Read up to the first entry's header, keeping the raw bytes (a
        // directory is passed on as the archive itself).
        let mut reader = tar::Reader::new();
        let mut raw: Vec<Bytes> = Vec::new();
        let mut queued: VecDeque<Item> = VecDeque::new();
        let entry = loop {
            if let Some(Item::Entry(e)) = queued.pop_front() {
                break e;
            }
            if !queued.is_empty() {
                continue;
            }
            match archive.next().await {
                Some(Ok(chunk)) => {
                    raw.push(chunk.clone());
                    queued.extend(reader.push(chunk).map_err(ExecError::Failed)?);
                }
                Some(Err(e)) => return Err(e),
                None => return Err(ExecError::NotFound(format!("{path}: the engine sent an empty archive"))),
            }
        };
        let name = entry.path.trim_end_matches('/').rsplit('/').next().unwrap_or_default().to_string();
        match entry.kind {
            Kind::File => {
                let body = file_body(archive, reader, queued, entry.size);
                Ok(Download::File { name, size: entry.size, body })
            }
            Kind::Dir => {
                let tar = stream::iter(raw.into_iter().map(Ok)).chain(archive).boxed();
                Ok(Download::Directory { name, tar })
            }
            Kind::Symlink => Err(ExecError::Failed(format!("{path} is a symbolic link; download what it points to"))),
            Kind::Other(t) => {
                Err(ExecError::Failed(format!("{path} is not a regular file (tar type {:?})", t as char)))
            }
        }
    }
}

/// The data of the entry whose header was just read, then the end.
fn file_body(archive: ByteStream, reader: tar::Reader, queued: VecDeque<Item>, size: u64) -> ByteStream {
    struct St {
        archive: ByteStream,
        reader: tar::Reader,
        queued: VecDeque<Item>,
        left: u64,
        done: bool,
    }
    let st = St { archive, reader, queued, left: size, done: false };
    stream::unfold(st, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            match st.queued.pop_front() {
                Some(Item::Data(d)) => {
                    st.left = st.left.saturating_sub(d.len() as u64);
                    return Some((Ok(d), st));
                }
                // The file is complete: stop reading (the connection closes).
                Some(Item::EntryEnd) | Some(Item::End) | Some(Item::Entry(_)) => return None,
                None => {}
            }
            match st.archive.next().await {
                Some(Ok(chunk)) => match st.reader.push(chunk) {
                    Ok(items) => st.queued.extend(items),
                    Err(e) => {
                        st.done = true;
                        return Some((Err(ExecError::Failed(e)), st));
                    }
                },
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
                None => {
                    st.done = true;
                    if st.left > 0 {
                        return Some((
                            Err(ExecError::Failed("the engine's archive ended before the file did".into())),
                            st,
                        ));
                    }
                    return None;
                }
            }
        }
    })
    .boxed()
}

/// Passes `body` through, failing when it sends nothing for `idle` (a
/// client that stopped sending would otherwise hold the upload open, and
/// the engine's connection with it, for ever). The clock runs only while
/// the next chunk is awaited: an engine slow to take the bytes does not
/// count against the client.
fn idle_limited(body: ByteStream, idle: Duration) -> ByteStream {
    stream::unfold((body, false), move |(mut body, done)| async move {
        if done {
            return None;
        }
        match tokio::time::timeout(idle, body.next()).await {
            Ok(Some(Ok(chunk))) => Some((Ok(chunk), (body, false))),
            Ok(Some(Err(e))) => Some((Err(e), (body, true))),
            Ok(None) => None,
            Err(_) => Some((
                Err(ExecError::Failed(format!("the upload stalled: nothing was sent for {}", idle_text(idle)))),
                (body, true),
            )),
        }
    })
    .boxed()
}

fn idle_text(d: Duration) -> String {
    if d.as_secs() > 0 && d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// Passes `body` through, failing if it is longer or shorter than `size`
/// (a tar entry's size is written before its bytes).
fn exactly(body: ByteStream, size: u64) -> ByteStream {
    stream::unfold((body, 0u64, false), move |(mut body, seen, done)| async move {
        if done {
            return None;
        }
        match body.next().await {
            Some(Ok(chunk)) => {
                let seen = seen + chunk.len() as u64;
                if seen > size {
                    Some((
                        Err(ExecError::Failed(format!("the upload is longer than its announced {size} bytes"))),
                        (body, seen, true),
                    ))
                } else {
                    Some((Ok(chunk), (body, seen, false)))
                }
            }
            Some(Err(e)) => Some((Err(e), (body, seen, true))),
            None if seen < size => Some((
                Err(ExecError::Failed(format!("the upload ended after {seen} of {size} bytes"))),
                (body, seen, true),
            )),
            None => None,
        }
    })
    .boxed()
}
