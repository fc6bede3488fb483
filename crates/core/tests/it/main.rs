//! The core's integration tests, one binary: the committed CRD, the golden children, the CRD schema as an API
//! server judges it, and what the emulator stores of the desired children and the status.

mod admission;
mod admission_policy;
mod against_emulator;
mod crd;
mod golden;
mod schema;
mod support;
