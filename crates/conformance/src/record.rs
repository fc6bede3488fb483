//! Recorded answers (`recorded/<area>/<name>.json`), the comparison of a kubesim run with them, the list of
//! known deviations (`docs/kubesim-deviations.md`) and the fidelity figure.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::diff::diff;
use crate::runner::Run;
use crate::scenario::{Scenario, crate_dir, workspace_dir};

/// One scenario's normalised answers from the real server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recording {
    /// The server's `/version` gitVersion.
    pub server: String,
    /// RFC 3339 time of recording.
    pub recorded_at: String,
    /// For scenarios recorded several times (controller sequences): whether the runs agreed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stability: Option<Stability>,
    #[serde(flatten)]
    pub run: Run,
}

/// How far repeated recordings of one scenario on the real server agreed with the stored (first) run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stability {
    pub runs: usize,
    /// Runs whose compared answers (for sequences: the compared form) equal the first run's, the first included.
    pub compared_identical: usize,
    /// Runs whose raw sequences of distinct status tuples equal the first run's, the first included.
    pub raw_identical: usize,
    /// The differences of the compared answers, per run that differed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<String>,
}

impl std::fmt::Display for Stability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{n} runs on the real server: the compared form identical in {c}/{n}, the raw sequence of distinct \
             status tuples in {r}/{n}",
            n = self.runs,
            c = self.compared_identical,
            r = self.raw_identical
        )?;
        for d in &self.differences {
            write!(f, " [{d}]")?;
        }
        Ok(())
    }
}

pub fn recorded_dir() -> PathBuf {
    crate_dir().join("recorded")
}

pub fn recording_path(id: &str) -> PathBuf {
    recorded_dir().join(format!("{id}.json"))
}

pub fn load(id: &str) -> Result<Option<Recording>, Error> {
    let path = recording_path(id);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(Error::Io { path: path.display().to_string(), source }),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| Error::Recording { path: path.display().to_string(), message: e.to_string() })
}

pub fn store(rec: &Recording) -> Result<(), Error> {
    let path = recording_path(&rec.run.scenario);
    let io = |source| Error::Io { path: path.display().to_string(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut text = serde_json::to_string_pretty(rec)
        .map_err(|e| Error::Recording { path: path.display().to_string(), message: e.to_string() })?;
    text.push('\n');
    std::fs::write(&path, text).map_err(io)
}

/// Every difference between the real server's run and kubesim's, one line each (empty: identical).
pub fn compare(real: &Run, sim: &Run) -> Vec<String> {
    let mut out = Vec::new();
    if real.failure != sim.failure {
        out.push(format!(
            "run: real {}, kubesim {}",
            real.failure.as_deref().unwrap_or("completed"),
            sim.failure.as_deref().unwrap_or("completed")
        ));
    }
    let sims: BTreeMap<usize, _> = sim.outcomes.iter().map(|o| (o.step, o)).collect();
    for r in &real.outcomes {
        let Some(s) = sims.get(&r.step) else {
            out.push(format!("step {} ({}): kubesim did not get there", r.step, r.name));
            continue;
        };
        let at = format!("step {} ({})", r.step, r.name);
        let mut lines = Vec::new();
        if r.status != s.status {
            lines.push(format!("status: real {}, kubesim {}", r.status, s.status));
        }
        if r.content_type != s.content_type {
            lines.push(format!("content-type: real {:?}, kubesim {:?}", r.content_type, s.content_type));
        }
        if r.warnings != s.warnings {
            lines.push(format!("warnings: real {:?}, kubesim {:?}", r.warnings, s.warnings));
        }
        diff("body", &r.body, &s.body, &mut lines);
        match (&r.events, &s.events) {
            (Some(a), Some(b)) => {
                diff("events", &serde_json::Value::from(a.clone()), &serde_json::Value::from(b.clone()), &mut lines)
            }
            (None, None) => {}
            (a, b) => lines.push(format!("events: real {:?}, kubesim {:?}", a.is_some(), b.is_some())),
        }
        out.extend(lines.into_iter().map(|l| format!("{at} {l}")));
    }
    let real_steps: BTreeSet<usize> = real.outcomes.iter().map(|o| o.step).collect();
    for s in &sim.outcomes {
        if !real_steps.contains(&s.step) {
            out.push(format!("step {} ({}): only kubesim got there", s.step, s.name));
        }
    }
    out
}

/// The scenarios `docs/kubesim-deviations.md` lists as known differences: table rows starting with
/// `` | `area/name` | ``, each with its reason.
pub fn known_deviations() -> Result<BTreeMap<String, String>, Error> {
    let path = workspace_dir().join("docs/kubesim-deviations.md");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(source) => return Err(Error::Io { path: path.display().to_string(), source }),
    };
    Ok(parse_deviations(&text))
}

fn parse_deviations(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("| `")?;
            let (id, rest) = rest.split_once('`')?;
            let reason = rest.trim_start_matches([' ', '|']).trim_end_matches(['|', ' ']);
            Some((id.to_string(), reason.to_string()))
        })
        .collect()
}

/// One scenario's verdict.
#[derive(Debug, Clone)]
pub enum Verdict {
    Identical,
    Different(Vec<String>),
    /// No recording: the real server's answer is unknown.
    Unrecorded,
}

/// The figure: identical scenarios out of all, per area, and every difference.
pub fn report(scenarios: &[Scenario], verdicts: &[Verdict], known: &BTreeMap<String, String>) -> String {
    let mut per_area: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    let mut details = String::new();
    for (s, v) in scenarios.iter().zip(verdicts) {
        let e = per_area.entry(s.area.as_str()).or_default();
        e.1 += 1;
        match v {
            Verdict::Identical => e.0 += 1,
            Verdict::Unrecorded => e.2 += 1,
            Verdict::Different(lines) => {
                let tag = if known.contains_key(&s.id) { " (known deviation)" } else { "" };
                let _ = writeln!(details, "\n{}{tag}", s.id);
                for l in lines {
                    let _ = writeln!(details, "  {l}");
                }
            }
        }
    }
    let (mut same, mut all, mut unrec) = (0, 0, 0);
    let mut out = String::from("area                 identical / all\n");
    for (area, (s, a, u)) in &per_area {
        let note = if *u > 0 { format!("  ({u} unrecorded)") } else { String::new() };
        let _ = writeln!(out, "{area:<20} {s:>4} / {a:<4}{note}");
        same += s;
        all += a;
        unrec += u;
    }
    let pct = if all > 0 { 100.0 * same as f64 / all as f64 } else { 0.0 };
    let _ = writeln!(out, "{:<20} {same:>4} / {all:<4} = {pct:.1}%", "total");
    if unrec > 0 {
        let _ = writeln!(out, "{unrec} scenarios have no recording (not counted as identical)");
    }
    if !details.is_empty() {
        out.push_str("\ndifferences:");
        out.push_str(&details);
    }
    out
}

/// Where scenario files live.
pub fn scenarios_dir() -> PathBuf {
    crate_dir().join("scenarios")
}

pub fn display(path: &Path) -> String {
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deviation_rows() {
        let md = "# x\n| scenario | reason |\n|---|---|\n| `crds/cel-quantity` | the cel crate lacks quantity() |\n";
        let d = parse_deviations(md);
        assert_eq!(d.get("crds/cel-quantity").map(String::as_str), Some("the cel crate lacks quantity()"));
        assert_eq!(d.len(), 1);
    }
}
