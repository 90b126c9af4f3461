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
        // Printed where the logs go too (a journal, a container's log): a
        // temporary password, to be replaced at the first sign-in.
        accounts::require_new_password(pool, admin.id).await?;
        println!(
            "\n  First administrator created.\n    username: {}\n    password: {password}\n  A temporary password, shown only now: the first sign-in asks for a new one.\n",
            admin.username
        );
    } else {
        println!("First administrator {} created with the configured password.", admin.username);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn root(pool: &Pool) -> accounts::User {
        accounts::list_users(pool).await.unwrap().into_iter().find(|u| u.username == "root").expect("root exists")
    }

    gantry_testkit::timed_test! {
        async fn a_generated_first_password_must_be_replaced_a_configured_one_need_not() {
            let dir = tempfile::tempdir().unwrap();
            let pool = gantry_platform::db::connect_file(&dir.path().join("a.db")).await.unwrap();
            gantry_platform::db::migrate(&pool).await.unwrap();
            assert!(ensure_admin(&pool, "root", None).await.unwrap());
            assert!(root(&pool).await.must_change_password, "a generated password is temporary");
            assert!(!ensure_admin(&pool, "root", None).await.unwrap(), "an admin exists: nothing made");

            let dir = tempfile::tempdir().unwrap();
            let pool = gantry_platform::db::connect_file(&dir.path().join("b.db")).await.unwrap();
            gantry_platform::db::migrate(&pool).await.unwrap();
            assert!(ensure_admin(&pool, "root", Some("configured-password-1")).await.unwrap());
            assert!(!root(&pool).await.must_change_password, "the operator chose it");
        }
    }
}
