//! A scenario's figures, printed as a table with the target beside each and a plain PASS or MISSED, and written
//! as JSON under `target/bench/`.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{BenchError, Result};

#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub metric: String,
    pub value: String,
    /// The number behind `value`, for machines.
    pub number: Option<f64>,
    pub target: Option<String>,
    /// None when the figure has no target.
    pub pass: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    pub n: usize,
    pub figures: Vec<Figure>,
    pub notes: Vec<String>,
}

impl Report {
    pub fn new(scenario: &str, n: usize) -> Report {
        Report { scenario: scenario.to_string(), n, figures: Vec::new(), notes: Vec::new() }
    }

    /// A figure without a target.
    pub fn info(&mut self, metric: &str, value: String, number: Option<f64>) {
        self.figures.push(Figure { metric: metric.into(), value, number, target: None, pass: None });
    }

    /// A figure with its target and verdict.
    pub fn target(&mut self, metric: &str, value: String, number: f64, target: &str, pass: bool) {
        self.figures.push(Figure {
            metric: metric.into(),
            value,
            number: Some(number),
            target: Some(target.into()),
            pass: Some(pass),
        });
    }

    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    pub fn missed(&self) -> usize {
        self.figures.iter().filter(|f| f.pass == Some(false)).count()
    }

    pub fn print(&self) {
        println!("\n== {} (N = {}) ==", self.scenario, self.n);
        let w0 = self.figures.iter().map(|f| f.metric.len()).max().unwrap_or(0).max(6);
        let w1 = self.figures.iter().map(|f| f.value.len()).max().unwrap_or(0).max(5);
        let w2 = self.figures.iter().filter_map(|f| f.target.as_ref().map(String::len)).max().unwrap_or(0).max(6);
        println!("{:<w0$}  {:>w1$}  {:<w2$}  verdict", "metric", "value", "target");
        for f in &self.figures {
            let verdict = match f.pass {
                Some(true) => "PASS",
                Some(false) => "MISSED",
                None => "",
            };
            println!("{:<w0$}  {:>w1$}  {:<w2$}  {verdict}", f.metric, f.value, f.target.as_deref().unwrap_or(""));
        }
        for n in &self.notes {
            println!("  note: {n}");
        }
    }

    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let path = dir.join(format!("{}-{}.json", self.scenario, self.n));
        write_json(&path, "a report", self)?;
        Ok(path)
    }
}

/// `value` as pretty JSON with a final newline at `path`; `what` names it in an error.
pub fn write_json<T: Serialize + ?Sized>(path: &Path, what: &str, value: &T) -> Result<()> {
    let body = serde_json::to_string_pretty(value).map_err(BenchError::json(what))?;
    std::fs::write(path, body + "\n").map_err(BenchError::io(format!("cannot write {}", path.display())))
}

/// Percentile by nearest rank of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!(percentile(&samples, 50.0), 100.0);
        assert_eq!(percentile(&samples, 99.0), 198.0);
        assert_eq!(percentile(&samples, 100.0), 200.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
    }

    #[test]
    fn counts_missed_targets() {
        let mut r = Report::new("converge", 10);
        r.target("requests per CR", "3.0".into(), 3.0, "<= 4", true);
        r.target("peak RSS", "50 MiB".into(), 50.0, "< 40 MiB", false);
        r.info("time", "1 s".into(), Some(1.0));
        assert_eq!(r.missed(), 1);
    }
}
