//! Scenarios as data: one YAML file per scenario under `scenarios/<area>/<name>.yaml`, a sequence of HTTP steps.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::Error;

/// One scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// What the scenario shows, one line.
    pub description: String,
    /// The namespace the scenario works in (`${ns}` in its steps); `cf-<area>-<name>` when absent.
    #[serde(default)]
    pub namespace: Option<String>,
    pub steps: Vec<Step>,
}

/// What of a step's answer is compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compare {
    /// Status, content type, Warning headers and the normalised body (or watch events).
    #[default]
    Full,
    /// The status code only (and, for Status bodies, the reason).
    Status,
    /// Nothing: a setup step; it must answer 2xx (or `expect_status`).
    None,
}

/// Read a watch until this many events arrived, or the timeout passed (bounded, never a sleep).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchSpec {
    pub events: usize,
    #[serde(default = "default_watch_timeout")]
    pub timeout_seconds: u64,
}

fn default_watch_timeout() -> u64 {
    10
}

/// Repeat the request until it answers `status` (and the value at `pointer` equals `equals`), at most
/// `timeout_seconds`: for what servers do asynchronously (CRD establishment, GC, namespace deletion).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitSpec {
    #[serde(default = "default_wait_status")]
    pub status: u16,
    #[serde(default)]
    pub pointer: Option<String>,
    #[serde(default)]
    pub equals: Option<Value>,
    #[serde(default = "default_wait_timeout")]
    pub timeout_seconds: u64,
}

fn default_wait_status() -> u16 {
    200
}

fn default_wait_timeout() -> u64 {
    60
}

/// One HTTP request and what to compare of its answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// A short label for diffs.
    #[serde(default)]
    pub name: Option<String>,
    /// A setup step: not compared (shorthand for `compare: none`).
    #[serde(default)]
    pub setup: bool,
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub query: BTreeMap<String, String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The body's content type; `application/json` when a body is given and this is not.
    #[serde(default)]
    pub content_type: Option<String>,
    /// A body written as YAML, sent as JSON.
    #[serde(default)]
    pub body: Option<Value>,
    /// A YAML file (relative to the workspace root), sent as JSON.
    #[serde(default)]
    pub body_file: Option<String>,
    /// A body sent verbatim (YAML for apply-patch+yaml, malformed JSON, ...).
    #[serde(default)]
    pub body_raw: Option<String>,
    /// Bytes sent verbatim (protobuf bodies as kubectl sends them), base64.
    #[serde(default)]
    pub body_base64: Option<String>,
    /// The variable holding the bearer token to present; `anonymous` presents none. Default: the admin's.
    #[serde(default)]
    pub token: Option<String>,
    /// Variables taken from the answer: name → JSON pointer (`[key=value]` segments select list items).
    #[serde(default)]
    pub capture: BTreeMap<String, String>,
    #[serde(default)]
    pub compare: Option<Compare>,
    /// Compare only these parts of the body.
    #[serde(default)]
    pub pointers: Vec<String>,
    /// Leave these parts of the body out of the comparison (what a server's configuration decides).
    #[serde(default)]
    pub ignore: Vec<String>,
    /// For setup steps: the status that counts as success (default any 2xx).
    #[serde(default)]
    pub expect_status: Option<u16>,
    #[serde(default)]
    pub watch: Option<WatchSpec>,
    #[serde(default)]
    pub wait: Option<WaitSpec>,
    /// Watch one Deployment (the path is a watch from a captured resourceVersion) and compare the sequence of its
    /// status values until it settles: see [`crate::sequence`].
    #[serde(default)]
    pub sequence: Option<crate::sequence::SequenceSpec>,
}

impl Step {
    pub fn compare(&self) -> Compare {
        match self.compare {
            Some(c) => c,
            None if self.setup || self.wait.is_some() => Compare::None,
            None => Compare::Full,
        }
    }

    /// A label for reports: the name, or `METHOD path`.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| format!("{} {}", self.method, self.path))
    }
}

/// A loaded scenario with its identity.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// `<area>/<name>`.
    pub id: String,
    pub area: String,
    pub file: ScenarioFile,
}

impl Scenario {
    pub fn namespace(&self) -> String {
        match &self.file.namespace {
            Some(ns) => ns.clone(),
            None => namespace_for(&self.id),
        }
    }
}

/// `cf-<area>-<name>`, made a valid namespace name (DNS label, at most 63 characters).
pub fn namespace_for(id: &str) -> String {
    let mut ns: String = format!("cf-{id}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect();
    ns.truncate(63);
    ns.trim_end_matches('-').to_string()
}

/// The crate's directory (scenarios, recordings), known at build time.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace root (for `body_file`).
pub fn workspace_dir() -> PathBuf {
    crate_dir().join("../..")
}

/// Every scenario under `dir` (`<area>/<name>.yaml`), sorted by id.
pub fn load_all(dir: &Path) -> Result<Vec<Scenario>, Error> {
    let mut out = Vec::new();
    let areas = std::fs::read_dir(dir).map_err(|source| Error::Io { path: dir.display().to_string(), source })?;
    for area in areas {
        let area = area.map_err(|source| Error::Io { path: dir.display().to_string(), source })?;
        if !area.path().is_dir() {
            continue;
        }
        let area_name = area.file_name().to_string_lossy().to_string();
        let files = std::fs::read_dir(area.path())
            .map_err(|source| Error::Io { path: area.path().display().to_string(), source })?;
        for f in files {
            let f = f.map_err(|source| Error::Io { path: area.path().display().to_string(), source })?;
            let path = f.path();
            if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            let name = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
            out.push(load(&path, &area_name, &name)?);
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

fn load(path: &Path, area: &str, name: &str) -> Result<Scenario, Error> {
    let text =
        std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
    let file: ScenarioFile = serde_saphyr::from_str(&text)
        .map_err(|e| Error::Scenario { path: path.display().to_string(), message: e.to_string() })?;
    if file.steps.is_empty() {
        return Err(Error::Scenario { path: path.display().to_string(), message: "no steps".into() });
    }
    Ok(Scenario { id: format!("{area}/{name}"), area: area.to_string(), file })
}
