//! Structural schemas of CustomResourceDefinitions: compiled once per CRD version, then used to prune unknown
//! fields, apply defaults and validate custom resources the way apiextensions-apiserver does (kube-openapi's
//! validator, `structuraldefaulting`, `structuralpruning`, list-type checks), with its paths and messages.
//!
//! `x-kubernetes-validations` (CEL) rules are evaluated by the [`cel`] module; what it cannot evaluate is
//! listed by [`CompiledSchema::unsupported_rules`] so the caller can say so (a warning).

pub(crate) mod cel;

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::{Map, Value};

use crate::error::Cause;
use crate::names::{self, err, go_repr};

mod crd;
pub use crd::validate_crd;

/// What `additionalProperties` says.
#[derive(Debug, Clone)]
enum Additional {
    /// Absent: unknown fields are pruned (unless preserved).
    Absent,
    /// `additionalProperties: false`.
    False,
    /// `additionalProperties: true` or a schema: any key, each validated against the schema when given.
    Schema(Option<Box<Node>>),
}

/// One compiled schema node.
#[derive(Debug, Clone)]
struct Node {
    ty: Option<String>,
    nullable: bool,
    int_or_string: bool,
    preserve_unknown: bool,
    embedded: bool,
    properties: BTreeMap<String, Node>,
    additional: Additional,
    items: Option<Box<Node>>,
    required: Vec<String>,
    enumeration: Vec<Value>,
    pattern: Option<(String, Regex)>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: bool,
    exclusive_maximum: bool,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    unique_items: bool,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    format: Option<String>,
    default: Option<Value>,
    list_type: Option<String>,
    list_map_keys: Vec<String>,
    /// allOf/anyOf/oneOf/not: value validations only (structural schemas allow no types or defaults there).
    all_of: Vec<Node>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
    not: Option<Box<Node>>,
    /// `x-kubernetes-validations`.
    rules: Vec<cel::Rule>,
}

/// A compiled `openAPIV3Schema`.
#[derive(Debug, Clone)]
pub struct CompiledSchema {
    root: Node,
}

/// The fields of ObjectMeta, the only ones kept under `metadata` of a custom resource or embedded resource.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

const TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

fn child(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn uint(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

fn flag(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

impl Node {
    // Over 80 lines on purpose: One arm per schema keyword compiled into the node, with the error paths upstream gives;
    // a table of keywords.
    /// Compiles `v`; `path` is the schema path used in errors (`...openAPIV3Schema.properties[spec]`).
    fn compile(v: &Value, path: &str, errs: &mut Vec<Cause>) -> Node {
        let ty = v.get("type").and_then(Value::as_str).map(str::to_string);
        if let Some(t) = &ty
            && !TYPES.contains(&t.as_str())
        {
            errs.push(err::not_supported(&format!("{path}.type"), &Value::String(t.clone()), TYPES));
        }
        let mut properties = BTreeMap::new();
        if let Some(props) = v.get("properties").and_then(Value::as_object) {
            for (k, p) in props {
                properties.insert(k.clone(), Node::compile(p, &format!("{path}.properties[{k}]"), errs));
            }
        }
        let additional = match v.get("additionalProperties") {
            None | Some(Value::Null) => Additional::Absent,
            Some(Value::Bool(false)) => Additional::False,
            Some(Value::Bool(true)) => Additional::Schema(None),
            Some(s) => {
                Additional::Schema(Some(Box::new(Node::compile(s, &format!("{path}.additionalProperties"), errs))))
            }
        };
        let items = v
            .get("items")
            .filter(|i| i.is_object())
            .map(|i| Box::new(Node::compile(i, &format!("{path}.items"), errs)));
        let pattern = v.get("pattern").and_then(Value::as_str).and_then(|p| match Regex::new(p) {
            Ok(re) => Some((p.to_string(), re)),
            Err(e) => {
                errs.push(err::invalid_str(
                    &format!("{path}.pattern"),
                    p,
                    &format!("must be a valid regular expression, but isn't: {e}"),
                ));
                None
            }
        });
        let list = |key: &str, sub: &str, errs: &mut Vec<Cause>| -> Vec<Node> {
            v.get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter().enumerate().map(|(i, s)| Node::compile(s, &format!("{path}.{sub}[{i}]"), errs)).collect()
                })
                .unwrap_or_default()
        };
        let all_of = list("allOf", "allOf", errs);
        let any_of = list("anyOf", "anyOf", errs);
        let one_of = list("oneOf", "oneOf", errs);
        let not =
            v.get("not").filter(|n| n.is_object()).map(|n| Box::new(Node::compile(n, &format!("{path}.not"), errs)));
        // Draft-4 style (bool) and OpenAPI 3.1 style (number) exclusive bounds.
        let (mut minimum, mut maximum) = (num(v, "minimum"), num(v, "maximum"));
        let mut exclusive_minimum = flag(v, "exclusiveMinimum");
        let mut exclusive_maximum = flag(v, "exclusiveMaximum");
        if let Some(n) = num(v, "exclusiveMinimum") {
            minimum = Some(n);
            exclusive_minimum = true;
        }
        if let Some(n) = num(v, "exclusiveMaximum") {
            maximum = Some(n);
            exclusive_maximum = true;
        }
        let rules = cel::compile_rules(v, path, errs);
        Node {
            ty,
            nullable: flag(v, "nullable"),
            int_or_string: flag(v, "x-kubernetes-int-or-string"),
            preserve_unknown: flag(v, "x-kubernetes-preserve-unknown-fields"),
            embedded: flag(v, "x-kubernetes-embedded-resource"),
            properties,
            additional,
            items,
            required: v
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default(),
            enumeration: v.get("enum").and_then(Value::as_array).cloned().unwrap_or_default(),
            pattern,
            minimum,
            maximum,
            exclusive_minimum,
            exclusive_maximum,
            multiple_of: num(v, "multipleOf"),
            min_length: uint(v, "minLength"),
            max_length: uint(v, "maxLength"),
            min_items: uint(v, "minItems"),
            max_items: uint(v, "maxItems"),
            unique_items: flag(v, "uniqueItems"),
            min_properties: uint(v, "minProperties"),
            max_properties: uint(v, "maxProperties"),
            format: v.get("format").and_then(Value::as_str).map(str::to_string),
            default: v.get("default").cloned(),
            list_type: v.get("x-kubernetes-list-type").and_then(Value::as_str).map(str::to_string),
            list_map_keys: v
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default(),
            all_of,
            any_of,
            one_of,
            not,
            rules,
        }
    }

    /// The schema for a key of an object value, if the key is known.
    fn property(&self, key: &str) -> Option<&Node> {
        self.properties.get(key).or(match &self.additional {
            Additional::Schema(Some(s)) => Some(s),
            _ => None,
        })
    }

    fn keeps_unknown(&self) -> bool {
        self.preserve_unknown || matches!(self.additional, Additional::Schema(_))
    }
}

impl CompiledSchema {
    /// Compiles a CRD version's `openAPIV3Schema`. Errors carry paths relative to the schema
    /// (`openAPIV3Schema.properties[spec].pattern`).
    pub fn compile(schema: &Value) -> Result<CompiledSchema, Vec<Cause>> {
        Self::compile_at(schema, "openAPIV3Schema")
    }

    /// As [`compile`](Self::compile), with error paths under `path`.
    pub fn compile_at(schema: &Value, path: &str) -> Result<CompiledSchema, Vec<Cause>> {
        let mut errs = Vec::new();
        let root = Node::compile(schema, path, &mut errs);
        if errs.is_empty() { Ok(CompiledSchema { root }) } else { Err(errs) }
    }

    /// A schema that keeps and accepts everything (a CRD version without a schema).
    pub fn permissive() -> CompiledSchema {
        let mut errs = Vec::new();
        CompiledSchema {
            root: Node::compile(
                &serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
                "",
                &mut errs,
            ),
        }
    }

    /// The CEL rules of the schema that this emulator does not evaluate (see the [`cel`] module).
    pub fn unsupported_rules(&self) -> Vec<String> {
        fn walk(n: &Node, out: &mut Vec<String>) {
            out.extend(n.rules.iter().filter(|r| !r.supported()).map(|r| r.text.clone()));
            n.properties.values().for_each(|p| walk(p, out));
            if let Some(i) = &n.items {
                walk(i, out);
            }
            if let Additional::Schema(Some(s)) = &n.additional {
                walk(s, out);
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }

    /// Removes fields the schema does not know (except under `x-kubernetes-preserve-unknown-fields`), and
    /// returns their paths (`spec.foo`, `spec.items[0].bar`, `metadata.foo`). `apiVersion`, `kind` and
    /// `metadata` are always kept at the root and in embedded resources; `metadata` is pruned to ObjectMeta.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        prune_node(obj, &self.root, "", true, &mut pruned);
        pruned
    }

    /// Applies `default`s: a missing field (or a null one that is not nullable) whose parent exists gets its
    /// default, and the defaults inside that default apply too.
    pub fn apply_defaults(&self, obj: &mut Value) {
        default_node(obj, &self.root);
    }

    /// Validates a custom resource being created. `metadata`, `apiVersion` and `kind` at the root are left to
    /// ObjectMeta validation. Errors carry upstream's paths and messages.
    pub fn validate(&self, obj: &Value) -> Vec<Cause> {
        self.validate_update(obj, None)
    }

    /// As [`validate`](Self::validate), with the stored object of an update: CEL transition rules
    /// (`oldSelf`) are evaluated where an old value correlates.
    pub fn validate_update(&self, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut out = Vec::new();
        let Some(m) = obj.as_object() else {
            validate_node(obj, old, &self.root, "", &mut out);
            return out;
        };
        self.validate_schema(m, old, &mut out);
        if self.root.has_rules() {
            if out.iter().any(blocks_cel) {
                out.push(Cause::new(
                    "FieldValueInvalid",
                    "Invalid value: null: some validation rules were not checked because the object was invalid; \
                     correct the existing errors to complete validation",
                    "<nil>",
                ));
            } else {
                cel_node(obj, old, &self.root, "", true, &mut out);
            }
        }
        out
    }

    /// The OpenAPI pass: types, formats, bounds, required fields, list types.
    fn validate_schema(&self, m: &Map<String, Value>, old: Option<&Value>, out: &mut Vec<Cause>) {
        for key in &self.root.required {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if !m.contains_key(key) {
                out.push(err::required(key, ""));
            }
        }
        for (k, v) in m {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(s) = self.root.property(k) {
                validate_node(v, old.and_then(|o| o.get(k)), s, k, out);
            }
        }
    }
}

fn prune_meta(meta: &mut Value, path: &str, pruned: &mut Vec<String>) {
    if let Some(m) = meta.as_object_mut() {
        let unknown: Vec<String> = m.keys().filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str())).cloned().collect();
        for k in unknown {
            m.remove(&k);
            pruned.push(child(path, &k));
        }
    }
}

fn prune_node(v: &mut Value, s: &Node, path: &str, resource: bool, pruned: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            let resource = resource || s.embedded;
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if resource && matches!(k.as_str(), "apiVersion" | "kind") {
                    continue;
                }
                if resource && k == "metadata" {
                    if let Some(meta) = m.get_mut("metadata") {
                        prune_meta(meta, &child(path, "metadata"), pruned);
                    }
                    continue;
                }
                let p = child(path, &k);
                match s.property(&k) {
                    Some(sub) => {
                        if let Some(val) = m.get_mut(&k) {
                            prune_node(val, sub, &p, false, pruned);
                        }
                    }
                    None if s.keeps_unknown() => {}
                    None => {
                        m.remove(&k);
                        pruned.push(p);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &s.items {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_node(item, item_schema, &format!("{path}[{i}]"), false, pruned);
                }
            }
        }
        _ => {}
    }
}

fn default_node(v: &mut Value, s: &Node) {
    match v {
        Value::Object(m) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else { continue };
                let missing = match m.get(k) {
                    None => true,
                    Some(Value::Null) => !prop.nullable,
                    _ => false,
                };
                if missing {
                    m.insert(k.clone(), d.clone());
                }
            }
            for (k, val) in m.iter_mut() {
                if let Some(sub) = s.property(k) {
                    default_node(val, sub);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &s.items {
                items.iter_mut().for_each(|i| default_node(i, item_schema));
            }
        }
        _ => {}
    }
}

/// How kube-openapi names a JSON value's type in messages.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() && n.as_f64().is_some_and(|f| f.fract() != 0.0) => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's `%v` of a float64 bound.
fn fmt_num(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 { format!("{}", f as i64) } else { format!("{f}") }
}

fn type_ok(v: &Value, s: &Node) -> bool {
    if s.int_or_string {
        return matches!(type_name(v), "integer" | "string");
    }
    match s.ty.as_deref() {
        None => true,
        Some("integer") => type_name(v) == "integer",
        Some("number") => v.is_number(),
        Some(t) => type_name(v) == t,
    }
}

fn invalid(path: &str, v: &Value, detail: &str) -> Cause {
    err::invalid_value(path, v, &format!("{path} in body {detail}"))
}

/// The `format`s kube-openapi checks that are cheap to check here.
fn format_ok(format: &str, s: &str) -> bool {
    match format {
        "date-time" => s.parse::<jiff::Timestamp>().is_ok(),
        "date" => s.parse::<jiff::civil::Date>().is_ok(),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "uuid" => uuid::Uuid::parse_str(s).is_ok(),
        "byte" => {
            let t = s.trim_end_matches('=');
            t.chars().all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/') && s.len().is_multiple_of(4)
        }
        _ => true,
    }
}

// Over 80 lines on purpose: One pass over a schema node in the order of upstream's validator (type, formats, bounds,
// enums, combinators, properties, items, CEL); the order decides which cause comes first, so it stays in one place.
fn validate_node(v: &Value, old: Option<&Value>, s: &Node, path: &str, out: &mut Vec<Cause>) {
    if v.is_null() && (s.nullable || (s.ty.is_none() && !s.int_or_string && s.preserve_unknown)) {
        return;
    }
    if !type_ok(v, s) {
        let want = if s.int_or_string { "integer,string".to_string() } else { s.ty.clone().unwrap_or_default() };
        let actual = type_name(v);
        out.push(err::type_invalid(
            path,
            &names::quote(actual),
            &format!("{path} in body must be of type {want}: {}", names::quote(actual)),
        ));
        return;
    }
    if !s.enumeration.is_empty() && !s.enumeration.contains(v) {
        let supported: Vec<String> =
            s.enumeration.iter().map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string)).collect();
        let refs: Vec<&str> = supported.iter().map(String::as_str).collect();
        out.push(err::not_supported(path, v, &refs));
    }
    match v {
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            if let Some(m) = s.minimum {
                if s.exclusive_minimum && f <= m {
                    out.push(invalid(path, v, &format!("should be greater than {}", fmt_num(m))));
                } else if !s.exclusive_minimum && f < m {
                    out.push(invalid(path, v, &format!("should be greater than or equal to {}", fmt_num(m))));
                }
            }
            if let Some(m) = s.maximum {
                if s.exclusive_maximum && f >= m {
                    out.push(invalid(path, v, &format!("should be less than {}", fmt_num(m))));
                } else if !s.exclusive_maximum && f > m {
                    out.push(invalid(path, v, &format!("should be less than or equal to {}", fmt_num(m))));
                }
            }
            if let Some(m) = s.multiple_of
                && m != 0.0
                && (f / m).fract() != 0.0
            {
                out.push(invalid(path, v, &format!("should be a multiple of {}", fmt_num(m))));
            }
        }
        Value::String(st) => {
            let len = st.chars().count() as u64;
            if let Some(max) = s.max_length
                && len > max
            {
                out.push(err::too_long(path, max as usize));
            }
            if let Some(min) = s.min_length
                && len < min
            {
                out.push(invalid(path, v, &format!("should be at least {min} chars long")));
            }
            if let Some((src, re)) = &s.pattern
                && !re.is_match(st)
            {
                out.push(invalid(path, v, &format!("should match '{src}'")));
            }
            if let Some(f) = &s.format
                && !format_ok(f, st)
            {
                out.push(invalid(path, v, &format!("must be of type {f}: {}", names::quote(st))));
            }
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(max) = s.max_items
                && n > max
            {
                out.push(err::too_many(path, items.len(), max as usize));
            }
            if let Some(min) = s.min_items
                && n < min
            {
                out.push(invalid(path, v, &format!("should have at least {min} items")));
            }
            if s.unique_items && items.iter().enumerate().any(|(i, x)| items[..i].contains(x)) {
                out.push(invalid(path, v, "shouldn't contain duplicates"));
            }
            if let Some(item_schema) = &s.items {
                let old_items = old.and_then(Value::as_array).filter(|_| s.list_type.as_deref() == Some("map"));
                for (i, item) in items.iter().enumerate() {
                    let old_item = old_items.and_then(|o| o.iter().find(|x| map_key(x, s) == map_key(item, s)));
                    validate_node(item, old_item, item_schema, &format!("{path}[{i}]"), out);
                }
            }
            list_type(items, s, path, out);
        }
        Value::Object(m) => {
            let n = m.len() as u64;
            if let Some(max) = s.max_properties
                && n > max
            {
                out.push(err::too_many(path, m.len(), max as usize));
            }
            if let Some(min) = s.min_properties
                && n < min
            {
                out.push(invalid(path, v, &format!("should have at least {min} properties")));
            }
            for key in &s.required {
                if !m.contains_key(key) {
                    out.push(err::required(&child(path, key), ""));
                }
            }
            if s.embedded {
                for key in ["apiVersion", "kind"] {
                    if m.get(key).and_then(Value::as_str).is_none_or(str::is_empty) {
                        out.push(err::required(&child(path, key), "must not be empty"));
                    }
                }
            }
            for (k, val) in m {
                if s.embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                match s.property(k) {
                    Some(sub) => validate_node(val, old.and_then(|o| o.get(k)), sub, &child(path, k), out),
                    None if matches!(s.additional, Additional::False) => {
                        out.push(err::forbidden(&child(path, k), "additional properties are not allowed"));
                    }
                    None => {}
                }
            }
        }
        _ => {}
    }
    combinators(v, s, path, out);
}

/// The second pass, as upstream's CEL validator walks the structural schema: a node's
/// `x-kubernetes-validations` rules, then its children's. `old` correlates as in [`validate_node`].
fn cel_node(v: &Value, old: Option<&Value>, s: &Node, path: &str, root: bool, out: &mut Vec<Cause>) {
    if v.is_null() {
        return;
    }
    let ty = if s.int_or_string { "" } else { s.ty.as_deref().unwrap_or_default() };
    cel::evaluate(&s.rules, v, old, if root { "object" } else { ty }, path, out);
    match v {
        Value::Array(items) => {
            if let Some(item_schema) = &s.items {
                let old_items = old.and_then(Value::as_array).filter(|_| s.list_type.as_deref() == Some("map"));
                for (i, item) in items.iter().enumerate() {
                    let old_item = old_items.and_then(|o| o.iter().find(|x| map_key(x, s) == map_key(item, s)));
                    cel_node(item, old_item, item_schema, &format!("{path}[{i}]"), false, out);
                }
            }
        }
        Value::Object(m) => {
            for (k, val) in m {
                if (root || s.embedded) && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(sub) = s.property(k) {
                    cel_node(val, old.and_then(|o| o.get(k)), sub, &child(path, k), false, out);
                }
            }
        }
        _ => {}
    }
}

impl Node {
    /// Whether any node has `x-kubernetes-validations` (upstream builds a CEL validator only then).
    fn has_rules(&self) -> bool {
        !self.rules.is_empty()
            || self.properties.values().any(Node::has_rules)
            || self.items.as_ref().is_some_and(|i| i.has_rules())
            || matches!(&self.additional, Additional::Schema(Some(a)) if a.has_rules())
    }
}

/// OpenAPI errors after which upstream does not evaluate the CEL rules (`hasBlockingErr`): the object's shape is
/// not what the rules were written for.
fn blocks_cel(cause: &Cause) -> bool {
    matches!(
        cause.reason.as_str(),
        "FieldValueNotSupported"
            | "FieldValueRequired"
            | "FieldValueTooLong"
            | "FieldValueTooMany"
            | "FieldValueTypeInvalid"
    )
}

fn combinators(v: &Value, s: &Node, path: &str, out: &mut Vec<Cause>) {
    for sub in &s.all_of {
        validate_node(v, None, sub, path, out);
    }
    let passes = |sub: &Node| {
        let mut e = Vec::new();
        validate_node(v, None, sub, path, &mut e);
        e.is_empty()
    };
    if !s.any_of.is_empty() && !s.any_of.iter().any(passes) {
        out.push(invalid(path, v, "must validate at least one schema (anyOf)"));
    }
    if !s.one_of.is_empty() && s.one_of.iter().filter(|n| passes(n)).count() != 1 {
        out.push(invalid(path, v, "must validate one and only one schema (oneOf)"));
    }
    if let Some(n) = &s.not
        && passes(n)
    {
        out.push(invalid(path, v, "must not validate the schema (not)"));
    }
}

/// The key fields of an item of an `x-kubernetes-list-type: map` list (absent keys take their defaults).
fn map_key(x: &Value, s: &Node) -> Value {
    let mut k = Map::new();
    for name in &s.list_map_keys {
        if let Some(val) = x.get(name) {
            k.insert(name.clone(), val.clone());
        } else if let Some(d) = s.items.as_ref().and_then(|i| i.properties.get(name)).and_then(|p| p.default.clone()) {
            k.insert(name.clone(), d);
        }
    }
    Value::Object(k)
}

/// `x-kubernetes-list-type` `set` and `map` uniqueness.
fn list_type(items: &[Value], s: &Node, path: &str, out: &mut Vec<Cause>) {
    match s.list_type.as_deref() {
        Some("set") => {
            for (i, x) in items.iter().enumerate() {
                if items[..i].contains(x) {
                    out.push(err::duplicate(&format!("{path}[{i}]"), x));
                }
            }
        }
        Some("map") => {
            let keys: Vec<Value> = items.iter().map(|x| map_key(x, s)).collect();
            for (i, k) in keys.iter().enumerate() {
                if keys[..i].contains(k) {
                    out.push(err::duplicate(&format!("{path}[{i}]"), k));
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
