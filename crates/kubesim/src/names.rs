//! Name and value syntax checks of `k8s.io/apimachinery/pkg/util/validation`, and the field-error wording of
//! `field.Error`, shared by built-in validation, schema validation and selector parsing.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::error::Cause;

fn anchored(re: &str) -> Regex {
    // The patterns are constants of this file; a failure is a programming error caught by every test.
    Regex::new(&format!("^(?:{re})$")).unwrap_or_else(|e| panic!("bad built-in regex {re}: {e}"))
}

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";

static QUALIFIED_NAME: LazyLock<Regex> = LazyLock::new(|| anchored(QUALIFIED_NAME_FMT));
static LABEL_VALUE: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL_VALUE_FMT));
static DNS1123_LABEL: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_LABEL_FMT));
static DNS1123_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_SUBDOMAIN_FMT));
static DNS1035_LABEL: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1035_LABEL_FMT));
static CONFIG_MAP_KEY: LazyLock<Regex> = LazyLock::new(|| anchored(CONFIG_MAP_KEY_FMT));

/// upstream `RegexError`: note the doubled spaces between examples, as upstream prints them.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `IsQualifiedName`: label keys, annotation keys, finalizers.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let name_msg = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(dns1123_subdomain_errors(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(name_msg, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !QUALIFIED_NAME.is_match(name) {
        errs.push(format!(
            "name part {}",
            regex_error(name_msg, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !LABEL_VALUE.is_match(value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `IsDNS1123Label`: namespace names, container names, port names of services.
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !DNS1123_LABEL.is_match(value) {
        errs.push(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// `IsDNS1123Subdomain`: most object names.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !DNS1123_SUBDOMAIN.is_match(value) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1035Label`: Service names.
pub fn dns1035_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !DNS1035_LABEL.is_match(value) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `IsValidPathSegmentName`: RBAC object names (`system:controller:x` is fine).
pub fn path_segment_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value == "." || value == ".." {
        errs.push(format!("may not be '{value}'"));
    }
    for c in ['/', '%'] {
        if value.contains(c) {
            errs.push(format!("may not contain '{c}'"));
        }
    }
    errs
}

/// `IsValidPortName` (IANA_SVC_NAME).
pub fn port_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 15 {
        errs.push(max_len_error(15));
    }
    if value.is_empty() || !value.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !value.chars().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if value.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if value.starts_with('-') || value.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

/// `IsConfigMapKey`: keys of ConfigMap and Secret data.
pub fn config_map_key_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !CONFIG_MAP_KEY.is_match(value) {
        errs.push(regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    if value == "." {
        errs.push("must not be '.'".into());
    } else if value == ".." {
        errs.push("must not be '..'".into());
    } else if value.starts_with("..") {
        errs.push("must not start with '..'".into());
    }
    errs
}

/// How upstream's `field.Error` prints a value: strings quoted, numbers and booleans bare, lists and maps as
/// JSON (kube-apiserver 1.37 prints `{"app":"x"}` and `["a"]`, no longer Go's `%#v`).
pub fn go_repr(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote(s),
        Value::Array(_) | Value::Object(_) => v.to_string(),
    }
}

/// Go's `%q` for the strings that occur in practice.
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// Constructors for the causes of a 422, worded like `field.Error.ErrorBody()`.
pub mod err {
    use super::*;

    pub fn required(path: &str, detail: &str) -> Cause {
        let msg = if detail.is_empty() { "Required value".to_string() } else { format!("Required value: {detail}") };
        Cause::new("FieldValueRequired", msg, path)
    }

    /// `value` is already printed (see [`go_repr`]).
    pub fn invalid(path: &str, value: &str, detail: &str) -> Cause {
        Cause::new("FieldValueInvalid", format!("Invalid value: {value}: {detail}"), path)
    }

    pub fn invalid_value(path: &str, value: &Value, detail: &str) -> Cause {
        invalid(path, &go_repr(value), detail)
    }

    pub fn invalid_str(path: &str, value: &str, detail: &str) -> Cause {
        invalid(path, &quote(value), detail)
    }

    pub fn type_invalid(path: &str, value: &str, detail: &str) -> Cause {
        Cause::new("FieldValueTypeInvalid", format!("Invalid value: {value}: {detail}"), path)
    }

    pub fn not_supported(path: &str, value: &Value, supported: &[&str]) -> Cause {
        let list: Vec<String> = supported.iter().map(|s| quote(s)).collect();
        Cause::new(
            "FieldValueNotSupported",
            format!("Unsupported value: {}: supported values: {}", go_repr(value), list.join(", ")),
            path,
        )
    }

    pub fn duplicate(path: &str, value: &Value) -> Cause {
        Cause::new("FieldValueDuplicate", format!("Duplicate value: {}", go_repr(value)), path)
    }

    pub fn forbidden(path: &str, detail: &str) -> Cause {
        Cause::new("FieldValueForbidden", format!("Forbidden: {detail}"), path)
    }

    pub fn not_found(path: &str, value: &Value) -> Cause {
        Cause::new("FieldValueNotFound", format!("Not found: {}", go_repr(value)), path)
    }

    pub fn too_long(path: &str, max_bytes: usize) -> Cause {
        Cause::new("FieldValueTooLong", format!("Too long: may not be more than {max_bytes} bytes"), path)
    }

    pub fn too_many(path: &str, actual: usize, max: usize) -> Cause {
        Cause::new("FieldValueTooMany", format!("Too many: {actual}: must have at most {max} items"), path)
    }

    /// `ValidateImmutableField`.
    pub fn immutable(path: &str, value: &Value) -> Cause {
        invalid_value(path, value, "field is immutable")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn qualified_names() {
        assert!(qualified_name_errors("app").is_empty());
        assert!(qualified_name_errors("app.kubernetes.io/name").is_empty());
        assert!(qualified_name_errors("A_b.C").is_empty());
        assert_eq!(qualified_name_errors("/a"), vec!["prefix part must be non-empty"]);
        assert!(qualified_name_errors("a/")[0].starts_with("name part must be non-empty"));
        assert!(qualified_name_errors("Upper.Case/x")[0].starts_with("prefix part a lowercase RFC 1123 subdomain"));
        assert!(qualified_name_errors("a/b/c")[0].starts_with("a qualified name must consist of"));
        assert!(!qualified_name_errors(&"x".repeat(64)).is_empty());
        assert_eq!(
            qualified_name_errors("-a"),
            vec![
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ]
        );
    }

    #[test]
    fn dns_names() {
        assert!(dns1123_subdomain_errors("my.app-1").is_empty());
        assert!(!dns1123_subdomain_errors("My.app").is_empty());
        assert!(!dns1123_subdomain_errors("").is_empty());
        assert!(dns1123_label_errors("123-abc").is_empty());
        assert!(!dns1123_label_errors("a.b").is_empty());
        assert!(!dns1035_label_errors("1abc").is_empty());
        assert!(dns1035_label_errors("abc-1").is_empty());
        assert_eq!(dns1123_label_errors(&"a".repeat(64)), vec!["must be no more than 63 characters"]);
    }

    #[test]
    fn other_syntaxes() {
        assert!(label_value_errors("").is_empty());
        assert!(!label_value_errors("a b").is_empty());
        assert!(path_segment_errors("system:controller:x").is_empty());
        assert_eq!(path_segment_errors("a/b"), vec!["may not contain '/'"]);
        assert!(port_name_errors("http").is_empty());
        assert_eq!(port_name_errors("80"), vec!["must contain at least one letter (a-z)"]);
        assert!(!port_name_errors("a--b").is_empty());
        assert!(config_map_key_errors("KEY_name.x-1").is_empty());
        assert!(!config_map_key_errors("a b").is_empty());
        assert_eq!(config_map_key_errors(".."), vec!["must not be '..'"]);
    }

    #[test]
    fn go_value_printing() {
        assert_eq!(go_repr(&json!("x")), "\"x\"");
        assert_eq!(go_repr(&json!(80)), "80");
        assert_eq!(go_repr(&json!({"a": 1})), "{\"a\":1}");
        assert_eq!(go_repr(&json!(["a"])), "[\"a\"]");
        let c = err::not_supported("spec.mode", &json!("x"), &["a", "b"]);
        assert_eq!(c.message, "Unsupported value: \"x\": supported values: \"a\", \"b\"");
        assert_eq!(c.reason, "FieldValueNotSupported");
    }
}
