//! How the operator names itself to the cluster: in Events, metrics labels and field managers. A leaf module, so
//! metrics and leader election need not import the controller for it.

/// The controller name in Events and metrics.
pub const CONTROLLER_NAME: &str = "microservice-operator";
