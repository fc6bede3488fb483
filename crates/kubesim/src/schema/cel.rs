//! `x-kubernetes-validations`: CEL rules evaluated with the `cel` crate (cel-rust), `self` bound to the value
//! of the node that declares the rule and `oldSelf` to the correlated old value on updates.
//!
//! Supported: the CEL standard library and macros (`has`, `all`, `exists`, `exists_one`, `map`, `filter`),
//! `matches`, the strings, lists and math extensions, `message`, `messageExpression`, `reason`, `fieldPath`,
//! transition rules (only evaluated when an old value correlates: same property path, or the same keys of an
//! `x-kubernetes-list-type: map` list).
//!
//! Not supported (rules using them are skipped, see [`super::CompiledSchema::unsupported_rules`]): the
//! Kubernetes CEL libraries (`quantity`, `url`, `ip`, `cidr`, `isSorted`, `sum`, `semver`, `format.*`,
//! `authorizer`), `duration`/`timestamp` (built without chrono), `optionalOldSelf` on create, and cost limits.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use cel::{Context, Env, Program};
use serde_json::Value;

use crate::error::Cause;
use crate::names::err;

pub(crate) static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    // The extensions only fail on duplicate declarations, which a fresh stdlib env cannot have; a failed
    // extension merely leaves its functions undeclared.
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_extension(cel::extensions::lists);
    let _ = env.add_extension(cel::extensions::math);
    Arc::new(env)
});

/// Functions of the Kubernetes CEL libraries (or needing chrono) that this build lacks.
pub(crate) const UNSUPPORTED_FUNCTIONS: &[&str] = &[
    "quantity",
    "isQuantity",
    "url",
    "isURL",
    "ip",
    "isIP",
    "cidr",
    "isCIDR",
    "isSorted",
    "sum",
    "semver",
    "isSemver",
    "authorizer",
    "duration",
    "timestamp",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getFullYear",
    "getMonth",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getMilliseconds",
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
    "validate",
];

#[derive(Debug, Clone)]
pub(super) struct Rule {
    pub text: String,
    message: Option<String>,
    message_expression: Option<Arc<Program>>,
    reason: Option<String>,
    field_path: Option<String>,
    transition: bool,
    /// None: not evaluated (uses something unsupported).
    program: Option<Arc<Program>>,
}

impl Rule {
    pub fn supported(&self) -> bool {
        self.program.is_some()
    }
}

/// Compiles the `x-kubernetes-validations` of one schema node; `path` is the node's schema path.
pub(super) fn compile_rules(v: &Value, path: &str, errs: &mut Vec<Cause>) -> Vec<Rule> {
    let mut out = Vec::new();
    for (i, r) in v.get("x-kubernetes-validations").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let Some(text) = r.get("rule").and_then(Value::as_str) else {
            errs.push(err::required(&format!("{path}.x-kubernetes-validations[{i}].rule"), ""));
            continue;
        };
        let program = match ENV.compile(text) {
            Ok(p) => p,
            Err(e) => {
                errs.push(err::invalid_str(
                    &format!("{path}.x-kubernetes-validations[{i}].rule"),
                    text,
                    &format!("compilation failed: {e}"),
                ));
                continue;
            }
        };
        let refs = program.references();
        let supported = !UNSUPPORTED_FUNCTIONS.iter().any(|f| refs.has_function(f));
        let transition = refs.has_variable("oldSelf");
        let message_expression = match r.get("messageExpression").and_then(Value::as_str) {
            Some(src) => match ENV.compile(src) {
                Ok(p) => Some(Arc::new(p)),
                Err(e) => {
                    errs.push(err::invalid_str(
                        &format!("{path}.x-kubernetes-validations[{i}].messageExpression"),
                        src,
                        &format!("messageExpression compilation failed: {e}"),
                    ));
                    None
                }
            },
            None => None,
        };
        out.push(Rule {
            text: text.to_string(),
            message: r.get("message").and_then(Value::as_str).filter(|m| !m.is_empty()).map(str::to_string),
            message_expression,
            reason: r.get("reason").and_then(Value::as_str).map(str::to_string),
            field_path: r.get("fieldPath").and_then(Value::as_str).filter(|p| !p.is_empty()).map(str::to_string),
            transition,
            program: supported.then(|| Arc::new(program)),
        });
    }
    out
}

/// JSON → CEL with JSON's integers as CEL `int` (as Kubernetes binds them), not `uint`.
pub(crate) fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(a) => cel::Value::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<String, cel::Value> = m.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            cel::Value::Map(map.into())
        }
    }
}

fn join_field_path(path: &str, field_path: &str) -> String {
    let rel = field_path.trim_start_matches('.').replace("['", ".").replace("']", "");
    if path.is_empty() { rel } else { format!("{path}.{rel}") }
}

/// Evaluates the rules of one node. `ty` is the node's schema type, printed as the "value" upstream reports.
pub(super) fn evaluate(rules: &[Rule], v: &Value, old: Option<&Value>, ty: &str, path: &str, out: &mut Vec<Cause>) {
    if rules.is_empty() {
        return;
    }
    let this = to_cel(v);
    let old_cel = old.map(to_cel);
    for rule in rules {
        let Some(program) = &rule.program else { continue };
        if rule.transition && old_cel.is_none() {
            continue;
        }
        let mut ctx = Context::with_env(ENV.clone());
        ctx.add_variable_from_value("self", this.clone());
        if let Some(o) = &old_cel {
            ctx.add_variable_from_value("oldSelf", o.clone());
        }
        let detail = match program.execute(&ctx) {
            Ok(cel::Value::Bool(true)) => continue,
            Ok(cel::Value::Bool(false)) => message(rule, &ctx),
            Ok(other) => format!("rule did not evaluate to a bool: {other:?}"),
            Err(e) => format!("{}: {e}", message(rule, &ctx)),
        };
        let field = rule.field_path.as_deref().map_or_else(|| path.to_string(), |f| join_field_path(path, f));
        let cause = match rule.reason.as_deref() {
            Some("FieldValueForbidden") => err::forbidden(&field, &detail),
            Some("FieldValueRequired") => err::required(&field, &detail),
            Some("FieldValueDuplicate") => err::duplicate(&field, &Value::String(ty.to_string())),
            // kube-apiserver 1.37 prints the failing node's value when it is a scalar and leaves it out for an
            // object (recorded; lists are assumed to follow objects).
            _ => match v {
                Value::Object(_) | Value::Array(_) => {
                    Cause::new("FieldValueInvalid", format!("Invalid value: {detail}"), field)
                }
                scalar => err::invalid_value(&field, scalar, &detail),
            },
        };
        out.push(cause);
    }
}

fn message(rule: &Rule, ctx: &Context) -> String {
    if let Some(expr) = &rule.message_expression
        && let Ok(cel::Value::String(s)) = expr.execute(ctx)
        && !s.trim().is_empty()
    {
        return s.to_string();
    }
    rule.message.clone().unwrap_or_else(|| format!("failed rule: {}", rule.text))
}

#[cfg(test)]
mod tests {
    use super::super::CompiledSchema;
    use serde_json::json;

    fn schema() -> CompiledSchema {
        CompiledSchema::compile(&json!({
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('ms-')", "message": "name must start with ms-"}],
            "properties": {"spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.minReplicas <= self.maxReplicas", "message": "minReplicas must not exceed maxReplicas"},
                    {"rule": "!has(self.image) || self.image.matches('^[a-z0-9./:-]+$')",
                     "messageExpression": "'bad image: ' + self.image", "fieldPath": ".image"},
                    {"rule": "self.mode == oldSelf.mode", "message": "mode is immutable", "reason": "FieldValueForbidden"},
                    {"rule": "quantity(self.memory).isGreaterThan(quantity('1Mi'))"}
                ],
                "properties": {
                    "minReplicas": {"type": "integer"},
                    "maxReplicas": {"type": "integer"},
                    "image": {"type": "string"},
                    "mode": {"type": "string"},
                    "memory": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"},
                             "x-kubernetes-validations": [{"rule": "self.all(t, size(t) <= 5)"}]}
                }
            }}
        }))
        .unwrap()
    }

    fn messages(causes: &[crate::error::Cause]) -> Vec<String> {
        causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
    }

    #[test]
    fn passing_rules_report_nothing() {
        let obj = json!({"metadata": {"name": "ms-a"}, "spec": {"minReplicas": 1, "maxReplicas": 3, "image": "nginx:1", "tags": ["a"]}});
        assert_eq!(messages(&schema().validate(&obj)), Vec::<String>::new());
    }

    #[test]
    fn failing_rules_read_like_upstream() {
        let obj = json!({"metadata": {"name": "x"}, "spec": {"minReplicas": 5, "maxReplicas": 3, "image": "UPPER", "tags": ["toolong"]}});
        assert_eq!(
            messages(&schema().validate(&obj)),
            // A node's rules before its children's, as upstream's validator walks the schema.
            [
                ": Invalid value: name must start with ms-",
                "spec: Invalid value: minReplicas must not exceed maxReplicas",
                "spec.image: Invalid value: bad image: UPPER",
                "spec.tags: Invalid value: failed rule: self.all(t, size(t) <= 5)",
            ]
        );
    }

    #[test]
    fn transition_rules_need_an_old_value() {
        let old = json!({"metadata": {"name": "ms-a"}, "spec": {"minReplicas": 1, "maxReplicas": 1, "mode": "a"}});
        let new = json!({"metadata": {"name": "ms-a"}, "spec": {"minReplicas": 1, "maxReplicas": 1, "mode": "b"}});
        assert!(schema().validate(&new).is_empty(), "not evaluated on create");
        let c = schema().validate_update(&new, Some(&old));
        assert_eq!(messages(&c), ["spec: Forbidden: mode is immutable"]);
        assert_eq!(c[0].reason, "FieldValueForbidden");
    }

    #[test]
    fn kubernetes_library_rules_are_reported_unsupported() {
        assert_eq!(schema().unsupported_rules(), ["quantity(self.memory).isGreaterThan(quantity('1Mi'))"]);
    }

    #[test]
    fn rules_that_do_not_compile_fail_the_schema() {
        let e =
            CompiledSchema::compile(&json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.a ==="}]}))
                .unwrap_err();
        assert_eq!(e[0].field, "openAPIV3Schema.x-kubernetes-validations[0].rule");
        assert!(e[0].message.contains("compilation failed"), "{}", e[0].message);
    }
}
