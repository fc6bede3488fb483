//! The plugin's integration tests, one binary: `status`, `wait` and `demo` against kubesim over HTTP.

mod query_cli;
mod support;
