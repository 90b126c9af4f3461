//! What a request of an upload that failed partway leaves, and what the
//! person is told: a one-request upload leaves nothing (the caller
//! discards it); a resumable one goes back to the offset the server held,
//! and told the client, before that request, and goes on from there.

use super::{
    error::{CENTRAL, REGION},
    store,
    upload::Upload,
    DatasetError,
};
use std::io;

/// Why a request's bytes did not all reach both stores, and whether the
/// upload goes on: a resumable upload is kept at what the stores hold —
/// after a cut connection, what arrived; after any other failure, what
/// they held before this request — unless that could not be made so.
/// Anything not kept the caller discards.
pub(super) struct Failed {
    pub error: DatasetError,
    pub kept: bool,
}

/// What went wrong in a request that did not bring its bytes to both stores.
pub(super) enum Fault {
    /// Store `i` (`Upload::stores`) failed.
    Store(usize, io::Error),
    Hashing,
    /// The body brought this many bytes of the file, more than it may.
    TooBig(u64),
    /// The body stopped after this many bytes of the file.
    Cut(u64, io::Error),
}

/// The error for `fault`, saying what became of the upload. A resumable
/// one goes back to `offset`: what the server held, and told the client,
/// before this request — its bytes, cut short or beyond the declared
/// length or half-written by a failing store, are not trusted — and goes
/// on from there; if a store cannot even be put back, it is discarded.
pub(super) async fn failed(upload: &Upload, offset: u64, fault: Fault) -> Failed {
    let kept = upload.resumable && back_to(upload, offset).await;
    let outcome = |discarded: &str| {
        if kept {
            format!("the upload keeps the {offset} bytes held before this request: continue from there")
        } else {
            discarded.to_string()
        }
    };
    let error = match fault {
        Fault::Store(i, e) => {
            let detail = format!("{}: {e}", upload.stores[i].describe());
            let discarded =
                if i == 0 { "nothing was kept".to_string() } else { format!("the copy in {CENTRAL} was removed") };
            DatasetError::store(
                format!("writing to {} failed; {}", if i == 0 { CENTRAL } else { REGION }, outcome(&discarded)),
                detail,
            )
        }
        Fault::Hashing => DatasetError::Store(format!("hashing the upload failed; {}", outcome("nothing was kept"))),
        Fault::TooBig(size) => match upload.total {
            Some(total) if upload.max_bytes == total => {
                let said = if upload.resumable { format!("; {}", outcome("nothing was kept")) } else { String::new() };
                DatasetError::BadRequest(format!("the body is longer than the declared {total} bytes{said}"))
            }
            // Of unknown length: past what the group's quota had left, or
            // past the size limit.
            _ => match upload.over_quota(size) {
                Some(refusal) => DatasetError::Quota(refusal),
                None => DatasetError::TooLarge { limit: upload.max_bytes },
            },
        },
        Fault::Cut(size, e) => DatasetError::Incomplete(format!(
            "the upload stopped after {size} bytes ({e}); {}",
            outcome("nothing was kept")
        )),
    };
    Failed { error, kept }
}

/// Cuts both copies of a resumable upload back to `offset` (none at all
/// for 0); false if a store could not be made to hold exactly that.
async fn back_to(upload: &Upload, offset: u64) -> bool {
    for s in &upload.stores {
        let cut = async {
            match s.temp_len(&upload.temp).await? {
                // An object store's failed request never touched the object (its
                // bytes went to a new one, aborted); longer ones are cut.
                Some(held) if held > offset && offset > 0 => s.put_temp(&upload.temp, offset).await?.finish().await,
                Some(_) if offset == 0 => s.delete(&store::temp_key(&upload.temp)).await,
                Some(held) if held < offset => {
                    Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("holds {held} bytes, not {offset}")))
                }
                None if offset > 0 => {
                    Err(io::Error::new(io::ErrorKind::NotFound, "the upload's temporary object is gone"))
                }
                _ => Ok(()),
            }
        };
        if let Err(e) = cut.await {
            tracing::warn!(error = %e, store = %s.describe(), upload = upload.id, "could not take a failed request's bytes back out of a resumable upload");
            return false;
        }
    }
    true
}
