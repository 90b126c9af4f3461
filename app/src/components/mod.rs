pub mod form_error;
pub mod layout;
pub mod quota_gauge;
