pub mod admin;
pub mod dashboard;
pub mod datasets;
pub mod login;
pub mod machines;
pub mod not_found;
pub mod tasks;
