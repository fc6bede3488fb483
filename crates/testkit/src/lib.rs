//! Test support shared by the operator's suites and the benchmark.
//!
//! [`ControlPlane`] is a real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver (RBAC enforced,
//! service-account tokens, the default admission plugins, an audit log), kube-controller-manager, kube-scheduler and
//! kwok with fake nodes, built from Go modules by `hack/control-plane/build.sh`.

pub mod audit;
pub mod cluster;
pub mod control_plane;
pub mod http;

pub use audit::{AuditLog, Request};
pub use cluster::{Backend, Cluster, ClusterOptions};
pub use control_plane::{ControlPlane, Error, Options, User};
