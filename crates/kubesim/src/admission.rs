//! ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1): the CEL admission checks a real kube-apiserver
//! runs on every create and update after the schema validation, with its wording: a denial is
//! `<resource>.<group> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied
//! request: <message>` (HTTP code from the validation's `reason`, Invalid → 422), a `Warn` action a `Warning:`
//! header `Validation failed for ValidatingAdmissionPolicy '<policy>' with binding '<binding>': <message>`.
//! The order of evaluation and the fallbacks follow upstream's dispatcher and validator.
//!
//! Supported: matchConstraints and the binding's matchResources (resourceRules, excludeResourceRules,
//! namespaceSelector, objectSelector), matchConditions, paramKind + paramRef (name, namespace, selector,
//! parameterNotFoundAction), `variables`, validations (expression, message, messageExpression, reason),
//! failurePolicy, validationActions Deny/Warn/Audit (Audit has no audit log to go to here). CEL variables:
//! `object`, `oldObject`, `request`, `params`, `namespaceObject`, `variables`.
//! Not supported: `authorizer`, auditAnnotations, the CEL cost budget, request.userInfo (the emulator does not pass
//! the user down to storage: it is empty), and the Kubernetes CEL libraries [`crate::schema`] also lacks.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use cel::{Context, Program};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, Cause};
use crate::resources::ResourceType;
use crate::schema::cel::{ENV, to_cel};
use crate::selector::LabelSelector;
use crate::store::{ResourceKey, State};

pub const GROUP: &str = "admissionregistration.k8s.io";
pub const POLICIES: &str = "validatingadmissionpolicies";
pub const BINDINGS: &str = "validatingadmissionpolicybindings";

/// What is being admitted.
pub struct Attributes<'a> {
    pub rt: &'a ResourceType,
    /// `status`, `scale`, or empty for the object itself.
    pub subresource: &'a str,
    /// `CREATE` or `UPDATE`.
    pub operation: &'static str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub object: &'a Value,
    pub old_object: Option<&'a Value>,
    pub dry_run: bool,
}

/// One failed validation that a binding turns into a refusal.
struct Denial {
    policy: String,
    binding: String,
    message: String,
    reason: String,
}

/// Compiled CEL programs by source text: policies are re-read on every write, compiling once keeps that cheap.
type Compiled = Result<Arc<Program>, String>;
static PROGRAMS: LazyLock<Mutex<HashMap<String, Compiled>>> = LazyLock::new(Default::default);

fn compile(source: &str) -> Compiled {
    let mut cache = PROGRAMS.lock().unwrap_or_else(|p| p.into_inner());
    cache
        .entry(source.to_string())
        .or_insert_with(|| {
            let program = ENV.compile(source).map_err(|e| format!("compilation failed: {e}"))?;
            let refs = program.references();
            match crate::schema::cel::UNSUPPORTED_FUNCTIONS.iter().find(|f| refs.has_function(f)) {
                Some(f) => Err(format!("compilation failed: kubesim does not implement the CEL function {f}")),
                None => Ok(Arc::new(program)),
            }
        })
        .clone()
}

/// Evaluates `source` in `ctx`; errors read as upstream's (`expression '…' resulted in error: …`).
fn eval(source: &str, ctx: &Context) -> Result<cel::Value, String> {
    let program = compile(source).map_err(|e| format!("expression '{source}' resulted in error: {e}"))?;
    program.execute(ctx).map_err(|e| format!("expression '{source}' resulted in error: {e}"))
}

fn strs(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

fn listed(list: &[&str], value: &str) -> bool {
    list.iter().any(|x| *x == "*" || *x == value)
}

/// One `NamedRuleWithOperations` against the request (upstream's `rules.Matcher`).
fn rule_matches(rule: &Value, a: &Attributes) -> bool {
    let resources = strs(rule.get("resources"));
    let resource_ok = resources.iter().any(|r| {
        let (res, sub) = r.split_once('/').unwrap_or((r, ""));
        let res_ok = res == "*" || res == a.rt.plural;
        let sub_ok = sub == "*" || sub == a.subresource;
        res_ok && sub_ok
    });
    let scope_ok = match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
        "Cluster" => !a.rt.namespaced,
        "Namespaced" => a.rt.namespaced,
        _ => true,
    };
    let names = strs(rule.get("resourceNames"));
    listed(&strs(rule.get("apiGroups")), &a.rt.group)
        && listed(&strs(rule.get("apiVersions")), &a.rt.version)
        && listed(&strs(rule.get("operations")), a.operation)
        && resource_ok
        && scope_ok
        && (names.is_empty() || names.contains(&a.name))
}

fn selector_matches(selector: Option<&Value>, labels_of: &[&Value]) -> Result<bool, String> {
    let Some(selector) = selector.filter(|s| s.as_object().is_some_and(|m| !m.is_empty())) else { return Ok(true) };
    let selector = LabelSelector::from_label_selector(selector)?;
    Ok(labels_of.iter().any(|o| selector.matches_object(o)))
}

/// `MatchResources` (a policy's matchConstraints or a binding's matchResources) against the request.
/// `rules_required`: a policy matches nothing without resourceRules; a binding without them takes the policy's.
fn resources_match(m: &Value, a: &Attributes, namespace: Option<&Value>, rules_required: bool) -> Result<bool, String> {
    let rules = m.get("resourceRules").and_then(Value::as_array);
    let included = match rules {
        Some(rules) => rules.iter().any(|r| rule_matches(r, a)),
        None => !rules_required,
    };
    if !included {
        return Ok(false);
    }
    let excluded =
        m.get("excludeResourceRules").and_then(Value::as_array).into_iter().flatten().any(|r| rule_matches(r, a));
    if excluded {
        return Ok(false);
    }
    // Cluster-scoped objects pass any namespaceSelector, except Namespaces, which are judged by their own labels.
    let is_namespace = a.rt.group.is_empty() && a.rt.plural == "namespaces";
    let namespace_ok = if is_namespace {
        selector_matches(m.get("namespaceSelector"), &[a.object])?
    } else if a.rt.namespaced {
        match namespace {
            Some(ns) => selector_matches(m.get("namespaceSelector"), &[ns])?,
            None => selector_matches(m.get("namespaceSelector"), &[&json!({})])?,
        }
    } else {
        true
    };
    let mut objects = vec![a.object];
    objects.extend(a.old_object);
    Ok(namespace_ok && selector_matches(m.get("objectSelector"), &objects)?)
}

fn request_value(a: &Attributes) -> Value {
    let kind = json!({"group": a.rt.group, "version": a.rt.version, "kind": a.rt.kind});
    let resource = json!({"group": a.rt.group, "version": a.rt.version, "resource": a.rt.plural});
    json!({
        "uid": uuid::Uuid::new_v4().to_string(),
        "kind": kind,
        "resource": resource,
        "subResource": a.subresource,
        "requestKind": kind,
        "requestResource": resource,
        "name": a.name,
        "namespace": a.namespace,
        "operation": a.operation,
        "userInfo": {"username": "", "groups": []},
        "dryRun": a.dry_run,
        "options": {},
    })
}

/// Resolves a policy's `paramKind` (`apiVersion` + `kind`) to the served type.
pub type ResolveKind<'r> = &'r dyn Fn(&str, &str) -> Option<Arc<ResourceType>>;

/// The parameter objects a binding selects: `Ok(vec![None])` when the policy takes none.
fn params(
    policy: &Value,
    binding: &Value,
    a: &Attributes,
    st: &State,
    resolve: ResolveKind,
) -> Result<Vec<Option<Value>>, String> {
    let Some(kind) = policy.pointer("/spec/paramKind").filter(|k| k.is_object()) else { return Ok(vec![None]) };
    let api_version = kind.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind_name = kind.get("kind").and_then(Value::as_str).unwrap_or_default();
    let Some(param_ref) = binding.pointer("/spec/paramRef").filter(|r| r.is_object()) else {
        return Err(format!(
            "policy {} has paramKind but binding {} has no paramRef",
            policy.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default(),
            binding.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
        ));
    };
    let Some(rt) = resolve(api_version, kind_name) else {
        return Err(format!("failed to find resource referenced by paramKind: '{api_version}, Kind={kind_name}'"));
    };
    // A namespaced parameter without a namespace is looked up in the request's namespace.
    let namespace = match param_ref.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        Some(ns) => ns.to_string(),
        None if rt.namespaced => a.namespace.to_string(),
        None => String::new(),
    };
    if rt.namespaced && namespace.is_empty() {
        return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
    }
    let key = ResourceKey::of(&rt);
    let found: Vec<Value> = match param_ref.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        Some(name) => st.get(&key, &(namespace.clone(), name.to_string())).map(|o| (*o).clone()).into_iter().collect(),
        None => {
            let selector = param_ref.get("selector").cloned().unwrap_or_else(|| json!({}));
            let selector = LabelSelector::from_label_selector(&selector)?;
            let ns = rt.namespaced.then_some(namespace.as_str());
            st.range(&key, ns, None)
                .into_iter()
                .map(|(_, o)| (*o).clone())
                .filter(|o| selector.matches_object(o))
                .collect()
        }
    };
    if !found.is_empty() {
        return Ok(found.into_iter().map(Some).collect());
    }
    match param_ref.get("parameterNotFoundAction").and_then(Value::as_str) {
        Some("Allow") => Ok(Vec::new()),
        _ => Err("no params found for policy binding with `Deny` parameterNotFoundAction".into()),
    }
}

/// What a validation decided.
enum Decision {
    Admit,
    Deny { message: String, reason: String },
}

/// Runs one policy for one binding and one parameter: matchConditions, variables, validations.
fn validate_one(policy: &Value, fail_closed: bool, bindings: &HashMap<&str, cel::Value>) -> Vec<Decision> {
    let spec = policy.get("spec").cloned().unwrap_or(Value::Null);
    let mut ctx = Context::with_env(ENV.clone());
    for (name, value) in bindings {
        ctx.add_variable_from_value(*name, value.clone());
    }
    let on_error =
        |message: String| if fail_closed { Decision::Deny { message, reason: String::new() } } else { Decision::Admit };
    // Variables see the ones before them; one that fails only fails the expressions that use it.
    let mut variables: HashMap<String, cel::Value> = HashMap::new();
    ctx.add_variable_from_value("variables", cel::Value::Map(variables.clone().into()));
    for v in spec.get("variables").and_then(Value::as_array).into_iter().flatten() {
        let (Some(name), Some(expr)) =
            (v.get("name").and_then(Value::as_str), v.get("expression").and_then(Value::as_str))
        else {
            continue;
        };
        if let Ok(value) = eval(expr, &ctx) {
            variables.insert(name.to_string(), value);
            ctx.add_variable_from_value("variables", cel::Value::Map(variables.clone().into()));
        }
    }
    for condition in spec.get("matchConditions").and_then(Value::as_array).into_iter().flatten() {
        let expr = condition.get("expression").and_then(Value::as_str).unwrap_or_default();
        match eval(expr, &ctx) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => return Vec::new(),
            Ok(other) => {
                return vec![on_error(format!("matchCondition '{expr}' did not evaluate to a bool: {other:?}"))];
            }
            Err(e) => return vec![on_error(e)],
        }
    }
    let mut out = Vec::new();
    for validation in spec.get("validations").and_then(Value::as_array).into_iter().flatten() {
        let expr = validation.get("expression").and_then(Value::as_str).unwrap_or_default();
        let denied = match eval(expr, &ctx) {
            Ok(cel::Value::Bool(true)) => {
                out.push(Decision::Admit);
                continue;
            }
            Ok(cel::Value::Bool(false)) => true,
            Ok(other) => {
                out.push(on_error(format!("expression '{expr}' resulted in a non-bool value: {other:?}")));
                continue;
            }
            Err(e) => {
                out.push(on_error(e));
                continue;
            }
        };
        debug_assert!(denied);
        // messageExpression, else message, else the expression: each only when non-empty and on one line.
        let from_expression = validation
            .get("messageExpression")
            .and_then(Value::as_str)
            .and_then(|m| match eval(m, &ctx) {
                Ok(cel::Value::String(s)) => Some(s.trim().to_string()),
                _ => None,
            })
            .filter(|m| !m.is_empty() && !m.contains('\n') && m.len() <= 5 * 1024);
        let message = from_expression
            .or_else(|| {
                validation
                    .get("message")
                    .and_then(Value::as_str)
                    .map(|m| m.trim().to_string())
                    .filter(|m| !m.is_empty())
            })
            .unwrap_or_else(|| format!("failed expression: {}", expr.trim()));
        let reason = validation.get("reason").and_then(Value::as_str).unwrap_or_default().to_string();
        out.push(Decision::Deny { message, reason });
    }
    out
}

fn name_of(o: &Value) -> &str {
    o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
}

// Over 80 lines on purpose: The steps of upstream's validating admission (match policies, bindings, params, match
// conditions, validations, audit annotations) in order; the first denial wins, so the order must stay visible.
/// Admits a write: `Ok(warnings)` when every bound policy allows it (or only warns), else the first denial as
/// upstream reports it. Policies and bindings are read from `st`, the store the write is about to change.
pub fn admit(st: &State, a: &Attributes, resolve: ResolveKind) -> ApiResult<Vec<String>> {
    // Policies never judge their own kinds: a broken policy must stay fixable.
    if a.rt.group == GROUP {
        return Ok(Vec::new());
    }
    let policies = st.range(&ResourceKey { group: GROUP.into(), plural: POLICIES.into() }, None, None);
    if policies.is_empty() {
        return Ok(Vec::new());
    }
    let bindings = st.range(&ResourceKey { group: GROUP.into(), plural: BINDINGS.into() }, None, None);
    let namespace = (!a.namespace.is_empty())
        .then(|| {
            st.get(
                &ResourceKey { group: String::new(), plural: "namespaces".into() },
                &(String::new(), a.namespace.to_string()),
            )
        })
        .flatten();
    let mut warnings = Vec::new();
    let mut denials: Vec<Denial> = Vec::new();
    for (_, policy) in &policies {
        let policy_name = name_of(policy);
        let fail_closed = policy.pointer("/spec/failurePolicy").and_then(Value::as_str) != Some("Ignore");
        let constraints = policy.pointer("/spec/matchConstraints").cloned().unwrap_or(Value::Null);
        match resources_match(&constraints, a, namespace.as_deref(), true) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) if fail_closed => {
                denials.push(Denial {
                    policy: policy_name.into(),
                    binding: String::new(),
                    message: e,
                    reason: String::new(),
                });
                continue;
            }
            Err(_) => continue,
        }
        for (_, binding) in
            bindings.iter().filter(|(_, b)| b.pointer("/spec/policyName").and_then(Value::as_str) == Some(policy_name))
        {
            let binding_name = name_of(binding).to_string();
            let deny_config = |message: String, denials: &mut Vec<Denial>| {
                if fail_closed {
                    denials.push(Denial {
                        policy: policy_name.into(),
                        binding: binding_name.clone(),
                        message,
                        reason: String::new(),
                    });
                }
            };
            if let Some(m) = binding.pointer("/spec/matchResources").filter(|m| m.is_object()) {
                match resources_match(m, a, namespace.as_deref(), false) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        deny_config(e, &mut denials);
                        continue;
                    }
                }
            }
            let params = match params(policy, binding, a, st, resolve) {
                Ok(p) => p,
                Err(e) => {
                    deny_config(e, &mut denials);
                    continue;
                }
            };
            let actions = strs(binding.pointer("/spec/validationActions"));
            for param in params {
                let mut vars: HashMap<&str, cel::Value> = HashMap::new();
                vars.insert("object", to_cel(a.object));
                vars.insert("oldObject", a.old_object.map_or(cel::Value::Null, to_cel));
                vars.insert("request", to_cel(&request_value(a)));
                vars.insert("params", param.as_ref().map_or(cel::Value::Null, to_cel));
                vars.insert("namespaceObject", namespace.as_deref().map_or(cel::Value::Null, to_cel));
                for decision in validate_one(policy, fail_closed, &vars) {
                    let Decision::Deny { message, reason } = decision else { continue };
                    for action in &actions {
                        match *action {
                            "Deny" => denials.push(Denial {
                                policy: policy_name.into(),
                                binding: binding_name.clone(),
                                message: message.clone(),
                                reason: reason.clone(),
                            }),
                            "Warn" => warnings.push(format!(
                                "Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}': {message}"
                            )),
                            // Audit annotations go to the audit log, which the emulator does not keep.
                            _ => {}
                        }
                    }
                }
            }
        }
    }
    match denials.into_iter().next() {
        None => Ok(warnings),
        Some(d) => Err(denied(a, d)),
    }
}

/// Upstream's `admission.NewForbidden` with the status reason and code of the validation's `reason`.
fn denied(a: &Attributes, d: Denial) -> ApiError {
    let why = if d.binding.is_empty() {
        format!("ValidatingAdmissionPolicy '{}' denied request: {}", d.policy, d.message)
    } else {
        format!("ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}", d.policy, d.binding, d.message)
    };
    let mut e = ApiError::forbidden_object(&a.rt.plural, &a.rt.group, a.name, &why);
    let reason = if d.reason.is_empty() { "Invalid".to_string() } else { d.reason };
    e.code = match reason.as_str() {
        "Unauthorized" => 401,
        "Forbidden" => 403,
        "RequestEntityTooLarge" => 413,
        "Invalid" => 422,
        _ => 500,
    };
    e.reason = reason;
    e.details.causes.push(Cause::new("", why, ""));
    e
}
