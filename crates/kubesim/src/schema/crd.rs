//! Validation of a CustomResourceDefinition object itself, as apiextensions-apiserver does it: names, versions,
//! and that every version's schema is structural.

use super::*;

// Over 80 lines on purpose: The checks of apiextensions' `ValidateCustomResourceDefinition` in its order, which decides
// the order of the causes a client sees.
/// Validates a CustomResourceDefinition: names, scope, versions and their structural schemas, printer columns
/// and selectable fields, with upstream's field paths.
pub fn validate_crd(crd: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let spec = crd.get("spec").unwrap_or(&Value::Null);
    let s = |ptr: &str| spec.pointer(ptr).and_then(Value::as_str).unwrap_or_default();
    let group = s("/group");
    let plural = s("/names/plural");
    let name = crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    if !name.is_empty() && name != format!("{plural}.{group}") {
        out.push(err::invalid_str("metadata.name", name, "must be spec.names.plural+\".\"+spec.group"));
    }
    if group.is_empty() {
        out.push(err::required("spec.group", ""));
    } else {
        for msg in names::dns1123_subdomain_errors(group) {
            out.push(err::invalid_str("spec.group", group, &msg));
        }
        if !group.contains('.') {
            out.push(err::invalid_str("spec.group", group, "should be a domain with at least one dot"));
        }
    }
    match spec.get("scope") {
        None => out.push(err::required("spec.scope", "")),
        Some(v) if !matches!(v.as_str(), Some("Cluster" | "Namespaced")) => {
            out.push(err::not_supported("spec.scope", v, &["Cluster", "Namespaced"]))
        }
        _ => {}
    }
    crd_names(spec.get("names").unwrap_or(&Value::Null), "spec.names", &mut out);
    let versions = spec.get("versions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if versions.is_empty() {
        out.push(err::invalid("spec.versions", "[]", "must have exactly one version marked as storage version"));
    }
    // Upstream validates the internal type, to which conversion lifts a per-version part that all versions
    // share (schema, printer columns, selectable fields) to the top of spec: its errors name `spec.validation`,
    // `spec.additionalPrinterColumns`, `spec.selectableFields`, once. (A missing schema stays per version.)
    let shared = |key: &str| versions.iter().all(|v| v.get(key) == versions.first().and_then(|f| f.get(key)));
    let (shared_schema, shared_columns, shared_fields) =
        (shared("schema"), shared("additionalPrinterColumns"), shared("selectableFields"));
    let mut seen: Vec<&str> = Vec::new();
    let mut storage = 0;
    let mut served = 0;
    for (i, v) in versions.iter().enumerate() {
        let path = format!("spec.versions[{i}]");
        let lifted = |is_shared: bool, own: String, top: &str| match is_shared {
            true if i == 0 => Some(top.to_string()),
            true => None,
            false => Some(own),
        };
        let vname = v.get("name").and_then(Value::as_str).unwrap_or_default();
        if vname.is_empty() {
            out.push(err::required(&format!("{path}.name"), ""));
        } else {
            for msg in names::dns1035_label_errors(vname) {
                out.push(err::invalid_str(&format!("{path}.name"), vname, &msg));
            }
            if seen.contains(&vname) {
                out.push(err::duplicate(&format!("{path}.name"), &Value::String(vname.into())));
            }
        }
        seen.push(vname);
        if flag(v, "storage") {
            storage += 1;
        }
        if flag(v, "served") {
            served += 1;
        }
        match v.pointer("/schema/openAPIV3Schema") {
            None | Some(Value::Null) => out.push(err::required(&format!("{path}.schema.openAPIV3Schema"), "")),
            Some(schema) => {
                if let Some(base) =
                    lifted(shared_schema, format!("{path}.schema.openAPIV3Schema"), "spec.validation.openAPIV3Schema")
                {
                    structural(schema, &base, true, &mut out);
                    if let Err(e) = CompiledSchema::compile_at(schema, &base) {
                        out.extend(e);
                    }
                }
            }
        }
        let columns_base =
            lifted(shared_columns, format!("{path}.additionalPrinterColumns"), "spec.additionalPrinterColumns");
        let columns = columns_base.as_ref().and_then(|_| v.get("additionalPrinterColumns")).and_then(Value::as_array);
        for (j, c) in columns.into_iter().flatten().enumerate() {
            let cp = format!("{}[{j}]", columns_base.as_deref().unwrap_or_default());
            if c.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
                out.push(err::required(&format!("{cp}.name"), ""));
            }
            match c.get("type") {
                None => out.push(err::required(&format!("{cp}.type"), "")),
                Some(t) if !matches!(t.as_str(), Some("boolean" | "date" | "integer" | "number" | "string")) => out
                    .push(err::not_supported(
                        &format!("{cp}.type"),
                        t,
                        &["boolean", "date", "integer", "number", "string"],
                    )),
                _ => {}
            }
            match c.get("jsonPath").and_then(Value::as_str) {
                None | Some("") => out.push(err::required(&format!("{cp}.jsonPath"), "")),
                Some(p) => {
                    if let Err(e) = crate::jsonpath::parse_relaxed(p) {
                        out.push(err::invalid_str(
                            &format!("{cp}.jsonPath"),
                            p,
                            &format!("must be a simple json path: {e}"),
                        ));
                    }
                }
            }
        }
        let Some(fields_base) = lifted(shared_fields, format!("{path}.selectableFields"), "spec.selectableFields")
        else {
            continue;
        };
        for (j, f) in v.get("selectableFields").and_then(Value::as_array).into_iter().flatten().enumerate() {
            if f.get("jsonPath").and_then(Value::as_str).is_none_or(str::is_empty) {
                out.push(err::required(&format!("{fields_base}[{j}].jsonPath"), ""));
            }
        }
    }
    if !versions.is_empty() && storage != 1 {
        out.push(err::invalid(
            "spec.versions",
            &go_repr(&Value::Array(versions.to_vec())),
            "must have exactly one version marked as storage version",
        ));
    }
    if !versions.is_empty() && served == 0 {
        out.push(err::invalid(
            "spec.versions",
            &go_repr(&Value::Array(versions.to_vec())),
            "must have at least one version marked as served",
        ));
    }
    out
}

pub(super) fn crd_names(n: &Value, path: &str, out: &mut Vec<Cause>) {
    let s = |k: &str| n.get(k).and_then(Value::as_str).unwrap_or_default();
    for key in ["plural", "singular"] {
        let v = s(key);
        if v.is_empty() && key == "plural" {
            out.push(err::required(&format!("{path}.{key}"), ""));
        } else if !v.is_empty() {
            for msg in names::dns1123_label_errors(v) {
                out.push(err::invalid_str(&format!("{path}.{key}"), v, &msg));
            }
        }
    }
    for key in ["kind", "listKind"] {
        let v = s(key);
        if v.is_empty() {
            out.push(err::required(&format!("{path}.{key}"), ""));
        } else if names::dns1035_label_errors(&v.to_lowercase()).iter().any(|_| true) {
            out.push(err::invalid_str(
                &format!("{path}.{key}"),
                v,
                "may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?",
            ));
        }
    }
    if !s("kind").is_empty() && s("kind") == s("listKind") {
        out.push(err::invalid_str(&format!("{path}.listKind"), s("listKind"), "kind and listKind may not be the same"));
    }
    for (key, list) in [("shortNames", n.get("shortNames")), ("categories", n.get("categories"))] {
        for (i, v) in list.and_then(Value::as_array).into_iter().flatten().enumerate() {
            let v = v.as_str().unwrap_or_default();
            for msg in names::dns1123_label_errors(v) {
                out.push(err::invalid_str(&format!("{path}.{key}[{i}]"), v, &msg));
            }
        }
    }
}

// Over 80 lines on purpose: The structural-schema rules of apiextensions, one after another on a node (type, root,
// items, properties, list-map keys, then the children).
/// The structural-schema rules: a type everywhere (except int-or-string / preserve-unknown-fields nodes),
/// an object at the root, items on arrays, no properties next to additionalProperties, list-map keys.
pub(super) fn structural(v: &Value, path: &str, root: bool, out: &mut Vec<Cause>) {
    let ty = v.get("type").and_then(Value::as_str).unwrap_or_default();
    let int_or_string = flag(v, "x-kubernetes-int-or-string");
    let preserve = flag(v, "x-kubernetes-preserve-unknown-fields");
    if root && ty != "object" {
        if ty.is_empty() {
            out.push(err::required(&format!("{path}.type"), "must not be empty at the root"));
        } else {
            out.push(err::invalid_str(&format!("{path}.type"), ty, "must be object at the root"));
        }
    } else if ty.is_empty() && !int_or_string && !preserve {
        out.push(err::required(&format!("{path}.type"), "must not be empty for specified object fields"));
    }
    if int_or_string && !ty.is_empty() {
        out.push(err::invalid_str(
            &format!("{path}.type"),
            ty,
            "must be empty to be structural when x-kubernetes-int-or-string is true",
        ));
    }
    if v.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        out.push(err::invalid(
            &format!("{path}.x-kubernetes-preserve-unknown-fields"),
            "false",
            "must be true or undefined",
        ));
    }
    if v.get("$ref").is_some() {
        out.push(err::forbidden(&format!("{path}.$ref"), "$ref is not supported"));
    }
    if v.get("properties").is_some() && v.get("additionalProperties").is_some_and(|a| a != &Value::Bool(false)) {
        out.push(err::forbidden(
            &format!("{path}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if ty == "array" && v.get("items").is_none() {
        out.push(err::required(&format!("{path}.items"), "must be specified"));
    }
    if flag(v, "x-kubernetes-embedded-resource") && ty != "object" {
        out.push(err::invalid_str(
            &format!("{path}.type"),
            ty,
            "must be object if x-kubernetes-embedded-resource is true",
        ));
    }
    match v.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => {
            if v.get("x-kubernetes-list-map-keys").and_then(Value::as_array).is_none_or(Vec::is_empty) {
                out.push(err::required(
                    &format!("{path}.x-kubernetes-list-map-keys"),
                    "must not be empty if x-kubernetes-list-type is map",
                ));
            }
            if v.pointer("/items/type").and_then(Value::as_str) != Some("object") {
                out.push(err::invalid_str(
                    &format!("{path}.items.type"),
                    v.pointer("/items/type").and_then(Value::as_str).unwrap_or_default(),
                    "must be object if parent array's x-kubernetes-list-type is map",
                ));
            }
        }
        Some("atomic" | "set") | None => {}
        Some(other) => out.push(err::not_supported(
            &format!("{path}.x-kubernetes-list-type"),
            &Value::String(other.into()),
            &["atomic", "map", "set"],
        )),
    }
    if let Some(props) = v.get("properties").and_then(Value::as_object) {
        for (k, p) in props {
            if root && k == "metadata" {
                metadata_schema(p, &format!("{path}.properties[metadata]"), out);
                continue;
            }
            structural(p, &format!("{path}.properties[{k}]"), false, out);
        }
    }
    if let Some(items) = v.get("items").filter(|i| i.is_object()) {
        structural(items, &format!("{path}.items"), false, out);
    }
    if let Some(a) = v.get("additionalProperties").filter(|a| a.is_object()) {
        structural(a, &format!("{path}.additionalProperties"), false, out);
    }
}

/// At the root, `metadata` may only restrict `name` and `generateName`.
pub(super) fn metadata_schema(v: &Value, path: &str, out: &mut Vec<Cause>) {
    if let Some(t) = v.get("type").and_then(Value::as_str)
        && t != "object"
    {
        out.push(err::invalid_str(&format!("{path}.type"), t, "must be object"));
    }
    for (k, _) in v.get("properties").and_then(Value::as_object).into_iter().flatten() {
        if k != "name" && k != "generateName" {
            out.push(err::forbidden(&format!("{path}.properties[{k}]"), "must not be specified"));
        }
    }
}
