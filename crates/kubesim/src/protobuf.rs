//! `application/vnd.kubernetes.protobuf` request bodies, decoded into the object's JSON form.
//!
//! `kubectl create namespace|configmap|secret|deployment|serviceaccount|service|role|...` and `kubectl auth can-i`
//! POST protobuf and never retry as JSON, so the emulator decodes what they send. The wire format is the magic
//! `k8s\0` followed by a `runtime.Unknown` envelope (TypeMeta + the raw typed message). The typed message is
//! decoded with `k8s-pb` and converted field by field into the JSON the JSON API carries, omitting what Go's
//! `omitempty` omits: Go's protobuf encoder writes every non-pointer field, so a zero there means "unset"
//! unless the Go field is a pointer.
//!
//! Only the kinds below are decoded; others answer 415 UnsupportedMediaType. Fields outside the mapped set
//! (e.g. pod affinity, topology spread constraints) are dropped.

use std::collections::BTreeMap;

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::authentication::v1 as authn;
use k8s_pb::api::authorization::v1 as authz;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};

mod pod;
use pod::*;

/// The four bytes every Kubernetes protobuf body starts with.
pub const MAGIC: &[u8] = b"k8s\0";

pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

// Over 80 lines on purpose: A table: one arm per kind the emulator decodes from protobuf, after the envelope checks.
/// Decodes a protobuf request body into the object's JSON form (with apiVersion and kind).
/// Malformed bodies → 400 BadRequest; kinds this emulator cannot decode → 415 UnsupportedMediaType.
pub fn decode_body(body: &[u8]) -> ApiResult<Value> {
    let envelope = body.strip_prefix(MAGIC).ok_or_else(|| {
        ApiError::bad_request("the protobuf body does not start with the Kubernetes magic number \"k8s\\x00\"")
    })?;
    let unknown = Unknown::decode(envelope).map_err(malformed)?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    if api_version.is_empty() || kind.is_empty() {
        return Err(ApiError::bad_request("Object 'Kind' is missing in the protobuf body"));
    }
    if let Some(enc) = unknown.content_encoding.as_deref().filter(|e| !e.is_empty()) {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the protobuf body uses content encoding {enc:?}, which is not supported"),
        ));
    }
    let raw = unknown.raw.unwrap_or_default();
    let raw = raw.as_slice();
    let object = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => namespace(&core::Namespace::decode(raw).map_err(malformed)?),
        ("v1", "ConfigMap") => config_map(&core::ConfigMap::decode(raw).map_err(malformed)?),
        ("v1", "Secret") => secret(&core::Secret::decode(raw).map_err(malformed)?),
        ("v1", "ServiceAccount") => service_account(&core::ServiceAccount::decode(raw).map_err(malformed)?),
        ("v1", "Service") => service(&core::Service::decode(raw).map_err(malformed)?),
        ("apps/v1", "Deployment") => deployment(&apps::Deployment::decode(raw).map_err(malformed)?),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            self_subject_access_review(&authz::SelfSubjectAccessReview::decode(raw).map_err(malformed)?)
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => {
            let r = authz::SelfSubjectRulesReview::decode(raw).map_err(malformed)?;
            Obj::new()
                .msg("metadata", &r.metadata, object_meta)
                .msg("spec", &r.spec, |s| Obj::new().str("namespace", &s.namespace).done())
                .done()
        }
        // `kubectl auth whoami`: the body carries nothing the server reads.
        ("authentication.k8s.io/v1", "SelfSubjectReview") => {
            let r = authn::SelfSubjectReview::decode(raw).map_err(malformed)?;
            Obj::new().msg("metadata", &r.metadata, object_meta).done()
        }
        ("authentication.k8s.io/v1", "TokenRequest") => {
            let r = authn::TokenRequest::decode(raw).map_err(malformed)?;
            Obj::new()
                .msg("metadata", &r.metadata, object_meta)
                .msg("spec", &r.spec, |s| {
                    Obj::new()
                        .strs("audiences", &s.audiences)
                        .int("expirationSeconds", &s.expiration_seconds)
                        .msg("boundObjectRef", &s.bound_object_ref, |b| {
                            Obj::new()
                                .str("kind", &b.kind)
                                .str("apiVersion", &b.api_version)
                                .str("name", &b.name)
                                .str("uid", &b.u_id)
                                .done()
                        })
                        .done()
                })
                .done()
        }
        ("rbac.authorization.k8s.io/v1", "Role") => {
            let r = rbac::Role::decode(raw).map_err(malformed)?;
            Obj::new().msg("metadata", &r.metadata, object_meta).list("rules", &r.rules, policy_rule).done()
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
            let r = rbac::ClusterRole::decode(raw).map_err(malformed)?;
            Obj::new()
                .msg("metadata", &r.metadata, object_meta)
                .list("rules", &r.rules, policy_rule)
                .msg("aggregationRule", &r.aggregation_rule, |a| {
                    Obj::new().list("clusterRoleSelectors", &a.cluster_role_selectors, label_selector).done()
                })
                .done()
        }
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
            let b = rbac::RoleBinding::decode(raw).map_err(malformed)?;
            role_binding(&b.metadata, &b.subjects, &b.role_ref)
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            let b = rbac::ClusterRoleBinding::decode(raw).map_err(malformed)?;
            role_binding(&b.metadata, &b.subjects, &b.role_ref)
        }
        _ => {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - kubesim cannot decode {api_version}, Kind={kind} from protobuf; accepted media types include: application/json, application/yaml"
                ),
            ));
        }
    };
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!(kind));
    if let Value::Object(fields) = object {
        out.extend(fields);
    }
    Ok(Value::Object(out))
}

fn malformed(e: prost::DecodeError) -> ApiError {
    ApiError::bad_request(format!("unable to decode the protobuf body: {e}"))
}

/// Builds a JSON object with Go's omission rules, one helper per kind of Go field.
struct Obj(Map<String, Value>);

impl Obj {
    fn new() -> Self {
        Obj(Map::new())
    }

    fn done(self) -> Value {
        Value::Object(self.0)
    }

    fn put(mut self, key: &str, v: Value) -> Self {
        self.0.insert(key.to_string(), v);
        self
    }

    /// A string field; empty means unset (both `omitempty` strings and nil `*string` arrive as "" or absent).
    fn str(self, key: &str, v: &Option<String>) -> Self {
        match v.as_deref() {
            Some(s) if !s.is_empty() => self.put(key, json!(s)),
            _ => self,
        }
    }

    /// A pointer number (`*int32`): present means set, zero included.
    fn int<T: Into<i64> + Copy>(self, key: &str, v: &Option<T>) -> Self {
        match v {
            Some(n) => self.put(key, json!((*n).into())),
            None => self,
        }
    }

    /// An `omitempty` number: zero is omitted.
    fn int0<T: Into<i64> + Copy>(self, key: &str, v: &Option<T>) -> Self {
        match v.map(Into::into) {
            Some(n) if n != 0 => self.put(key, json!(n)),
            _ => self,
        }
    }

    /// A pointer bool.
    fn bool(self, key: &str, v: &Option<bool>) -> Self {
        match v {
            Some(b) => self.put(key, json!(b)),
            None => self,
        }
    }

    /// An `omitempty` bool: false is omitted.
    fn bool0(self, key: &str, v: &Option<bool>) -> Self {
        if *v == Some(true) { self.put(key, json!(true)) } else { self }
    }

    fn strs(self, key: &str, v: &[String]) -> Self {
        if v.is_empty() { self } else { self.put(key, json!(v)) }
    }

    fn map(self, key: &str, v: &BTreeMap<String, String>) -> Self {
        if v.is_empty() { self } else { self.put(key, json!(v)) }
    }

    /// A nested message: present on the wire means present in JSON (Go always encodes non-pointer structs and
    /// always marshals them, empty ones as `{}`).
    fn msg<M>(self, key: &str, v: &Option<M>, f: impl Fn(&M) -> Value) -> Self {
        match v {
            Some(m) => self.put(key, f(m)),
            None => self,
        }
    }

    fn list<M>(self, key: &str, v: &[M], f: impl Fn(&M) -> Value) -> Self {
        if v.is_empty() { self } else { self.put(key, Value::Array(v.iter().map(f).collect())) }
    }

    fn time(self, key: &str, v: &Option<meta::Time>) -> Self {
        match v.as_ref().and_then(time) {
            Some(t) => self.put(key, t),
            None => self,
        }
    }

    fn quantities(self, key: &str, v: &BTreeMap<String, Quantity>) -> Self {
        if v.is_empty() {
            return self;
        }
        let m: Map<String, Value> = v.iter().map(|(k, q)| (k.clone(), quantity(q))).collect();
        self.put(key, Value::Object(m))
    }

    fn bytes_map(self, key: &str, v: &BTreeMap<String, Vec<u8>>) -> Self {
        if v.is_empty() {
            return self;
        }
        let m: Map<String, Value> = v.iter().map(|(k, b)| (k.clone(), json!(base64(b)))).collect();
        self.put(key, Value::Object(m))
    }
}

/// metav1.Time: RFC 3339 to the second; the zero time (Go's `null`) is omitted.
fn time(t: &meta::Time) -> Option<Value> {
    let seconds = t.seconds.filter(|s| *s != 0)?;
    let ts = jiff::Timestamp::from_second(seconds).ok()?;
    Some(json!(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

fn int_or_string(v: &IntOrString) -> Value {
    if v.r#type == Some(1) { json!(v.str_val.clone().unwrap_or_default()) } else { json!(v.int_val.unwrap_or(0)) }
}

fn quantity(q: &Quantity) -> Value {
    json!(q.string.clone().unwrap_or_default())
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn object_meta(m: &meta::ObjectMeta) -> Value {
    Obj::new()
        .str("name", &m.name)
        .str("generateName", &m.generate_name)
        .str("namespace", &m.namespace)
        .str("selfLink", &m.self_link)
        .str("uid", &m.uid)
        .str("resourceVersion", &m.resource_version)
        .int0("generation", &m.generation)
        .time("creationTimestamp", &m.creation_timestamp)
        .time("deletionTimestamp", &m.deletion_timestamp)
        .int("deletionGracePeriodSeconds", &m.deletion_grace_period_seconds)
        .map("labels", &m.labels)
        .map("annotations", &m.annotations)
        .list("ownerReferences", &m.owner_references, |o| {
            Obj::new()
                .str("apiVersion", &o.api_version)
                .str("kind", &o.kind)
                .str("name", &o.name)
                .str("uid", &o.uid)
                .bool("controller", &o.controller)
                .bool("blockOwnerDeletion", &o.block_owner_deletion)
                .done()
        })
        .strs("finalizers", &m.finalizers)
        .list("managedFields", &m.managed_fields, |f| {
            Obj::new()
                .str("manager", &f.manager)
                .str("operation", &f.operation)
                .str("apiVersion", &f.api_version)
                .time("time", &f.time)
                .str("fieldsType", &f.fields_type)
                .msg("fieldsV1", &f.fields_v1, |v| {
                    v.raw.as_deref().and_then(|raw| serde_json::from_slice(raw).ok()).unwrap_or_else(|| json!({}))
                })
                .str("subresource", &f.subresource)
                .done()
        })
        .done()
}

fn label_selector(s: &meta::LabelSelector) -> Value {
    Obj::new()
        .map("matchLabels", &s.match_labels)
        .list("matchExpressions", &s.match_expressions, |r| {
            Obj::new().str("key", &r.key).str("operator", &r.operator).strs("values", &r.values).done()
        })
        .done()
}

fn namespace(ns: &core::Namespace) -> Value {
    Obj::new()
        .msg("metadata", &ns.metadata, object_meta)
        .msg("spec", &ns.spec, |s| Obj::new().strs("finalizers", &s.finalizers).done())
        .msg("status", &ns.status, |s| {
            Obj::new()
                .str("phase", &s.phase)
                .list("conditions", &s.conditions, |c| {
                    Obj::new()
                        .str("type", &c.r#type)
                        .str("status", &c.status)
                        .time("lastTransitionTime", &c.last_transition_time)
                        .str("reason", &c.reason)
                        .str("message", &c.message)
                        .done()
                })
                .done()
        })
        .done()
}

fn config_map(cm: &core::ConfigMap) -> Value {
    Obj::new()
        .msg("metadata", &cm.metadata, object_meta)
        .bool("immutable", &cm.immutable)
        .map("data", &cm.data)
        .bytes_map("binaryData", &cm.binary_data)
        .done()
}

fn secret(s: &core::Secret) -> Value {
    Obj::new()
        .msg("metadata", &s.metadata, object_meta)
        .bool("immutable", &s.immutable)
        .bytes_map("data", &s.data)
        .map("stringData", &s.string_data)
        .str("type", &s.r#type)
        .done()
}

fn local_ref(r: &core::LocalObjectReference) -> Value {
    Obj::new().str("name", &r.name).done()
}

fn service_account(sa: &core::ServiceAccount) -> Value {
    Obj::new()
        .msg("metadata", &sa.metadata, object_meta)
        .list("secrets", &sa.secrets, |r| {
            Obj::new()
                .str("kind", &r.kind)
                .str("namespace", &r.namespace)
                .str("name", &r.name)
                .str("uid", &r.uid)
                .str("apiVersion", &r.api_version)
                .str("resourceVersion", &r.resource_version)
                .str("fieldPath", &r.field_path)
                .done()
        })
        .list("imagePullSecrets", &sa.image_pull_secrets, local_ref)
        .bool("automountServiceAccountToken", &sa.automount_service_account_token)
        .done()
}

fn service(svc: &core::Service) -> Value {
    Obj::new()
        .msg("metadata", &svc.metadata, object_meta)
        .msg("spec", &svc.spec, |s| {
            Obj::new()
                .list("ports", &s.ports, |p| {
                    Obj::new()
                        .str("name", &p.name)
                        .str("protocol", &p.protocol)
                        .str("appProtocol", &p.app_protocol)
                        .int("port", &p.port)
                        .msg("targetPort", &p.target_port, int_or_string)
                        .int0("nodePort", &p.node_port)
                        .done()
                })
                .map("selector", &s.selector)
                .str("clusterIP", &s.cluster_ip)
                .strs("clusterIPs", &s.cluster_ips)
                .str("type", &s.r#type)
                .strs("externalIPs", &s.external_ips)
                .str("sessionAffinity", &s.session_affinity)
                .str("loadBalancerIP", &s.load_balancer_ip)
                .strs("loadBalancerSourceRanges", &s.load_balancer_source_ranges)
                .str("externalName", &s.external_name)
                .str("externalTrafficPolicy", &s.external_traffic_policy)
                .int0("healthCheckNodePort", &s.health_check_node_port)
                .bool0("publishNotReadyAddresses", &s.publish_not_ready_addresses)
                .strs("ipFamilies", &s.ip_families)
                .str("ipFamilyPolicy", &s.ip_family_policy)
                .bool("allocateLoadBalancerNodePorts", &s.allocate_load_balancer_node_ports)
                .str("loadBalancerClass", &s.load_balancer_class)
                .str("internalTrafficPolicy", &s.internal_traffic_policy)
                .str("trafficDistribution", &s.traffic_distribution)
                .done()
        })
        .msg("status", &svc.status, |s| Obj::new().msg("loadBalancer", &s.load_balancer, |_| json!({})).done())
        .done()
}

fn deployment(d: &apps::Deployment) -> Value {
    Obj::new()
        .msg("metadata", &d.metadata, object_meta)
        .msg("spec", &d.spec, |s| {
            Obj::new()
                .int("replicas", &s.replicas)
                .msg("selector", &s.selector, label_selector)
                .msg("template", &s.template, pod_template)
                .msg("strategy", &s.strategy, |st| {
                    Obj::new()
                        .str("type", &st.r#type)
                        .msg("rollingUpdate", &st.rolling_update, |r| {
                            Obj::new()
                                .msg("maxUnavailable", &r.max_unavailable, int_or_string)
                                .msg("maxSurge", &r.max_surge, int_or_string)
                                .done()
                        })
                        .done()
                })
                .int0("minReadySeconds", &s.min_ready_seconds)
                .int("revisionHistoryLimit", &s.revision_history_limit)
                .bool0("paused", &s.paused)
                .int("progressDeadlineSeconds", &s.progress_deadline_seconds)
                .done()
        })
        .msg("status", &d.status, |s| {
            Obj::new()
                .int0("observedGeneration", &s.observed_generation)
                .int0("replicas", &s.replicas)
                .int0("updatedReplicas", &s.updated_replicas)
                .int0("readyReplicas", &s.ready_replicas)
                .int0("availableReplicas", &s.available_replicas)
                .int0("unavailableReplicas", &s.unavailable_replicas)
                .int("terminatingReplicas", &s.terminating_replicas)
                .list("conditions", &s.conditions, |c| {
                    Obj::new()
                        .str("type", &c.r#type)
                        .str("status", &c.status)
                        .time("lastUpdateTime", &c.last_update_time)
                        .time("lastTransitionTime", &c.last_transition_time)
                        .str("reason", &c.reason)
                        .str("message", &c.message)
                        .done()
                })
                .int("collisionCount", &s.collision_count)
                .done()
        })
        .done()
}

fn policy_rule(r: &rbac::PolicyRule) -> Value {
    Obj::new()
        .strs("verbs", &r.verbs)
        .strs("apiGroups", &r.api_groups)
        .strs("resources", &r.resources)
        .strs("resourceNames", &r.resource_names)
        .strs("nonResourceURLs", &r.non_resource_ur_ls)
        .done()
}

fn role_binding(
    metadata: &Option<meta::ObjectMeta>,
    subjects: &[rbac::Subject],
    role_ref: &Option<rbac::RoleRef>,
) -> Value {
    Obj::new()
        .msg("metadata", metadata, object_meta)
        .list("subjects", subjects, |s| {
            Obj::new()
                .str("kind", &s.kind)
                .str("apiGroup", &s.api_group)
                .str("name", &s.name)
                .str("namespace", &s.namespace)
                .done()
        })
        .msg("roleRef", role_ref, |r| {
            Obj::new().str("apiGroup", &r.api_group).str("kind", &r.kind).str("name", &r.name).done()
        })
        .done()
}

fn self_subject_access_review(r: &authz::SelfSubjectAccessReview) -> Value {
    let selector_requirement = |q: &meta::FieldSelectorRequirement| {
        Obj::new().str("key", &q.key).str("operator", &q.operator).strs("values", &q.values).done()
    };
    Obj::new()
        .msg("metadata", &r.metadata, object_meta)
        .msg("spec", &r.spec, |s| {
            Obj::new()
                .msg("resourceAttributes", &s.resource_attributes, |a| {
                    Obj::new()
                        .str("namespace", &a.namespace)
                        .str("verb", &a.verb)
                        .str("group", &a.group)
                        .str("version", &a.version)
                        .str("resource", &a.resource)
                        .str("subresource", &a.subresource)
                        .str("name", &a.name)
                        .msg("fieldSelector", &a.field_selector, |f| {
                            Obj::new()
                                .str("rawSelector", &f.raw_selector)
                                .list("requirements", &f.requirements, selector_requirement)
                                .done()
                        })
                        .msg("labelSelector", &a.label_selector, |l| {
                            Obj::new()
                                .str("rawSelector", &l.raw_selector)
                                .list("requirements", &l.requirements, |q| {
                                    Obj::new()
                                        .str("key", &q.key)
                                        .str("operator", &q.operator)
                                        .strs("values", &q.values)
                                        .done()
                                })
                                .done()
                        })
                        .done()
                })
                .msg("nonResourceAttributes", &s.non_resource_attributes, |n| {
                    Obj::new().str("path", &n.path).str("verb", &n.verb).done()
                })
                .done()
        })
        .msg("status", &r.status, |s| {
            Obj::new()
                .put("allowed", json!(s.allowed.unwrap_or(false)))
                .bool0("denied", &s.denied)
                .str("reason", &s.reason)
                .str("evaluationError", &s.evaluation_error)
                .done()
        })
        .done()
}

#[cfg(test)]
mod tests;
