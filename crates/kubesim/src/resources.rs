//! The registry of resource types the emulator serves: the built-ins, and those that CRDs add at run time.
//! A [`ResourceType`] is everything discovery, routing, validation and printing need to know about one
//! group/version/resource.

use std::sync::Arc;

use serde_json::Value;

/// Which subresources a type has.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Subresources {
    pub status: bool,
    /// The scale subresource: JSON paths (e.g. `.spec.replicas`) as a CRD declares them.
    pub scale: Option<ScalePaths>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    pub spec_replicas_path: String,
    pub status_replicas_path: String,
    pub label_selector_path: Option<String>,
}

/// Where a type comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    BuiltIn,
    /// Defined by a CustomResourceDefinition. Holds the served version's part of the CRD.
    Crd {
        /// The CRD's name (`plural.group`).
        crd_name: String,
        /// `openAPIV3Schema` of this version (null when absent).
        schema: Value,
        /// `additionalPrinterColumns` of this version (empty when absent).
        printer_columns: Vec<Value>,
        /// `selectableFields` of this version (JSON paths), beyond metadata.name/namespace.
        selectable_fields: Vec<String>,
        /// Whether this version is the storage version.
        storage: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    /// "" for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub list_kind: String,
    /// The resource (plural) name used in URLs, e.g. `deployments`.
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub verbs: Vec<String>,
    pub subresources: Subresources,
    pub origin: Origin,
}

impl ResourceType {
    /// `apps/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// `deployments.apps`, `services`: how upstream names a resource in messages.
    pub fn qualified(&self) -> String {
        crate::error::qualified_resource(&self.plural, &self.group)
    }

    pub fn is_crd(&self) -> bool {
        matches!(self.origin, Origin::Crd { .. })
    }

    /// The URL prefix of this type's group/version: `/api/v1` or `/apis/apps/v1`.
    pub fn group_version_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }
}

const ALL_VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    short_names: &[&str],
    categories: &[&str],
    status: bool,
) -> ResourceType {
    ResourceType {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        short_names: short_names.iter().map(|s| s.to_string()).collect(),
        categories: categories.iter().map(|s| s.to_string()).collect(),
        namespaced,
        verbs: ALL_VERBS.iter().map(|s| s.to_string()).collect(),
        subresources: Subresources { status, scale: None },
        origin: Origin::BuiltIn,
    }
}

// Over 80 lines on purpose: A table: one line per built-in type the emulator serves, in discovery order.
/// The built-in types the emulator serves, in discovery order.
pub fn builtin_types() -> Vec<ResourceType> {
    let mut types = vec![
        builtin("", "v1", "Namespace", "namespaces", false, &["ns"], &[], true),
        builtin("", "v1", "Service", "services", true, &["svc"], &["all"], true),
        builtin("", "v1", "Pod", "pods", true, &["po"], &["all"], true),
        builtin("", "v1", "ConfigMap", "configmaps", true, &["cm"], &[], false),
        builtin("", "v1", "Secret", "secrets", true, &[], &[], false),
        builtin("", "v1", "ServiceAccount", "serviceaccounts", true, &["sa"], &[], false),
        builtin("", "v1", "Event", "events", true, &["ev"], &[], false),
        builtin("", "v1", "Endpoints", "endpoints", true, &["ep"], &[], false),
        builtin("apps", "v1", "Deployment", "deployments", true, &["deploy"], &["all"], true),
        builtin("apps", "v1", "ReplicaSet", "replicasets", true, &["rs"], &["all"], true),
        builtin(
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            true,
            &["hpa"],
            &["all"],
            true,
        ),
        builtin("events.k8s.io", "v1", "Event", "events", true, &["ev"], &[], false),
        builtin("coordination.k8s.io", "v1", "Lease", "leases", true, &[], &[], false),
        builtin("rbac.authorization.k8s.io", "v1", "Role", "roles", true, &[], &[], false),
        builtin("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true, &[], &[], false),
        builtin("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false, &[], &[], false),
        builtin("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false, &[], &[], false),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
            &[],
            true,
        ),
        builtin("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", true, &[], &[], false),
        builtin(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            false,
            &[],
            &["api-extensions"],
            true,
        ),
        builtin(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            false,
            &[],
            &["api-extensions"],
            false,
        ),
        builtin("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", false, &[], &[], false),
        builtin(
            "authorization.k8s.io",
            "v1",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
            false,
            &[],
            &[],
            false,
        ),
        builtin(
            "authorization.k8s.io",
            "v1",
            "SelfSubjectRulesReview",
            "selfsubjectrulesreviews",
            false,
            &[],
            &[],
            false,
        ),
    ];
    for t in &mut types {
        // Deployments and ReplicaSets have a scale subresource (kubectl scale uses it).
        if t.group == "apps" {
            t.subresources.scale = Some(ScalePaths {
                spec_replicas_path: ".spec.replicas".into(),
                status_replicas_path: ".status.replicas".into(),
                label_selector_path: Some(".status.selector".into()),
            });
        }
        // Reviews are questions, not objects: create is all they serve.
        if t.group == "authorization.k8s.io" || t.group == "authentication.k8s.io" {
            t.verbs = vec!["create".into()];
        }
        // Namespaces cannot be patched into existence by apply in one call and have no deletecollection.
        if t.plural == "namespaces" {
            t.verbs.retain(|v| v != "deletecollection");
        }
    }
    types
}

/// A shared handle on one type; the registry hands these out so a CRD deletion does not invalidate
/// requests already in flight.
pub type ResourceRef = Arc<ResourceType>;
