//! Signed-out sessions stay signed out. Signing out deletes the session's
//! row, but a request of that session still running (a long upload, say)
//! writes the session back when it ends if it changed it — and the page
//! guard changes it to note when it was last used. So sign-out also notes
//! the session's id until the session would have expired, and the guard
//! and the session watcher treat a noted one as signed out.

use super::{User, UserRow, USER_SELECT};
use crate::{db::Pool, PlatformError};

/// Notes session `id` as signed out until `until` (unix seconds), and
/// forgets notes whose time has passed.
pub async fn note_signed_out(pool: &Pool, id: &str, until: i64) -> Result<(), PlatformError> {
    let mut tx = crate::transitions::begin(pool).await?;
    sqlx::query("DELETE FROM signed_out_sessions WHERE until < ?").bind(crate::now()).execute(&mut *tx).await?;
    sqlx::query("INSERT OR REPLACE INTO signed_out_sessions (id, until) VALUES (?, ?)")
        .bind(id)
        .bind(until)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Whether session `id` was signed out.
pub async fn signed_out(pool: &Pool, id: &str) -> Result<bool, PlatformError> {
    Ok(sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM signed_out_sessions WHERE id = ?)")
        .bind(id)
        .fetch_one(pool)
        .await?)
}

/// The account of user `user_id` for a request of session `session_id`:
/// `None` when there is no such account or the session was signed out (one
/// read, as [`super::user_by_id`]).
pub async fn user_for_session(pool: &Pool, user_id: i64, session_id: &str) -> Result<Option<User>, PlatformError> {
    let row: Option<UserRow> = sqlx::query_as(&format!(
        "{USER_SELECT} WHERE u.id = ? AND NOT EXISTS (SELECT 1 FROM signed_out_sessions s WHERE s.id = ?)"
    ))
    .bind(user_id)
    .bind(session_id)
    .fetch_optional(pool)
    .await?;
    row.map(User::try_from).transpose()
}
