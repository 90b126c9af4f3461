pub mod admin;
pub mod dashboard;
pub mod datasets;
pub mod login;
pub mod not_found;
