//! The upload shared by the API and the browser routes: a body streamed
//! into both stores, stopped when the right it began with ends meanwhile
//! ([`Access`]): the page's routes come with the session, the API's with a
//! token or the session ([`super::api`]). The other direction is
//! [`super::download`].

use axum::{
    body::Body,
    http::{header, HeaderMap},
};
use futures_util::TryStreamExt;
use gantry_platform::{
    accounts::User,
    datasets::{self, access::Access, BeginUpload, DatasetError, Datasets, UploadState},
    db::Pool,
};

/// What the client declared about a one-request upload.
pub struct Put<'a> {
    pub code: &'a str,
    pub version: &'a str,
    pub name: &'a str,
    pub replace: bool,
}

pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok())
}

/// The client's own SHA-256 of the file, if it sent one: checked before listing.
pub fn client_sha256(headers: &HeaderMap) -> Option<String> {
    headers.get("x-gantry-sha256").and_then(|v| v.to_str().ok()).map(|v| v.trim().to_ascii_lowercase())
}

/// Streams `body` into both stores in a task of its own: if the client
/// goes away, the handler's future is dropped, but the task still sees the
/// body end early and removes what it wrote.
pub async fn put_as(
    pool: &Pool,
    stores: &Datasets,
    user: &User,
    access: Access,
    p: Put<'_>,
    headers: &HeaderMap,
    body: Body,
) -> Result<datasets::FileView, DatasetError> {
    let begin = BeginUpload {
        code: p.code,
        version: p.version,
        name: p.name,
        replace: p.replace,
        total: content_length(headers),
        resumable: false,
    };
    let upload = datasets::begin_upload(pool, stores, user, &begin).await?;
    let expected = client_sha256(headers);
    let pool = pool.clone();
    let task = tokio::spawn(async move {
        let stream = body.into_data_stream().map_err(std::io::Error::other);
        datasets::write_upload_as(&pool, &upload, 0, stream, expected.as_deref(), access).await
    });
    match task.await {
        Ok(Ok(UploadState::Done(file))) => Ok(file),
        Ok(Ok(UploadState::Partial { .. })) => Err(DatasetError::Incomplete("the upload ended early".into())),
        Ok(Err(e)) => Err(e),
        Err(e) => Err(DatasetError::store("the upload failed on the server", format!("upload task: {e}"))),
    }
}
