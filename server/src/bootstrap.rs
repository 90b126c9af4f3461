//! First start: make sure someone can sign in.

use gantry_core::Role;
use gantry_platform::{accounts, db::Pool, PlatformError};
use rand::{distributions::Alphanumeric, Rng};

/// Creates the first administrator when the database has none. Without a
/// configured password a random one is generated and printed once; only its
/// hash is stored. Returns whether an account was created.
pub async fn ensure_admin(pool: &Pool, username: &str, password: Option<&str>) -> Result<bool, PlatformError> {
    if accounts::count_admins(pool).await? > 0 {
        return Ok(false);
    }
    let (password, generated) = match password {
        Some(p) => (p.to_string(), false),
        None => (rand::thread_rng().sample_iter(&Alphanumeric).take(20).map(char::from).collect(), true),
    };
    let new = accounts::NewUser { username, password: &password, role: Role::Admin, group: None };
    let admin = accounts::create_user(pool, None, new).await?;
    if generated {
        println!("\n  First administrator created.\n    username: {}\n    password: {password}\n  This password is shown only now; store it safely.\n", admin.username);
    } else {
        println!("First administrator {} created with the configured password.", admin.username);
    }
    Ok(true)
}
