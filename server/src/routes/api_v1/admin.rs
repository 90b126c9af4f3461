//! `/api/v1/admin/…`: the admin console for `admin` tokens of admins
//! (`caller` refuses every other token before a handler runs), through the
//! platform functions the admin pages' server functions call
//! (`app/src/api/admin.rs`, `fleet.rs`, `catalogue.rs`) with the same
//! parsing: users, groups (quota and policy), nodes, regions, images.

use super::{
    caller::Caller,
    errors::{ApiError, ErrorBody},
};
use app::state::AppState;
use axum::{
    extract::{
        rejection::{JsonRejection, PathRejection},
        Path, State,
    },
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use gantry_platform::{accounts, catalogue, cluster, images, nodes, policy, policy_access::AccessChange, transitions};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(users, create_user))
        .routes(routes!(set_enabled))
        .routes(routes!(set_role))
        .routes(routes!(groups, create_group))
        .routes(routes!(update_group))
        .routes(routes!(node_list, add_node))
        .routes(routes!(set_node_state, remove_node))
        .routes(routes!(regions))
        .routes(routes!(image_list, create_image))
}

/// Whatever the admin page shows, as the platform serializes it.
#[derive(Serialize, ToSchema)]
#[serde(transparent)]
#[schema(value_type = Object)]
pub struct AdminJson(serde_json::Value);

fn json<T: Serialize>(status: StatusCode, key: &str, value: T) -> Result<Response, ApiError> {
    let value = serde_json::to_value(value)
        .map_err(|e| gantry_platform::PlatformError::Internal(format!("serializing {key}: {e}")))?;
    Ok((status, Json(serde_json::json!({ key: value }))).into_response())
}

fn id(p: Result<Path<i64>, PathRejection>, example: &str) -> Result<i64, ApiError> {
    p.map(|Path(id)| id).map_err(|e| ApiError::path(e, example))
}

fn body<T>(b: Result<Json<T>, JsonRejection>, what: &str) -> Result<T, ApiError> {
    b.map(|Json(t)| t).map_err(|e| ApiError::body(e, what))
}

fn role(s: &str) -> Result<gantry_core::Role, ApiError> {
    s.trim().parse().map_err(|_| ApiError::bad_request("role must be user or admin"))
}

/// Every account: `{"users": [...]}`.
#[utoipa::path(get, path = "/api/v1/admin/users", tag = "admin",
    responses((status = 200, body = AdminJson), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn users(_: Caller, State(state): State<AppState>) -> Result<Response, ApiError> {
    json(StatusCode::OK, "users", accounts::list_users(&state.pool).await?)
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewUser {
    pub username: String,
    pub password: String,
    /// `user` (default) or `admin`.
    pub role: Option<String>,
    /// The group's name (default: the default group).
    pub group: Option<String>,
}

/// Creates an account, as the Users page does.
#[utoipa::path(post, path = "/api/v1/admin/users", tag = "admin", request_body = NewUser,
    responses((status = 201, body = AdminJson), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn create_user(
    caller: Caller,
    State(state): State<AppState>,
    b: Result<Json<NewUser>, JsonRejection>,
) -> Result<Response, ApiError> {
    let u = body(b, "a user")?;
    let role = role(u.role.as_deref().unwrap_or("user"))?;
    let group = u.group.as_deref().map(str::trim).filter(|g| !g.is_empty());
    let new = accounts::NewUser { username: u.username.trim(), password: &u.password, role, group };
    json(StatusCode::CREATED, "user", accounts::create_user(&state.pool, Some(caller.user.id), new).await?)
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Enabled {
    pub enabled: bool,
}

/// Disables (ending its sessions and revoking its tokens) or enables an account.
#[utoipa::path(put, path = "/api/v1/admin/users/{id}/enabled", tag = "admin", params(("id" = i64, Path)),
    request_body = Enabled,
    responses((status = 200, body = AdminJson), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn set_enabled(
    caller: Caller,
    State(state): State<AppState>,
    p: Result<Path<i64>, PathRejection>,
    b: Result<Json<Enabled>, JsonRejection>,
) -> Result<Response, ApiError> {
    let user_id = id(p, "/api/v1/admin/users/7/enabled")?;
    let e = body(b, "{\"enabled\": true|false}")?;
    json(StatusCode::OK, "user", accounts::set_disabled(&state.pool, caller.user.id, user_id, !e.enabled).await?)
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleChange {
    /// `user` or `admin`.
    pub role: String,
}

/// Changes an account's role (its sessions and tokens end, as on the page).
#[utoipa::path(put, path = "/api/v1/admin/users/{id}/role", tag = "admin", params(("id" = i64, Path)),
    request_body = RoleChange,
    responses((status = 200, body = AdminJson), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn set_role(
    caller: Caller,
    State(state): State<AppState>,
    p: Result<Path<i64>, PathRejection>,
    b: Result<Json<RoleChange>, JsonRejection>,
) -> Result<Response, ApiError> {
    let user_id = id(p, "/api/v1/admin/users/7/role")?;
    let r = role(&body(b, "{\"role\": \"user\"|\"admin\"}")?.role)?;
    json(StatusCode::OK, "user", accounts::set_role(&state.pool, caller.user.id, user_id, r).await?)
}

/// Every group with its quota, use and policy: `{"groups": [...]}`.
#[utoipa::path(get, path = "/api/v1/admin/groups", tag = "admin",
    responses((status = 200, body = AdminJson), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn groups(_: Caller, State(state): State<AppState>) -> Result<Response, ApiError> {
    let list = accounts::list_groups(&state.pool).await?;
    let mut models = policy::all_allowed_models(&state.pool).await?;
    let list: Vec<_> = list
        .into_iter()
        .map(|g| accounts::Group { allowed_models: models.remove(&g.id).unwrap_or_default(), ..g })
        .collect();
    json(StatusCode::OK, "groups", list)
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewGroup {
    pub name: String,
    pub gpu_quota: i64,
}

/// Creates a group with a GPU quota.
#[utoipa::path(post, path = "/api/v1/admin/groups", tag = "admin", request_body = NewGroup,
    responses((status = 201, body = AdminJson), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn create_group(
    caller: Caller,
    State(state): State<AppState>,
    b: Result<Json<NewGroup>, JsonRejection>,
) -> Result<Response, ApiError> {
    let g = body(b, "a group")?;
    json(
        StatusCode::CREATED,
        "group",
        accounts::create_group(&state.pool, Some(caller.user.id), g.name.trim(), g.gpu_quota).await?,
    )
}

/// A group's quota and policy; absent optional fields are left as they are.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupPolicy {
    pub gpu_quota: i64,
    pub max_gpus_per_machine: i64,
    /// GPU models the group may use; empty: any.
    #[serde(default)]
    pub allowed_models: Vec<String>,
    /// Both or neither: the most CPUs and memory (GB) one machine may ask for.
    pub max_cpus_per_machine: Option<i64>,
    pub max_memory_gb_per_machine: Option<i64>,
    pub snapshot_quota: Option<i64>,
    /// Image and region ids the group may use (empty: all; absent: unchanged).
    pub allowed_images: Option<Vec<i64>>,
    pub allowed_regions: Option<Vec<i64>>,
}

/// Sets a group's quota and policy, as the Groups page does (one
/// transaction; a bad value changes nothing).
#[utoipa::path(put, path = "/api/v1/admin/groups/{id}", tag = "admin", params(("id" = i64, Path)),
    request_body = GroupPolicy,
    responses((status = 200, body = AdminJson), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn update_group(
    caller: Caller,
    State(state): State<AppState>,
    p: Result<Path<i64>, PathRejection>,
    b: Result<Json<GroupPolicy>, JsonRejection>,
) -> Result<Response, ApiError> {
    let group_id = id(p, "/api/v1/admin/groups/7")?;
    let g = body(b, "a group's policy")?;
    let limits = match (g.max_cpus_per_machine, g.max_memory_gb_per_machine) {
        (Some(c), Some(m)) => Some((c, m)),
        (None, None) => None,
        _ => return Err(ApiError::bad_request("give both the CPUs and the memory per machine, or neither")),
    };
    let models: Vec<String> = g.allowed_models.iter().map(|m| m.trim().to_string()).filter(|m| !m.is_empty()).collect();
    let access = AccessChange { images: g.allowed_images, regions: g.allowed_regions };
    let updated = policy::update_group_policy_and_access(
        &state.pool,
        Some(caller.user.id),
        group_id,
        g.gpu_quota,
        g.max_gpus_per_machine,
        &models,
        &access,
        limits,
        g.snapshot_quota,
    )
    .await?;
    let allowed = policy::allowed_models(&state.pool, updated.id).await?;
    json(StatusCode::OK, "group", accounts::Group { allowed_models: allowed, ..updated })
}

/// Every node with its GPUs, capacity and heartbeat: `{"nodes": [...]}`.
#[utoipa::path(get, path = "/api/v1/admin/nodes", tag = "admin",
    responses((status = 200, body = AdminJson), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn node_list(_: Caller, State(state): State<AppState>) -> Result<Response, ApiError> {
    json(StatusCode::OK, "nodes", cluster::list_nodes(&state.pool).await?)
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewNode {
    pub name: String,
    pub region_code: String,
    /// unix://…, tcp://host:port, tls://host:port, or simulated://NAME.
    pub endpoint: String,
    pub gpu_count: i64,
    pub gpu_model: String,
    pub arch: Option<String>,
}

/// Adds a node, as the Nodes page does (its engine is asked first; nothing
/// is saved when it does not answer). `{"node_id": N}`.
#[utoipa::path(post, path = "/api/v1/admin/nodes", tag = "admin", request_body = NewNode,
    responses((status = 201, body = AdminJson), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn add_node(
    caller: Caller,
    State(state): State<AppState>,
    b: Result<Json<NewNode>, JsonRejection>,
) -> Result<Response, ApiError> {
    let n = body(b, "a node")?;
    let input =
        app::model::fleet::parse_add_node(&n.name, &n.region_code, &n.endpoint, &n.gpu_count.to_string(), &n.gpu_model)
            .map_err(ApiError::bad_request)?;
    let req = nodes::AddNode {
        name: input.name,
        region_code: input.region_code,
        endpoint: input.endpoint,
        gpu_count: input.gpu_count,
        gpu_model: input.gpu_model,
        arch: n.arch.unwrap_or_default(),
    };
    json(StatusCode::CREATED, "node_id", nodes::add_node(&state.pool, &state.fleet, caller.user.id, &req).await?)
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeStateChange {
    /// `ready`, `draining` or `down` (a node is marked lost on its page only).
    pub state: String,
    pub reason: Option<String>,
}

/// Drains a node (keeps its machines, takes no new ones), sets it ready or down.
#[utoipa::path(put, path = "/api/v1/admin/nodes/{id}", tag = "admin", params(("id" = i64, Path)),
    request_body = NodeStateChange,
    responses((status = 204), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn set_node_state(
    caller: Caller,
    State(state): State<AppState>,
    p: Result<Path<i64>, PathRejection>,
    b: Result<Json<NodeStateChange>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    use gantry_core::alloc::NodeState;
    let node_id = id(p, "/api/v1/admin/nodes/7")?;
    let c = body(b, "{\"state\": \"ready\"|\"draining\"|\"down\"}")?;
    let to: NodeState =
        c.state.trim().parse().map_err(|e: gantry_core::task::UnknownVariant| ApiError::bad_request(e.to_string()))?;
    if to == NodeState::Lost {
        return Err(ApiError::bad_request("a node is marked lost on its page, which asks for a confirmation"));
    }
    let reason = c.reason.as_deref().unwrap_or("").trim();
    transitions::node::set_state(&state.pool, Some(caller.user.id), node_id, to, reason).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Forgets a node that holds no live machine. `{"removed": NAME}`.
#[utoipa::path(delete, path = "/api/v1/admin/nodes/{id}", tag = "admin", params(("id" = i64, Path)),
    responses((status = 200, body = AdminJson), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn remove_node(
    caller: Caller,
    State(state): State<AppState>,
    p: Result<Path<i64>, PathRejection>,
) -> Result<Response, ApiError> {
    let node_id = id(p, "/api/v1/admin/nodes/7")?;
    let name = transitions::node::remove(&state.pool, Some(caller.user.id), node_id).await?;
    state.fleet.forget(node_id);
    json(StatusCode::OK, "removed", name)
}

/// Every region with its nodes and images: `{"regions": [...]}`.
#[utoipa::path(get, path = "/api/v1/admin/regions", tag = "admin",
    responses((status = 200, body = AdminJson), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn regions(_: Caller, State(state): State<AppState>) -> Result<Response, ApiError> {
    json(StatusCode::OK, "regions", catalogue::region_resources(&state.pool).await?)
}

/// Dev-machine images: `{"images": [...]}`.
#[utoipa::path(get, path = "/api/v1/admin/images", tag = "admin",
    responses((status = 200, body = AdminJson), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn image_list(_: Caller, State(state): State<AppState>) -> Result<Response, ApiError> {
    json(StatusCode::OK, "images", images::list_images(&state.pool).await?)
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewImage {
    pub name: String,
    pub reference: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub make_default: bool,
}

/// Adds a dev-machine image, as the Images page does.
#[utoipa::path(post, path = "/api/v1/admin/images", tag = "admin", request_body = NewImage,
    responses((status = 201, body = AdminJson), (status = "default", body = ErrorBody)),
    security(("token" = ["admin"])))]
pub async fn create_image(
    caller: Caller,
    State(state): State<AppState>,
    b: Result<Json<NewImage>, JsonRejection>,
) -> Result<Response, ApiError> {
    let i = body(b, "an image")?;
    let image = images::create_image(
        &state.pool,
        Some(caller.user.id),
        i.name.trim(),
        i.reference.trim(),
        i.description.trim(),
        i.make_default,
    )
    .await?;
    json(StatusCode::CREATED, "image", image)
}
