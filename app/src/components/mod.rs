pub mod form_error;
pub mod layout;
pub mod poll;
pub mod quota_gauge;
pub mod status;
pub mod task_table;
