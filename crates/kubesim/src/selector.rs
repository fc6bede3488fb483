//! Label and field selectors, parsed and matched as `k8s.io/apimachinery` does (`labels.Parse`,
//! `fields.ParseSelector`), including its error wording, so clients see the messages they know.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::names::{label_value_errors, qualified_name_errors};

/// The operator of one label requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelOp {
    /// `k=v`
    Equals,
    /// `k==v`
    DoubleEquals,
    /// `k!=v`
    NotEquals,
    /// `k in (a,b)`
    In,
    /// `k notin (a,b)`
    NotIn,
    /// `k`
    Exists,
    /// `!k`
    DoesNotExist,
    /// `k>5`
    GreaterThan,
    /// `k<5`
    LessThan,
}

/// One comma-separated term of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: LabelOp,
    /// Sorted and deduplicated, as upstream keeps them in a string set.
    pub values: Vec<String>,
}

impl Requirement {
    fn new(key: String, op: LabelOp, values: BTreeSet<String>) -> Result<Requirement, String> {
        let errs = qualified_name_errors(&key);
        if !errs.is_empty() {
            return Err(format!("key: Invalid value: {key:?}: {}", errs.join("; ")));
        }
        let values: Vec<String> = values.into_iter().collect();
        match op {
            LabelOp::In | LabelOp::NotIn if values.is_empty() => {
                return Err("values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty".into());
            }
            LabelOp::Equals | LabelOp::DoubleEquals | LabelOp::NotEquals if values.len() != 1 => {
                return Err("values: Invalid value: []: exact-match compatibility requires one single value".into());
            }
            LabelOp::Exists | LabelOp::DoesNotExist if !values.is_empty() => {
                return Err("values: Invalid value: []: values set must be empty for exists and does not exist".into());
            }
            LabelOp::GreaterThan | LabelOp::LessThan => {
                if values.len() != 1 {
                    return Err(
                        "values: Invalid value: []: for 'Gt', 'Lt' operators, exactly one value is required".into()
                    );
                }
                if values[0].parse::<i64>().is_err() {
                    return Err(format!(
                        "values[0]: Invalid value: {:?}: for 'Gt', 'Lt' operators, the value must be an integer",
                        values[0]
                    ));
                }
            }
            _ => {}
        }
        for (i, v) in values.iter().enumerate() {
            let errs = label_value_errors(v);
            if !errs.is_empty() {
                return Err(format!("values[{i}][{key}]: Invalid value: {v:?}: {}", errs.join("; ")));
            }
        }
        Ok(Requirement { key, op, values })
    }

    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        self.op.admits(labels.get(&self.key).and_then(Value::as_str), &self.values)
    }
}

impl LabelOp {
    /// Whether a label's value (None when the object has no such label) satisfies this operator with `values`:
    /// the one place label-matching semantics live, for parsed selectors and typed `metav1.LabelSelector`s alike.
    pub(crate) fn admits(self, value: Option<&str>, values: &[String]) -> bool {
        let in_set = |v: &str| values.iter().any(|x| x == v);
        match self {
            LabelOp::Equals | LabelOp::DoubleEquals | LabelOp::In => value.is_some_and(in_set),
            LabelOp::NotEquals | LabelOp::NotIn => !value.is_some_and(in_set),
            LabelOp::Exists => value.is_some(),
            LabelOp::DoesNotExist => value.is_none(),
            LabelOp::GreaterThan | LabelOp::LessThan => {
                let (Some(have), Some(want)) =
                    (value.and_then(|v| v.parse::<i64>().ok()), values.first().and_then(|v| v.parse::<i64>().ok()))
                else {
                    return false;
                };
                if self == LabelOp::GreaterThan { have > want } else { have < want }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = self.values.first().map(String::as_str).unwrap_or("");
        match self.op {
            LabelOp::Equals => write!(f, "{}={first}", self.key),
            LabelOp::DoubleEquals => write!(f, "{}=={first}", self.key),
            LabelOp::NotEquals => write!(f, "{}!={first}", self.key),
            LabelOp::In => write!(f, "{} in ({})", self.key, self.values.join(",")),
            LabelOp::NotIn => write!(f, "{} notin ({})", self.key, self.values.join(",")),
            LabelOp::Exists => write!(f, "{}", self.key),
            LabelOp::DoesNotExist => write!(f, "!{}", self.key),
            LabelOp::GreaterThan => write!(f, "{}>{first}", self.key),
            LabelOp::LessThan => write!(f, "{}<{first}", self.key),
        }
    }
}

/// A parsed label selector: requirements ANDed together. Empty = everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// Sorted by key, as upstream sorts them.
    pub requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses the `labelSelector` query syntax. Errors are 400 BadRequest with upstream's parser messages.
    pub fn parse(s: &str) -> ApiResult<LabelSelector> {
        let mut p = Parser { tokens: lex(s), pos: 0 };
        let mut requirements = p.parse().map_err(ApiError::bad_request)?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// A selector from a `metav1.LabelSelector` object (`matchLabels` + `matchExpressions`), as Deployments and
    /// ReplicaSets carry it. Errors name the offending part.
    pub fn from_label_selector(sel: &Value) -> Result<LabelSelector, String> {
        let mut requirements = Vec::new();
        if let Some(labels) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in labels {
                let v = v.as_str().ok_or_else(|| format!("matchLabels[{k}] must be a string"))?;
                requirements.push(Requirement::new(k.clone(), LabelOp::Equals, BTreeSet::from([v.to_string()]))?);
            }
        }
        if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default().to_string();
                let values: BTreeSet<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                    .unwrap_or_default();
                let op = match e.get("operator").and_then(Value::as_str).unwrap_or_default() {
                    "In" => LabelOp::In,
                    "NotIn" => LabelOp::NotIn,
                    "Exists" => LabelOp::Exists,
                    "DoesNotExist" => LabelOp::DoesNotExist,
                    other => return Err(format!("{other:?} is not a valid label selector operator")),
                };
                requirements.push(Requirement::new(key, op, values)?);
            }
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Matches an object by its `metadata.labels` (absent labels = none).
    pub fn matches_object(&self, obj: &Value) -> bool {
        static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object).unwrap_or(&EMPTY);
        self.matches(labels)
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.requirements.iter().map(Requirement::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Comma,
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    Open,
    Close,
    End,
}

impl Tok {
    fn literal(&self) -> &str {
        match self {
            Tok::Ident(s) => s,
            Tok::Comma => ",",
            Tok::Not => "!",
            Tok::Eq => "=",
            Tok::DoubleEq => "==",
            Tok::NotEq => "!=",
            Tok::Gt => ">",
            Tok::Lt => "<",
            Tok::Open => "(",
            Tok::Close => ")",
            Tok::End => "",
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn lex(s: &str) -> Vec<Tok> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, ' ' | '\t' | '\r' | '\n') {
            i += 1;
        } else if is_special(c) {
            let next = chars.get(i + 1).copied();
            let (tok, len) = match (c, next) {
                ('=', Some('=')) => (Tok::DoubleEq, 2),
                ('!', Some('=')) => (Tok::NotEq, 2),
                ('=', _) => (Tok::Eq, 1),
                ('!', _) => (Tok::Not, 1),
                ('(', _) => (Tok::Open, 1),
                (')', _) => (Tok::Close, 1),
                (',', _) => (Tok::Comma, 1),
                ('>', _) => (Tok::Gt, 1),
                _ => (Tok::Lt, 1),
            };
            out.push(tok);
            i += len;
        } else {
            let start = i;
            while i < chars.len() && !is_special(chars[i]) && !matches!(chars[i], ' ' | '\t' | '\r' | '\n') {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
        }
    }
    out
}

struct Parser {
    tokens: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Tok {
        self.tokens.get(self.pos).cloned().unwrap_or(Tok::End)
    }

    fn next(&mut self) -> Tok {
        let t = self.peek();
        self.pos += 1;
        t
    }

    fn peek_is_ident_or_not(&self) -> bool {
        matches!(self.peek(), Tok::Ident(_) | Tok::Not)
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut out = Vec::new();
        loop {
            match self.peek() {
                Tok::Ident(_) | Tok::Not => {
                    let r = self.requirement().map_err(|e| format!("unable to parse requirement: {e}"))?;
                    out.push(r);
                    match self.next() {
                        Tok::End => return Ok(out),
                        Tok::Comma => {
                            if !self.peek_is_ident_or_not() {
                                return Err(format!(
                                    "found '{}', expected: identifier after ','",
                                    self.peek().literal()
                                ));
                            }
                        }
                        t => return Err(format!("found '{}', expected: ',' or 'end of string'", t.literal())),
                    }
                }
                Tok::End => return Ok(out),
                t => return Err(format!("found '{}', expected: !, identifier, or 'end of string'", t.literal())),
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let mut negated = false;
        let mut tok = self.next();
        if tok == Tok::Not {
            negated = true;
            tok = self.next();
        }
        let Tok::Ident(key) = tok else {
            return Err(format!("found '{}', expected: identifier", tok.literal()));
        };
        if negated {
            return Requirement::new(key, LabelOp::DoesNotExist, BTreeSet::new());
        }
        if matches!(self.peek(), Tok::End | Tok::Comma) {
            return Requirement::new(key, LabelOp::Exists, BTreeSet::new());
        }
        let op = match self.next() {
            Tok::Ident(s) if s == "in" => LabelOp::In,
            Tok::Ident(s) if s == "notin" => LabelOp::NotIn,
            Tok::Eq => LabelOp::Equals,
            Tok::DoubleEq => LabelOp::DoubleEquals,
            Tok::NotEq => LabelOp::NotEquals,
            Tok::Gt => LabelOp::GreaterThan,
            Tok::Lt => LabelOp::LessThan,
            t => {
                return Err(format!("found '{}', expected: in, notin, =, ==, !=, gt, lt", t.literal()));
            }
        };
        let values = match op {
            LabelOp::In | LabelOp::NotIn => self.value_set()?,
            _ => self.exact_value()?,
        };
        Requirement::new(key, op, values)
    }

    fn exact_value(&mut self) -> Result<BTreeSet<String>, String> {
        match self.peek() {
            Tok::End | Tok::Comma => Ok(BTreeSet::from([String::new()])),
            Tok::Ident(v) => {
                self.pos += 1;
                Ok(BTreeSet::from([v]))
            }
            t => Err(format!("found '{}', expected: identifier", t.literal())),
        }
    }

    fn value_set(&mut self) -> Result<BTreeSet<String>, String> {
        let t = self.next();
        if t != Tok::Open {
            return Err(format!("found '{}' expected: '('", t.literal()));
        }
        match self.peek() {
            Tok::Ident(_) | Tok::Comma => {
                let set = self.identifiers()?;
                let t = self.next();
                if t != Tok::Close {
                    return Err(format!("found '{}', expected: ')'", t.literal()));
                }
                Ok(set)
            }
            Tok::Close => {
                self.pos += 1;
                Ok(BTreeSet::from([String::new()]))
            }
            t => Err(format!("found '{}', expected: ',', ')' or identifier", t.literal())),
        }
    }

    fn identifiers(&mut self) -> Result<BTreeSet<String>, String> {
        let mut set = BTreeSet::new();
        loop {
            match self.next() {
                Tok::Ident(v) => {
                    set.insert(v);
                    match self.peek() {
                        Tok::Comma => continue,
                        Tok::Close => return Ok(set),
                        t => return Err(format!("found '{}', expected: ',' or ')'", t.literal())),
                    }
                }
                // `(,a`, `a,,b` and `a,)` denote empty values.
                Tok::Comma => {
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    match self.peek() {
                        Tok::Close => {
                            set.insert(String::new());
                            return Ok(set);
                        }
                        Tok::Comma => {
                            self.pos += 1;
                            set.insert(String::new());
                        }
                        _ => {}
                    }
                }
                t => return Err(format!("found '{}', expected: ',', or identifier", t.literal())),
            }
        }
    }
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    /// `false` for `!=`.
    pub equal: bool,
    pub value: String,
}

/// A parsed field selector: terms ANDed together. Empty = everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// Sorted by field (then operator and value), so equal selectors compare equal.
    pub requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses the `fieldSelector` query syntax (`=`, `==`, `!=`; `\,` `\=` `\\` escapes in values).
    pub fn parse(s: &str) -> ApiResult<FieldSelector> {
        let mut requirements = Vec::new();
        for term in split_terms(s) {
            if term.is_empty() {
                continue;
            }
            let Some((lhs, op, rhs)) = split_term(term) else {
                return Err(ApiError::bad_request(format!("invalid selector: '{s}'; can't understand '{term}'")));
            };
            let value = unescape_value(rhs).map_err(ApiError::bad_request)?;
            requirements.push(FieldRequirement { field: lhs.to_string(), equal: op != "!=", value });
        }
        requirements.sort_by(|a, b| (&a.field, !a.equal, &a.value).cmp(&(&b.field, !b.equal, &b.value)));
        Ok(FieldSelector { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The field names the selector uses (checked by the caller against the type's selectable fields).
    pub fn fields(&self) -> Vec<String> {
        let mut out: Vec<String> = self.requirements.iter().map(|r| r.field.clone()).collect();
        out.dedup();
        out
    }

    /// 400 `field label not supported: X` for the first field not in `supported`, as upstream's conversion does.
    pub fn check_supported(&self, supported: &[String]) -> ApiResult<()> {
        match self.requirements.iter().find(|r| !supported.contains(&r.field)) {
            Some(r) => Err(ApiError::bad_request(format!("field label not supported: {}", r.field))),
            None => Ok(()),
        }
    }

    /// Evaluates against an object by dotted path (`metadata.name`, `involvedObject.kind`); a missing field
    /// reads as "" and scalars are compared by their string form.
    pub fn matches(&self, obj: &Value) -> bool {
        self.requirements.iter().all(|r| (field_value(obj, &r.field) == r.value) == r.equal)
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(|r| format!("{}{}{}", r.field, if r.equal { "=" } else { "!=" }, escape_value(&r.value)))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// The string form of a field, as the field-set functions of upstream registries produce it.
pub fn field_value(obj: &Value, dotted: &str) -> String {
    let mut cur = obj;
    for part in dotted.trim_start_matches('.').split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => String::new(),
    }
}

fn escape_value(s: &str) -> String {
    s.replace('\\', "\\\\").replace(',', "\\,").replace('=', "\\=")
}

fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            out.push(&s[start..i]);
            start = i + 1;
        }
    }
    out.push(&s[start..]);
    out
}

fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for op in ["!=", "==", "="] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((&term[..i], op, rhs));
            }
        }
    }
    None
}

fn unescape_value(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                _ => return Err(format!("invalid field selector: invalid escape sequence: \\{c}")),
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => return Err(format!("invalid field selector: unescaped character in value: {c}")),
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap()
    }

    #[test]
    fn equality_operators() {
        let l = labels(json!({"app": "web", "tier": "front"}));
        assert!(sel("app=web").matches(&l));
        assert!(sel("app==web").matches(&l));
        assert!(!sel("app=db").matches(&l));
        assert!(sel("app!=db").matches(&l));
        assert!(!sel("app!=web").matches(&l));
        assert!(sel("missing!=x").matches(&l), "!= matches a missing key");
    }

    #[test]
    fn set_operators() {
        let l = labels(json!({"env": "prod"}));
        assert!(sel("env in (prod, staging)").matches(&l));
        assert!(!sel("env in (dev,staging)").matches(&l));
        assert!(sel("env notin (dev)").matches(&l));
        assert!(!sel("env notin (prod)").matches(&l));
        assert!(sel("other notin (x)").matches(&l), "notin matches a missing key");
        assert!(!sel("other in (x)").matches(&l));
    }

    #[test]
    fn existence_and_conjunction() {
        let l = labels(json!({"a": "1", "b": "2"}));
        assert!(sel("a").matches(&l));
        assert!(!sel("!a").matches(&l));
        assert!(sel("!c").matches(&l));
        assert!(sel("a,b=2, !c").matches(&l));
        assert!(!sel("a,b=3").matches(&l));
        assert!(sel("").matches(&l));
        assert!(sel("  ").is_empty());
    }

    #[test]
    fn numeric_comparisons() {
        let l = labels(json!({"n": "5"}));
        assert!(sel("n>3").matches(&l));
        assert!(!sel("n<3").matches(&l));
        assert!(!sel("m>3").matches(&l));
        assert!(LabelSelector::parse("n>x").is_err());
    }

    #[test]
    fn empty_values() {
        let l = labels(json!({"a": ""}));
        assert!(sel("a=").matches(&l));
        assert!(sel("a in ()").matches(&l));
        assert!(sel("a in (,x)").matches(&l));
        assert!(!sel("a=").matches(&labels(json!({}))));
    }

    #[test]
    fn keywords_are_values_after_operators() {
        let l = labels(json!({"in": "notin"}));
        assert!(sel("in=notin").matches(&l));
    }

    #[test]
    fn syntax_errors_are_bad_requests_with_upstream_messages() {
        let cases = [
            ("a in", "unable to parse requirement: found '' expected: '('"),
            ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
            ("a,", "found '', expected: identifier after ','"),
            ("=a", "found '=', expected: !, identifier, or 'end of string'"),
            ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
            ("a=b c", "found 'c', expected: ',' or 'end of string'"),
            ("!a=b", "found '=', expected: ',' or 'end of string'"),
            ("a=(b)", "unable to parse requirement: found '(', expected: identifier"),
        ];
        for (input, msg) in cases {
            let e = LabelSelector::parse(input).unwrap_err();
            assert_eq!(e.code, 400, "{input}");
            assert_eq!(e.reason, "BadRequest");
            assert_eq!(e.message, msg, "{input}");
        }
    }

    #[test]
    fn invalid_keys_and_values_are_rejected() {
        for bad in ["-a=b", "a/b/c=d", "a=b-", &format!("a={}", "x".repeat(64)), "Ab_/x", "a=b@c"] {
            let e = LabelSelector::parse(bad).unwrap_err();
            assert_eq!(e.code, 400, "{bad}");
            assert!(e.message.starts_with("unable to parse requirement: "), "{bad}: {}", e.message);
        }
        assert!(LabelSelector::parse("example.com/app=web").is_ok());
        assert!(LabelSelector::parse("app.kubernetes.io/name in (a.b, c_d)").is_ok());
    }

    #[test]
    fn display_is_canonical_and_reparses() {
        let s = sel("z=1, a in (y,x), !b, c");
        assert_eq!(s.to_string(), "a in (x,y),!b,c,z=1");
        assert_eq!(sel(&s.to_string()), s);
    }

    #[test]
    fn from_label_selector_object() {
        let s = LabelSelector::from_label_selector(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]
        }))
        .unwrap();
        assert!(s.matches(&labels(json!({"app": "web"}))));
        assert!(!s.matches(&labels(json!({"app": "web", "tier": "db"}))));
        assert!(
            LabelSelector::from_label_selector(&json!({"matchExpressions": [{"key": "a", "operator": "Is"}]})).is_err()
        );
    }

    #[test]
    fn field_selector_matches_dotted_paths() {
        let pod = json!({"metadata": {"name": "p1", "namespace": "ns"}, "spec": {"nodeName": "n1"},
                         "status": {"phase": "Running", "replicas": 3}});
        let f = |s: &str| FieldSelector::parse(s).unwrap();
        assert!(f("metadata.name=p1").matches(&pod));
        assert!(f("metadata.name==p1,metadata.namespace=ns").matches(&pod));
        assert!(!f("metadata.name!=p1").matches(&pod));
        assert!(f("spec.nodeName!=n2").matches(&pod));
        assert!(f("spec.restartPolicy=").matches(&pod), "missing reads as empty");
        assert!(f("status.replicas=3").matches(&pod));
        assert!(f("").matches(&pod));
        assert_eq!(f("b=1,a=2").fields(), vec!["a".to_string(), "b".to_string()]);
    }

    #[test]
    fn field_selector_escapes_and_errors() {
        let obj = json!({"metadata": {"name": "a,b=c"}});
        assert!(FieldSelector::parse(r"metadata.name=a\,b\=c").unwrap().matches(&obj));
        let e = FieldSelector::parse("metadata.name").unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(e.message, "invalid selector: 'metadata.name'; can't understand 'metadata.name'");
        assert_eq!(
            FieldSelector::parse(r"a=b\x").unwrap_err().message,
            r"invalid field selector: invalid escape sequence: \x"
        );
        assert_eq!(
            FieldSelector::parse("a=b=c").unwrap_err().message,
            "invalid field selector: unescaped character in value: ="
        );
    }

    #[test]
    fn unsupported_field_is_reported() {
        let s = FieldSelector::parse("metadata.name=a,spec.foo=b").unwrap();
        let e = s.check_supported(&["metadata.name".to_string()]).unwrap_err();
        assert_eq!(e.message, "field label not supported: spec.foo");
        assert!(s.check_supported(&["metadata.name".to_string(), "spec.foo".to_string()]).is_ok());
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

            #[test]
            fn label_parser_never_panics(s in r"[a-z0-9=!(),<> ._/-]{0,40}") {
                if let Ok(sel) = LabelSelector::parse(&s) {
                    let again = LabelSelector::parse(&sel.to_string());
                    prop_assert_eq!(again.ok(), Some(sel));
                }
            }

            #[test]
            fn label_selector_roundtrip(key in "[a-z][a-z0-9]{0,8}", val in "[a-z0-9]{1,8}") {
                let s = LabelSelector::parse(&format!("{key}={val}")).unwrap();
                let mut m = Map::new();
                m.insert(key.clone(), Value::String(val.clone()));
                prop_assert!(s.matches(&m));
                prop_assert_eq!(s.to_string(), format!("{key}={val}"));
            }

            #[test]
            fn field_parser_never_panics(s in r"[a-z.=!,\\]{0,40}") {
                if let Ok(sel) = FieldSelector::parse(&s) {
                    let again = FieldSelector::parse(&sel.to_string());
                    prop_assert_eq!(again.ok(), Some(sel));
                }
            }

            #[test]
            fn field_selector_roundtrip(val in r"[a-z,=\\]{0,10}") {
                let obj = serde_json::json!({"metadata": {"name": val.clone()}});
                let s = FieldSelector::parse(&format!("metadata.name={}", escape_value(&val))).unwrap();
                prop_assert!(s.matches(&obj));
            }
        }
    }
}
