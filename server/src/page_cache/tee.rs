//! A response body passed on as it comes, with a copy for the cache.

use super::kept::MAX_PAGE_BYTES;
use axum::body::Bytes;
use futures_util::{Stream, StreamExt};
use std::{
    pin::Pin,
    task::{Context, Poll},
};

/// Hands the whole body to `done` once it has all gone out — unless it
/// was too big or broke off, in which case `done` is dropped uncalled.
pub(super) struct Tee<S> {
    inner: S,
    seen: Option<Vec<Bytes>>,
    size: usize,
    done: Option<Box<dyn FnOnce(Vec<Bytes>) + Send>>,
}

impl<S> Tee<S> {
    pub fn new(inner: S, done: Box<dyn FnOnce(Vec<Bytes>) + Send>) -> Self {
        Tee { inner, seen: Some(Vec::new()), size: 0, done: Some(done) }
    }
}

impl<S, E> Stream for Tee<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Bytes, E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let next = this.inner.poll_next_unpin(cx);
        match &next {
            Poll::Ready(Some(Ok(chunk))) => {
                this.size += chunk.len();
                if this.size > MAX_PAGE_BYTES {
                    this.seen = None;
                } else if let Some(seen) = &mut this.seen {
                    seen.push(chunk.clone());
                }
            }
            Poll::Ready(Some(Err(_))) => this.seen = None,
            Poll::Ready(None) => {
                if let (Some(seen), Some(done)) = (this.seen.take(), this.done.take()) {
                    done(seen);
                }
            }
            Poll::Pending => {}
        }
        next
    }
}
