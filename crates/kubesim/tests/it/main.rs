//! kubesim's integration tests, one binary: each module drives the emulator from outside (over HTTPS with kube
//! clients and kubectl, or through `Cluster`), sharing `support`.

mod support;

mod admission;
mod api_basic;
mod api_semantics;
mod api_watch;
mod autoscaling;
mod controllers_gc;
mod controllers_kubectl;
mod controllers_rollout;
mod events;
mod faults_e2e;
mod kubectl_cli;
mod rbac;
