//! Serving HTTP: the accept loop and its limits (`serve`, `limits`,
//! `clients`), who a client is (`client_address`), what every answer
//! carries (`headers`, `request_id`), the guards in front of pages and
//! server functions (`guard`, `multipart_guard`), and how a form's outcome
//! travels back to its page (`outcomes`).

pub mod client_address;
pub mod clients;
pub mod guard;
pub mod headers;
pub mod limits;
pub mod multipart_guard;
pub mod outcomes;
pub mod request_id;
pub mod serve;
