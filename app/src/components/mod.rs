pub mod form_error;
pub mod layout;
pub mod list_nav;
pub mod next_steps;
pub mod poll;
pub mod quota_gauge;
pub mod status;
pub mod task_table;
