//! Runs a scenario against a [`Target`] and produces its normalised [`Outcome`]s.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Error;
use crate::normalize::{self, Normalizer};
use crate::pointer;
use crate::scenario::{Compare, Scenario, Step, WatchSpec, workspace_dir};
use crate::sequence::{self, Collector, Form, SequenceSpec};
use crate::target::Target;

/// The compared part of one step's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// Index of the step in the scenario (0-based).
    pub step: usize,
    pub name: String,
    pub status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub body: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<Value>>,
    /// A `sequence` step compared in its normal form: the distinct status tuples this run saw, for the reader
    /// (not compared: their number depends on the controllers' interleaving).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_sequence: Option<Vec<Value>>,
}

/// A scenario's answers; `failure` says why it stopped early (a setup step that failed, a wait that ran out).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub scenario: String,
    pub outcomes: Vec<Outcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

struct Raw {
    status: u16,
    content_type: Option<String>,
    warnings: Vec<String>,
    body: Value,
    events: Option<Vec<Value>>,
    observed_sequence: Option<Vec<Value>>,
}

/// Runs every step of `scenario` in order; transport errors end the run as a failure, never a panic.
pub async fn run(target: &Target, scenario: &Scenario) -> Run {
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    vars.insert("ns".into(), scenario.namespace());
    let mut norm = Normalizer::new();
    let mut outcomes = Vec::new();
    for (i, step) in scenario.file.steps.iter().enumerate() {
        let label = format!("step {i} ({})", step.label());
        let raw = match execute(target, step, &vars, &label).await {
            Ok(r) => r,
            Err(e) => return Run { scenario: scenario.id.clone(), outcomes, failure: Some(e.to_string()) },
        };
        let compare = step.compare();
        if compare == Compare::None {
            let ok = match step.expect_status {
                Some(s) => raw.status == s,
                // A wait returns only once it answered the status it waited for (an error when it ran out).
                None if step.wait.is_some() => true,
                None => (200..300).contains(&raw.status),
            };
            if !ok {
                let failure = format!("{label}: setup answered {} {}", raw.status, short_body(&raw.body));
                return Run { scenario: scenario.id.clone(), outcomes, failure: Some(failure) };
            }
        }
        for (var, ptr) in &step.capture {
            match pointer::get(&raw.body, ptr) {
                Some(Value::String(s)) => {
                    vars.insert(var.clone(), s.clone());
                }
                Some(v @ (Value::Number(_) | Value::Bool(_))) => {
                    vars.insert(var.clone(), v.to_string());
                }
                _ => {
                    let failure = format!("{label}: nothing to capture at {ptr} for {var}");
                    return Run { scenario: scenario.id.clone(), outcomes, failure: Some(failure) };
                }
            }
        }
        if compare == Compare::None {
            continue;
        }
        outcomes.push(outcome(i, step, raw, compare, &mut norm));
    }
    Run { scenario: scenario.id.clone(), outcomes, failure: None }
}

fn short_body(v: &Value) -> String {
    let s = v.to_string();
    s.chars().take(300).collect()
}

fn outcome(i: usize, step: &Step, mut raw: Raw, compare: Compare, norm: &mut Normalizer) -> Outcome {
    let name = step.label();
    if compare == Compare::Status {
        let reason = raw.body.get("reason").cloned().filter(|_| raw.body.get("kind") == Some(&json!("Status")));
        let body = reason.map(|r| json!({"reason": r})).unwrap_or(Value::Null);
        return Outcome {
            step: i,
            name,
            status: raw.status,
            content_type: None,
            warnings: vec![],
            body,
            events: None,
            observed_sequence: None,
        };
    }
    if step.sequence.is_some() {
        // Already reduced to status tuples: nothing server-specific is left to normalise.
        return Outcome {
            step: i,
            name,
            status: raw.status,
            content_type: raw.content_type.as_deref().map(normalize::content_type),
            warnings: vec![],
            body: raw.body,
            events: None,
            observed_sequence: raw.observed_sequence,
        };
    }
    norm.body(&mut raw.body);
    for p in &step.ignore {
        pointer::remove(&mut raw.body, p);
    }
    if !step.pointers.is_empty() && !raw.body.is_null() {
        raw.body = pointer::project(&raw.body, &step.pointers);
    }
    let events = raw.events.map(|evs| {
        evs.into_iter()
            .map(|mut e| {
                norm.event(&mut e);
                if let Some(obj) = e.get_mut("object") {
                    for p in &step.ignore {
                        pointer::remove(obj, p);
                    }
                    if !step.pointers.is_empty() {
                        *obj = pointer::project(obj, &step.pointers);
                    }
                }
                e
            })
            .collect()
    });
    let warnings = raw.warnings.iter().map(|w| norm.text(w)).collect();
    Outcome {
        step: i,
        name,
        status: raw.status,
        content_type: raw.content_type.as_deref().map(normalize::content_type),
        warnings,
        body: raw.body,
        events,
        observed_sequence: None,
    }
}

/// `${var}` replaced by its value; an unknown variable is a scenario bug.
fn substitute(s: &str, vars: &BTreeMap<String, String>, label: &str) -> Result<String, Error> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| Error::Request { step: label.into(), message: format!("unclosed ${{ in {s}") })?;
        let var = &after[..end];
        let value = vars
            .get(var)
            .ok_or_else(|| Error::Request { step: label.into(), message: format!("unknown variable {var}") })?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn substitute_value(v: &Value, vars: &BTreeMap<String, String>, label: &str) -> Result<Value, Error> {
    Ok(match v {
        Value::String(s) => Value::String(substitute(s, vars, label)?),
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute_value(x, vars, label)).collect::<Result<_, _>>()?),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| Ok((substitute(k, vars, label)?, substitute_value(x, vars, label)?)))
                .collect::<Result<_, Error>>()?,
        ),
        other => other.clone(),
    })
}

/// Percent-encodes a query component (everything but RFC 3986 unreserved characters).
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn body_bytes(step: &Step, vars: &BTreeMap<String, String>, label: &str) -> Result<Option<Vec<u8>>, Error> {
    let err = |message: String| Error::Request { step: label.into(), message };
    if let Some(v) = &step.body {
        let v = substitute_value(v, vars, label)?;
        return serde_json::to_vec(&v).map(Some).map_err(|e| err(e.to_string()));
    }
    if let Some(f) = &step.body_file {
        let path = workspace_dir().join(f);
        let text = std::fs::read_to_string(&path).map_err(|e| err(format!("{}: {e}", path.display())))?;
        let v: Value = serde_saphyr::from_str(&text).map_err(|e| err(format!("{}: {e}", path.display())))?;
        let v = substitute_value(&v, vars, label)?;
        return serde_json::to_vec(&v).map(Some).map_err(|e| err(e.to_string()));
    }
    if let Some(s) = &step.body_raw {
        return Ok(Some(substitute(s, vars, label)?.into_bytes()));
    }
    if let Some(b) = &step.body_base64 {
        let bytes = base64::engine::general_purpose::STANDARD.decode(b.trim()).map_err(|e| err(e.to_string()))?;
        return Ok(Some(bytes));
    }
    Ok(None)
}

fn request(
    step: &Step,
    vars: &BTreeMap<String, String>,
    label: &str,
) -> Result<http::Request<kube::client::Body>, Error> {
    let err = |message: String| Error::Request { step: label.into(), message };
    let mut uri = substitute(&step.path, vars, label)?;
    if !step.query.is_empty() {
        let q: Vec<String> = step
            .query
            .iter()
            .map(|(k, v)| Ok(format!("{}={}", encode(k), encode(&substitute(v, vars, label)?))))
            .collect::<Result<_, Error>>()?;
        uri = format!("{uri}?{}", q.join("&"));
    }
    let body = body_bytes(step, vars, label)?;
    let mut b = http::Request::builder().method(step.method.as_str()).uri(uri);
    // Both servers derive the default field manager from the User-Agent: give them one.
    if !step.headers.keys().any(|k| k.eq_ignore_ascii_case("user-agent")) {
        b = b.header("User-Agent", "conformance/v0.1.0 (linux/amd64)");
    }
    if !step.headers.keys().any(|k| k.eq_ignore_ascii_case("accept")) {
        b = b.header("Accept", "application/json");
    }
    for (k, v) in &step.headers {
        b = b.header(k.as_str(), substitute(v, vars, label)?);
    }
    if body.is_some() {
        b = b.header("Content-Type", step.content_type.as_deref().unwrap_or("application/json"));
    }
    if let Some(var) = step.token.as_deref().filter(|t| *t != "anonymous") {
        let token = vars.get(var).ok_or_else(|| err(format!("unknown token variable {var}")))?;
        b = b.header("Authorization", format!("Bearer {token}"));
    }
    b.body(kube::client::Body::from(body.unwrap_or_default())).map_err(|e| err(e.to_string()))
}

async fn execute(target: &Target, step: &Step, vars: &BTreeMap<String, String>, label: &str) -> Result<Raw, Error> {
    let Some(wait) = &step.wait else {
        return send(target, step, vars, label).await;
    };
    // A bounded poll for a condition the server reaches on its own, not a timed assertion.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait.timeout_seconds);
    loop {
        let raw = send(target, step, vars, label).await?;
        let value_ok = match (&wait.pointer, &wait.equals) {
            (Some(p), Some(want)) => pointer::get(&raw.body, p) == Some(want),
            (Some(p), None) => pointer::get(&raw.body, p).is_some(),
            _ => true,
        };
        if raw.status == wait.status && value_ok {
            return Ok(raw);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Request {
                step: label.into(),
                message: format!(
                    "waited {}s; last answer {} {}",
                    wait.timeout_seconds,
                    raw.status,
                    short_body(&raw.body)
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn send(target: &Target, step: &Step, vars: &BTreeMap<String, String>, label: &str) -> Result<Raw, Error> {
    let err = |message: String| Error::Request { step: label.into(), message };
    let req = request(step, vars, label)?;
    let client = if step.token.is_some() { target.bare() } else { target.admin() };
    let resp = client.send(req).await.map_err(|e| err(e.to_string()))?;
    let status = resp.status().as_u16();
    let headers = resp.headers();
    let content_type = headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
    let warnings = headers.get_all("warning").iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect();
    let mut body = resp.into_body();
    if let (Some(spec), 200) = (&step.sequence, status) {
        let (compared, observed) = read_sequence(&mut body, spec, label).await?;
        return Ok(Raw { status, content_type, warnings, body: compared, events: None, observed_sequence: observed });
    }
    // A watch the scenario did not expect to stream is read like one (1 event, 10 s): never an endless read.
    let is_watch = step.query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let spec = step.watch.clone().or_else(|| is_watch.then_some(WatchSpec { events: 1, timeout_seconds: 10 }));
    if let (Some(w), 200) = (spec, status) {
        let events = read_events(&mut body, w.events, Duration::from_secs(w.timeout_seconds), label).await?;
        return Ok(Raw {
            status,
            content_type,
            warnings,
            body: Value::Null,
            events: Some(events),
            observed_sequence: None,
        });
    }
    let bytes = body.collect_bytes().await.map_err(|e| err(e.to_string()))?;
    Ok(Raw { status, content_type, warnings, body: parse_body(&bytes), events: None, observed_sequence: None })
}

/// JSON when it parses; otherwise the text, or a note on binary bytes (protobuf answers).
fn parse_body(bytes: &Bytes) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
        return v;
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => Value::String(s.to_string()),
        Err(_) => Value::String("<binary>".into()),
    }
}

/// Reads a Deployment watch until the object settles (`spec.until`); the compared value and, for the normal form,
/// the distinct tuples seen. Not settled within `spec.timeout_seconds` is an error naming the last tuple.
async fn read_sequence(
    body: &mut kube::client::Body,
    spec: &SequenceSpec,
    label: &str,
) -> Result<(Value, Option<Vec<Value>>), Error> {
    let err = |message: String| Error::Request { step: label.into(), message };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(spec.timeout_seconds);
    let mut collector = Collector::default();
    let mut lines = Lines::default();
    loop {
        let Some(read) = lines.next(body, deadline).await.map_err(err)? else {
            let last = collector.tuples.last().map(Value::to_string).unwrap_or_else(|| "none".into());
            return Err(err(format!(
                "not settled ({:?}) within {}s or the watch ended; last status {last}",
                spec.until, spec.timeout_seconds
            )));
        };
        for line in read {
            let event: Value = serde_json::from_slice(&line).map_err(|e| err(format!("watch event: {e}")))?;
            let object = event.get("object").cloned().unwrap_or(Value::Null);
            match event.get("type").and_then(Value::as_str) {
                Some("ADDED" | "MODIFIED") => {}
                Some("BOOKMARK") => continue,
                _ => return Err(err(format!("watch event {}", short_body(&event)))),
            }
            collector.push(&object);
            if sequence::settled(&object, spec.until) {
                let observed = (spec.form == Form::Normal).then(|| collector.tuples.clone());
                return Ok((collector.compared(spec.form), observed));
            }
        }
    }
}

/// Reads newline-delimited watch events until `n` arrived, the stream ended, or `timeout` passed.
async fn read_events(
    body: &mut kube::client::Body,
    n: usize,
    timeout: Duration,
    label: &str,
) -> Result<Vec<Value>, Error> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut lines = Lines::default();
    let mut events = Vec::new();
    while events.len() < n {
        let read =
            lines.next(body, deadline).await.map_err(|message| Error::Request { step: label.into(), message })?;
        let Some(read) = read else { break };
        for line in read {
            events.push(
                serde_json::from_slice(&line).unwrap_or_else(|_| json!({"unparsed": String::from_utf8_lossy(&line)})),
            );
            if events.len() >= n {
                break;
            }
        }
    }
    Ok(events)
}

/// Newline-delimited watch events from a streamed body, as they arrive.
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
}

impl Lines {
    /// The complete, non-blank lines the next frame finished (possibly none); None when `deadline` passed or the
    /// stream ended.
    async fn next(
        &mut self,
        body: &mut kube::client::Body,
        deadline: tokio::time::Instant,
    ) -> Result<Option<Vec<Vec<u8>>>, String> {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) | Ok(None) => return Ok(None),
            Ok(Some(Err(e))) => return Err(e.to_string()),
            Ok(Some(Ok(f))) => f,
        };
        let mut lines = Vec::new();
        if let Ok(data) = frame.into_data() {
            self.buf.extend_from_slice(&data);
            while let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                if !line.iter().all(u8::is_ascii_whitespace) {
                    lines.push(line);
                }
            }
        }
        Ok(Some(lines))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_and_encodes() {
        let vars = BTreeMap::from([("ns".to_string(), "a".to_string())]);
        assert_eq!(
            substitute("/api/v1/namespaces/${ns}/pods", &vars, "t").ok().as_deref(),
            Some("/api/v1/namespaces/a/pods")
        );
        assert!(substitute("${nope}", &vars, "t").is_err());
        assert_eq!(encode("app in (a,b)"), "app%20in%20%28a%2Cb%29");
    }
}
