//! Users and groups: creation, sign-in, look-ups. Disabling, password
//! resets, role and group changes are in `lifecycle`.

mod audit_search;
mod lifecycle;
mod listing;
mod signed_out;
pub use audit_search::{search_audit, AuditFilter, AuditPage, AUDIT_PAGE_MAX};
pub use lifecycle::{
    change_password, confirm_password, require_new_password, reset_password, set_disabled, set_group, set_role,
};
pub use listing::{users_window, UserFilter, UsersWindow, USER_STATES};
pub use signed_out::{note_signed_out, signed_out, user_for_session};

use crate::{audit, db::Pool, error::is_unique_violation, now, password, throttle, PlatformError};
use gantry_core::{validate, Role};
use serde::{Deserialize, Serialize};

/// The group every account lands in unless told otherwise.
pub const DEFAULT_GROUP: &str = gantry_core::DEFAULT_GROUP;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: i64,
    pub username: String,
    pub role: Role,
    pub group_id: i64,
    pub group_name: String,
    /// The group's quota as of this read (one query serves both).
    pub group_quota: GroupQuota,
    /// Disabled accounts cannot sign in; their sessions answer 401.
    pub disabled: bool,
    /// A temporary password set by an admin: change it before anything else.
    pub must_change_password: bool,
    /// Sessions made in another generation are void (see migration 0009).
    /// Not shown: the browser has no use for it.
    #[serde(skip)]
    pub session_gen: i64,
    /// Whether a machine of the group is warned or reclaimed, as of this
    /// read. The reclaim banner (dashboard, machines page) is nearly always
    /// empty; with this it looks further only when there is something to
    /// show, instead of a query of its own on every view (a round trip to
    /// SQLite's thread costs more than the read itself).
    pub reclaim_notices: bool,
}

impl User {
    pub fn is_admin(&self) -> bool {
        self.role.is_admin()
    }

    /// Whether this account may act on something `owner_id` owns (a
    /// machine, its snapshots, its reclaim and rebalance settings): its
    /// owner or an admin. Group members only look. The one place the rule
    /// is written.
    pub fn acts_for(&self, owner_id: i64) -> bool {
        self.role.is_admin() || self.id == owner_id
    }
}

/// A group's GPU quota as the portal shows it: the group's name and figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaView {
    pub group: String,
    pub gpu_quota: i64,
    pub gpus_in_use: i64,
    pub max_gpus_per_machine: i64,
}

impl User {
    /// The group's quota as of this read of the account.
    pub fn quota(&self) -> QuotaView {
        let q = self.group_quota;
        QuotaView {
            group: self.group_name.clone(),
            gpu_quota: q.gpu_quota,
            gpus_in_use: q.gpus_in_use,
            max_gpus_per_machine: q.max_gpus_per_machine,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupQuota {
    pub gpu_quota: i64,
    pub gpus_in_use: i64,
    pub max_gpus_per_machine: i64,
}

#[derive(sqlx::FromRow)]
struct UserRow {
    id: i64,
    username: String,
    role: String,
    group_id: i64,
    group_name: String,
    gpu_quota: i64,
    gpus_in_use: i64,
    max_gpus_per_machine: i64,
    disabled: bool,
    must_change_password: bool,
    session_gen: i64,
    reclaim_notices: bool,
}

impl TryFrom<UserRow> for User {
    type Error = PlatformError;
    fn try_from(r: UserRow) -> Result<Self, PlatformError> {
        Ok(User {
            id: r.id,
            username: r.username,
            role: r.role.parse()?,
            group_id: r.group_id,
            group_name: r.group_name,
            group_quota: GroupQuota {
                gpu_quota: r.gpu_quota,
                gpus_in_use: r.gpus_in_use,
                max_gpus_per_machine: r.max_gpus_per_machine,
            },
            disabled: r.disabled,
            must_change_password: r.must_change_password,
            session_gen: r.session_gen,
            reclaim_notices: r.reclaim_notices,
        })
    }
}

// `reclaim_notices` is the banner's own test (`reclaim::NOTICE_SQL`).
/// Read on every request (`resolve_user`). The middle condition of the
/// EXISTS is implied by the last; it is there, word for word the partial
/// index `machines_reclaim`'s own, so that SQLite walks that index (the
/// group's few warned machines) instead of every machine of the group.
const USER_SELECT: &str = "SELECT u.id, u.username, u.role, u.group_id, g.name AS group_name,
                                  g.gpu_quota, g.gpus_in_use, g.max_gpus_per_machine,
                                  u.disabled, u.must_change_password, u.session_gen,
                                  EXISTS (SELECT 1 FROM machines m WHERE m.group_id = u.group_id
                                          AND (m.reclaim_deadline IS NOT NULL OR m.state = 'reclaimed')
                                          AND ((m.reclaim_deadline IS NOT NULL AND m.state IN ('running', 'stopped')) OR m.state = 'reclaimed')) AS reclaim_notices
                           FROM users u JOIN groups g ON g.id = u.group_id";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct Group {
    pub id: i64,
    pub name: String,
    pub gpu_quota: i64,
    pub gpus_in_use: i64,
    pub max_gpus_per_machine: i64,
    pub max_cpus_per_machine: i64,
    pub max_memory_gb_per_machine: i64,
    /// Snapshots its members may keep (taken by people; reclaim's own are
    /// not counted).
    pub snapshot_quota: i64,
    /// Most MB one machine may write outside /data (0: no limit).
    pub root_disk_mb: i64,
    /// Most MB its members' snapshots may take together (0: no limit).
    pub snapshot_disk_mb: i64,
    pub members: i64,
    /// Bumped by every edit of the group's policy or access lists
    /// (`policy`, `policy_access`); the Groups page posts the one it showed
    /// so that a save over someone else's newer edit is refused.
    pub policy_rev: i64,
    /// GPU models the group may use; empty means any. Not read with the
    /// group: the admin console fills it from `policy::all_allowed_models`.
    #[sqlx(skip)]
    #[serde(default)]
    pub allowed_models: Vec<String>,
}

const GROUP_SELECT: &str = "SELECT g.id, g.name, g.gpu_quota, g.gpus_in_use, g.max_gpus_per_machine, g.max_cpus_per_machine, g.max_memory_gb_per_machine, g.snapshot_quota, g.root_disk_mb, g.snapshot_disk_mb, g.policy_rev,
                                   (SELECT COUNT(*) FROM users u WHERE u.group_id = g.id) AS members
                            FROM groups g";

pub struct NewUser<'a> {
    pub username: &'a str,
    pub password: &'a str,
    pub role: Role,
    /// Group name; `None` means the default group.
    pub group: Option<&'a str>,
}

pub async fn create_group(pool: &Pool, actor: Option<i64>, name: &str, gpu_quota: i64) -> Result<Group, PlatformError> {
    validate::name("group name", name)?;
    validate::in_range("GPU quota", gpu_quota, 0, 100_000)?;
    let mut tx = crate::transitions::begin(pool).await?;
    let id = sqlx::query("INSERT INTO groups (name, gpu_quota, created_at) VALUES (?, ?, ?)")
        .bind(name)
        .bind(gpu_quota)
        .bind(now())
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            if is_unique_violation(&e) {
                PlatformError::Conflict(format!("a group named \"{name}\" already exists"))
            } else {
                e.into()
            }
        })?
        .last_insert_rowid();
    audit::record(&mut *tx, actor, "group.create", &format!("group {name} with GPU quota {gpu_quota}")).await?;
    tx.commit().await?;
    group_by_id(pool, id).await
}

/// The default group, created on first use with a zero quota.
pub async fn ensure_default_group(pool: &Pool) -> Result<i64, PlatformError> {
    sqlx::query("INSERT INTO groups (name, gpu_quota, created_at) VALUES (?, 0, ?) ON CONFLICT(name) DO NOTHING")
        .bind(DEFAULT_GROUP)
        .bind(now())
        .execute(pool)
        .await?;
    let (id,): (i64,) =
        sqlx::query_as("SELECT id FROM groups WHERE name = ?").bind(DEFAULT_GROUP).fetch_one(pool).await?;
    Ok(id)
}

pub async fn group_by_id(pool: &Pool, id: i64) -> Result<Group, PlatformError> {
    sqlx::query_as(&format!("{GROUP_SELECT} WHERE g.id = ?"))
        .bind(id)
        .fetch_optional(pool)
        .await?
        .ok_or_else(|| PlatformError::NotFound("group".into()))
}

pub async fn list_groups(pool: &Pool) -> Result<Vec<Group>, PlatformError> {
    Ok(sqlx::query_as(&format!("{GROUP_SELECT} ORDER BY g.name")).fetch_all(pool).await?)
}

pub async fn create_user(pool: &Pool, actor: Option<i64>, new: NewUser<'_>) -> Result<User, PlatformError> {
    validate::username(new.username)?;
    validate::new_password(new.password)?;
    let group_id = match new.group {
        None => ensure_default_group(pool).await?,
        Some(name) => {
            let row: Option<(i64,)> =
                sqlx::query_as("SELECT id FROM groups WHERE name = ?").bind(name).fetch_optional(pool).await?;
            row.ok_or_else(|| {
                PlatformError::NotFound(format!("group \"{}\"", name.chars().take(40).collect::<String>()))
            })?
            .0
        }
    };
    let hash = password::hash(new.password).await?;
    let mut tx = crate::transitions::begin(pool).await?;
    let id =
        sqlx::query("INSERT INTO users (username, password_hash, role, group_id, created_at) VALUES (?, ?, ?, ?, ?)")
            .bind(new.username)
            .bind(&hash)
            .bind(new.role.as_str())
            .bind(group_id)
            .bind(now())
            .execute(&mut *tx)
            .await
            .map_err(|e| {
                if is_unique_violation(&e) {
                    PlatformError::Conflict(format!("the username \"{}\" is taken", new.username))
                } else {
                    e.into()
                }
            })?
            .last_insert_rowid();
    let group_name: String =
        sqlx::query_scalar("SELECT name FROM groups WHERE id = ?").bind(group_id).fetch_one(&mut *tx).await?;
    audit::record(
        &mut *tx,
        actor,
        "user.create",
        &format!("user {} ({}) in group {group_name}", new.username, new.role),
    )
    .await?;
    tx.commit().await?;
    user_by_id(pool, id).await?.ok_or_else(|| PlatformError::NotFound("user".into()))
}

pub async fn user_by_id(pool: &Pool, id: i64) -> Result<Option<User>, PlatformError> {
    let row: Option<UserRow> =
        sqlx::query_as(&format!("{USER_SELECT} WHERE u.id = ?")).bind(id).fetch_optional(pool).await?;
    row.map(User::try_from).transpose()
}

pub async fn list_users(pool: &Pool) -> Result<Vec<User>, PlatformError> {
    let rows: Vec<UserRow> = sqlx::query_as(&format!("{USER_SELECT} ORDER BY u.username")).fetch_all(pool).await?;
    rows.into_iter().map(User::try_from).collect()
}

pub async fn count_admins(pool: &Pool) -> Result<i64, PlatformError> {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM users WHERE role = 'admin'").fetch_one(pool).await?;
    Ok(n)
}

/// Checks a username and password, applying the login throttle for the
/// account from this client and for the client address. The attempt is
/// counted before the password is verified (see `throttle`), and the
/// verification waits for a slot of the argon2 gate. Unknown users and wrong
/// passwords get the same answer and take the same time.
pub async fn authenticate(
    pool: &Pool,
    username: &str,
    password: &str,
    address: Option<&str>,
) -> Result<User, PlatformError> {
    authenticate_with(pool, &password::Gate::shared(), username, password, address).await
}

/// Verifies a password whose attempt was counted; when the argon2 gate
/// turns it away unverified, the count is given back (see
/// `throttle::give_back`).
pub(crate) async fn verify_counted(
    pool: &Pool,
    gate: &password::Gate,
    counted: &throttle::Counted,
    stored: &str,
    password: &str,
) -> Result<bool, PlatformError> {
    match password::verify_with(gate, stored, password).await {
        Err(busy @ PlatformError::Throttled { busy: true, .. }) => {
            throttle::give_back(pool, counted).await?;
            Err(busy)
        }
        other => other,
    }
}

pub async fn authenticate_with(
    pool: &Pool,
    gate: &password::Gate,
    username: &str,
    password: &str,
    address: Option<&str>,
) -> Result<User, PlatformError> {
    let username = username.trim();
    validate::login_name(username)?;
    validate::present_password(password)?;
    let counted = throttle::count_attempt(pool, &throttle::keys(username, address)).await?;

    let row: Option<(i64, String)> = sqlx::query_as("SELECT id, password_hash FROM users WHERE username = ?")
        .bind(username)
        .fetch_optional(pool)
        .await?;
    let (id, stored) = match row {
        Some((id, h)) => (Some(id), h),
        None => (None, password::DUMMY_HASH.clone()),
    };
    let ok = verify_counted(pool, gate, &counted, &stored, password).await?;
    match (id, ok) {
        (Some(id), true) => {
            throttle::forgive(pool, &counted).await?;
            let user = user_by_id(pool, id).await?.ok_or(PlatformError::BadCredentials)?;
            if user.disabled {
                return Err(PlatformError::Refused("this account is disabled; ask an administrator".into()));
            }
            Ok(user)
        }
        _ => Err(PlatformError::BadCredentials),
    }
}
