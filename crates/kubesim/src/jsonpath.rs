//! The JSONPath dialect of `k8s.io/client-go/util/jsonpath`, as CRD printer columns and selectable fields use
//! it: `.a.b`, `['key']`, `[n]` (negative from the end), `[a:b]`, `[*]`, `.*`, `..name`, unions `[0,2]`,
//! filters `[?(@.type=="Ready")]` / `[?(@.x)]`, optionally wrapped in `{...}`. Missing keys yield no result,
//! as with `AllowMissingKeys(true)`.

use std::cmp::Ordering;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct JsonPathError(pub String);

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Wildcard,
    /// `..`: the following step applies at every depth.
    Recursive,
    /// Union of indices, slices and keys in brackets.
    Select(Vec<Selector>),
    Filter(Filter),
}

#[derive(Debug, Clone, PartialEq)]
enum Selector {
    Index(i64),
    Slice(Option<i64>, Option<i64>, Option<i64>),
    Key(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Path(Vec<Step>),
    Literal(Value),
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    left: Operand,
    /// None: existence test.
    op: Option<String>,
    right: Option<Operand>,
}

/// A parsed path expression.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

/// Parses a printer-column path the way upstream relaxes it: `.a.b`, `a.b`, `{.a.b}` and `{a.b}` are the same.
pub fn parse_relaxed(expr: &str) -> Result<JsonPath, JsonPathError> {
    let inner = expr.trim();
    let inner = inner.strip_prefix('{').and_then(|s| s.strip_suffix('}')).unwrap_or(inner);
    if inner.contains(['{', '}']) {
        return Err(JsonPathError(
            "unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' or '{.name1.name2}'"
                .into(),
        ));
    }
    let inner = inner.trim();
    if inner.is_empty() {
        return Ok(JsonPath { steps: vec![] });
    }
    let normalized =
        if inner.starts_with('.') || inner.starts_with('[') { inner.to_string() } else { format!(".{inner}") };
    let mut p = Parser { s: normalized.chars().collect(), pos: 0 };
    let steps = p.steps(false)?;
    if p.pos < p.s.len() {
        return Err(JsonPathError(format!("unrecognized character in action: {:?}", p.s[p.pos])));
    }
    Ok(JsonPath { steps })
}

/// Evaluates an expression against a value: every match, in document order (map keys sorted).
pub fn eval(expr: &str, value: &Value) -> Result<Vec<Value>, JsonPathError> {
    Ok(parse_relaxed(expr)?.find(value).into_iter().cloned().collect())
}

impl JsonPath {
    pub fn find<'a>(&self, value: &'a Value) -> Vec<&'a Value> {
        run(&self.steps, vec![value])
    }
}

struct Parser {
    s: Vec<char>,
    pos: usize,
}

fn is_name_char(c: char) -> bool {
    !matches!(c, '.' | '[' | ']' | '(' | ')' | ',' | '=' | '!' | '<' | '>' | '\'' | '"' | '@' | '{' | '}' | '?' | '*')
        && !c.is_whitespace()
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn fail<T>(&self, what: &str) -> Result<T, JsonPathError> {
        Err(JsonPathError(format!("{what} at position {}", self.pos)))
    }

    /// Steps until the end, or (inside a filter) until an operator or `)`.
    fn steps(&mut self, in_filter: bool) -> Result<Vec<Step>, JsonPathError> {
        let mut steps = Vec::new();
        while let Some(c) = self.peek() {
            match c {
                '.' => {
                    self.pos += 1;
                    if self.eat('.') {
                        steps.push(Step::Recursive);
                        if self.peek() == Some('[') {
                            continue;
                        }
                    }
                    if self.eat('*') {
                        steps.push(Step::Wildcard);
                        continue;
                    }
                    let start = self.pos;
                    while self.peek().is_some_and(is_name_char) {
                        self.pos += 1;
                    }
                    if start == self.pos {
                        // A lone `.` is the current object (`{.}`).
                        if self.pos >= self.s.len() {
                            break;
                        }
                        return self.fail("expected a field name");
                    }
                    steps.push(Step::Field(self.s[start..self.pos].iter().collect()));
                }
                '[' => {
                    self.pos += 1;
                    steps.push(self.bracket()?);
                }
                _ if in_filter => break,
                _ => return self.fail(&format!("unexpected {c:?}")),
            }
        }
        Ok(steps)
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn bracket(&mut self) -> Result<Step, JsonPathError> {
        self.skip_ws();
        if self.eat('*') {
            self.skip_ws();
            if !self.eat(']') {
                return self.fail("expected ']'");
            }
            return Ok(Step::Wildcard);
        }
        if self.eat('?') {
            if !self.eat('(') {
                return self.fail("expected '(' after '?'");
            }
            let filter = self.filter()?;
            if !self.eat(')') || !self.eat(']') {
                return self.fail("expected ')]' to close the filter");
            }
            return Ok(Step::Filter(filter));
        }
        let mut selectors = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                Some('\'' | '"') => selectors.push(Selector::Key(self.string()?)),
                Some(c) if c == ':' || c == '-' || c.is_ascii_digit() => selectors.push(self.index_or_slice()?),
                _ => return self.fail("expected an index, a slice or a quoted key"),
            }
            self.skip_ws();
            if self.eat(']') {
                return Ok(Step::Select(selectors));
            }
            if !self.eat(',') {
                return self.fail("expected ',' or ']'");
            }
        }
    }

    fn string(&mut self) -> Result<String, JsonPathError> {
        let Some(quote) = self.peek() else { return self.fail("expected a string") };
        self.pos += 1;
        let mut out = String::new();
        while let Some(c) = self.peek() {
            self.pos += 1;
            if c == quote {
                return Ok(out);
            }
            if c == '\\'
                && let Some(n) = self.peek()
            {
                self.pos += 1;
                out.push(n);
                continue;
            }
            out.push(c);
        }
        self.fail("unterminated string")
    }

    fn int(&mut self) -> Option<i64> {
        let start = self.pos;
        self.eat('-');
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let text: String = self.s[start..self.pos].iter().collect();
        text.parse().ok()
    }

    fn index_or_slice(&mut self) -> Result<Selector, JsonPathError> {
        let start = self.int();
        if self.peek() != Some(':') {
            return match start {
                Some(i) => Ok(Selector::Index(i)),
                None => self.fail("expected an integer"),
            };
        }
        self.pos += 1;
        let end = self.int();
        let step = if self.eat(':') { self.int() } else { None };
        Ok(Selector::Slice(start, end, step))
    }

    fn operand(&mut self) -> Result<Operand, JsonPathError> {
        self.skip_ws();
        match self.peek() {
            Some('@') => {
                self.pos += 1;
                Ok(Operand::Path(self.steps(true)?))
            }
            Some('\'' | '"') => Ok(Operand::Literal(Value::String(self.string()?))),
            Some(c) if c == '-' || c.is_ascii_digit() => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c == '-' || c == '.' || c.is_ascii_digit() || c == 'e') {
                    self.pos += 1;
                }
                let text: String = self.s[start..self.pos].iter().collect();
                match serde_json::from_str::<Value>(&text) {
                    Ok(v @ Value::Number(_)) => Ok(Operand::Literal(v)),
                    _ => self.fail("bad number"),
                }
            }
            _ => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
                    self.pos += 1;
                }
                match self.s[start..self.pos].iter().collect::<String>().as_str() {
                    "true" => Ok(Operand::Literal(Value::Bool(true))),
                    "false" => Ok(Operand::Literal(Value::Bool(false))),
                    "null" | "nil" => Ok(Operand::Literal(Value::Null)),
                    _ => self.fail("expected a filter operand"),
                }
            }
        }
    }

    fn filter(&mut self) -> Result<Filter, JsonPathError> {
        let left = self.operand()?;
        self.skip_ws();
        let op = ["==", "!=", "<=", ">=", "<", ">", "="].into_iter().find(|op| {
            let chars: Vec<char> = op.chars().collect();
            self.s.get(self.pos..self.pos + chars.len()) == Some(&chars[..])
        });
        let Some(op) = op else {
            self.skip_ws();
            return Ok(Filter { left, op: None, right: None });
        };
        self.pos += op.len();
        let right = self.operand()?;
        self.skip_ws();
        let op = if op == "=" { "==" } else { op };
        Ok(Filter { left, op: Some(op.to_string()), right: Some(right) })
    }
}

fn children(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(a) => a.iter().collect(),
        // serde_json maps are sorted by key, as upstream sorts map keys.
        Value::Object(m) => m.values().collect(),
        _ => vec![],
    }
}

fn descendants<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    out.push(v);
    for c in children(v) {
        descendants(c, out);
    }
}

fn resolve_index(i: i64, len: usize) -> Option<usize> {
    let len = len as i64;
    let i = if i < 0 { i + len } else { i };
    (0..len).contains(&i).then_some(i as usize)
}

fn run<'a>(steps: &[Step], mut current: Vec<&'a Value>) -> Vec<&'a Value> {
    let mut i = 0;
    while i < steps.len() {
        let mut next = Vec::new();
        match &steps[i] {
            Step::Recursive => {
                let mut all = Vec::new();
                for v in &current {
                    descendants(v, &mut all);
                }
                current = all;
                i += 1;
                continue;
            }
            Step::Field(name) => {
                for v in &current {
                    if let Some(x) = v.get(name.as_str()) {
                        next.push(x);
                    }
                }
            }
            Step::Wildcard => {
                for v in &current {
                    next.extend(children(v));
                }
            }
            Step::Select(selectors) => {
                for v in &current {
                    for sel in selectors {
                        select(v, sel, &mut next);
                    }
                }
            }
            Step::Filter(f) => {
                for v in &current {
                    let items: Vec<&Value> = match v {
                        Value::Array(a) => a.iter().collect(),
                        other => vec![other],
                    };
                    next.extend(items.into_iter().filter(|item| filter_matches(f, item)));
                }
            }
        }
        current = next;
        i += 1;
    }
    current
}

fn select<'a>(v: &'a Value, sel: &Selector, out: &mut Vec<&'a Value>) {
    match (sel, v) {
        (Selector::Key(k), Value::Object(m)) => out.extend(m.get(k)),
        (Selector::Index(i), Value::Array(a)) => out.extend(resolve_index(*i, a.len()).map(|i| &a[i])),
        (Selector::Slice(start, end, step), Value::Array(a)) => {
            let len = a.len() as i64;
            let clamp = |x: i64| if x < 0 { (x + len).max(0) } else { x.min(len) };
            let s = start.map_or(0, clamp);
            let e = end.map_or(len, clamp);
            let st = step.unwrap_or(1).max(1);
            let mut i = s;
            while i < e {
                out.push(&a[i as usize]);
                i += st;
            }
        }
        _ => {}
    }
}

fn operand_value<'a>(o: &'a Operand, item: &'a Value) -> Option<&'a Value> {
    match o {
        Operand::Literal(v) => Some(v),
        Operand::Path(steps) => run(steps, vec![item]).into_iter().next(),
    }
}

fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Null, Value::Null) => Some(Ordering::Equal),
        _ => None,
    }
}

fn filter_matches(f: &Filter, item: &Value) -> bool {
    let Some(left) = operand_value(&f.left, item) else { return false };
    let (Some(op), Some(right)) = (&f.op, &f.right) else { return true };
    let Some(right) = operand_value(right, item) else { return false };
    let ord = compare(left, right);
    match op.as_str() {
        "==" => ord == Some(Ordering::Equal),
        "!=" => ord != Some(Ordering::Equal),
        "<" => ord == Some(Ordering::Less),
        ">" => ord == Some(Ordering::Greater),
        "<=" => matches!(ord, Some(Ordering::Less | Ordering::Equal)),
        ">=" => matches!(ord, Some(Ordering::Greater | Ordering::Equal)),
        _ => false,
    }
}

/// How the jsonpath printer writes a value (Go's `fmt.Print` of the decoded JSON): strings bare, maps as
/// `map[k:v]`, lists as `[a b]`.
pub fn print_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(a) => format!("[{}]", a.iter().map(print_value).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            format!("map[{}]", m.iter().map(|(k, v)| format!("{k}:{}", print_value(v))).collect::<Vec<_>>().join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj() -> Value {
        json!({
            "metadata": {"name": "web", "labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"replicas": 3, "containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:2"}]},
            "status": {"conditions": [
                {"type": "Available", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "Pending"}
            ]}
        })
    }

    fn ev(expr: &str) -> Vec<Value> {
        eval(expr, &obj()).unwrap()
    }

    #[test]
    fn fields_and_relaxed_forms() {
        for e in [".spec.replicas", "spec.replicas", "{.spec.replicas}", "{spec.replicas}"] {
            assert_eq!(ev(e), vec![json!(3)], "{e}");
        }
        assert_eq!(ev(".spec.missing"), Vec::<Value>::new());
        assert_eq!(ev("{.metadata.labels['app.kubernetes.io/name']}"), vec![json!("web")]);
    }

    #[test]
    fn indices_slices_wildcards() {
        assert_eq!(ev(".spec.containers[0].name"), vec![json!("a")]);
        assert_eq!(ev(".spec.containers[-1].name"), vec![json!("b")]);
        assert_eq!(ev(".spec.containers[5].name"), Vec::<Value>::new());
        assert_eq!(ev(".spec.containers[*].image"), vec![json!("x:1"), json!("y:2")]);
        assert_eq!(ev(".spec.containers[0:1].name"), vec![json!("a")]);
        assert_eq!(ev(".spec.containers[0,1].name"), vec![json!("a"), json!("b")]);
        assert_eq!(ev(".metadata.*"), vec![json!({"app.kubernetes.io/name": "web"}), json!("web")]);
    }

    #[test]
    fn recursive_descent() {
        assert_eq!(ev("..image"), vec![json!("x:1"), json!("y:2")]);
        assert_eq!(ev("..name"), vec![json!("web"), json!("a"), json!("b")]);
    }

    #[test]
    fn filters() {
        assert_eq!(ev(".status.conditions[?(@.type==\"Ready\")].status"), vec![json!("False")]);
        assert_eq!(ev(".status.conditions[?(@.type=='Available')].status"), vec![json!("True")]);
        assert_eq!(ev(".status.conditions[?(@.reason)].type"), vec![json!("Ready")]);
        assert_eq!(ev(".status.conditions[?(@.type!=\"Ready\")].type"), vec![json!("Available")]);
        assert_eq!(ev(".spec.containers[?(@.name>\"a\")].name"), vec![json!("b")]);
        let nums = json!({"items": [{"n": 1}, {"n": 5}]});
        assert_eq!(eval(".items[?(@.n >= 2)].n", &nums).unwrap(), vec![json!(5)]);
    }

    #[test]
    fn bad_expressions_are_errors() {
        for bad in [".a[", ".a[?(@.x==)]", "{.a}{.b}", ".a[x]", ".a.'b'"] {
            assert!(parse_relaxed(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn printing_like_go() {
        assert_eq!(print_value(&json!("s")), "s");
        assert_eq!(print_value(&json!(["a", "b"])), "[a b]");
        assert_eq!(print_value(&json!({"a": 1})), "map[a:1]");
    }
}
