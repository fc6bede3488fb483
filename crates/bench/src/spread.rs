//! `--repeat`: the same scenarios measured several times, and how far apart each figure landed. On a small shared
//! machine one run's verdict can flip from run to run; the spread says whether a figure is a result or luck.

use serde::Serialize;

use crate::report::{Figure, Report};

/// One figure over the rounds that measured it. The values are the rounds' own texts (units and all) of the
/// smallest, the median (by nearest rank, so a measured value) and the largest number.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    pub scenario: String,
    pub n: usize,
    pub metric: String,
    /// Rounds that reported this figure with a number.
    pub rounds: usize,
    pub min: String,
    pub median: String,
    pub max: String,
    pub target: Option<String>,
    /// Rounds that met the target, when it has one.
    pub passed: Option<usize>,
}

/// Every numeric figure of `rounds`, in the order the first round to report it printed it.
pub fn spread(rounds: &[Vec<Report>]) -> Vec<Spread> {
    let mut keys: Vec<(&str, usize, &str)> = Vec::new();
    for report in rounds.iter().flatten() {
        for figure in report.figures.iter().filter(|f| f.number.is_some()) {
            let key = (report.scenario.as_str(), report.n, figure.metric.as_str());
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys.into_iter()
        .map(|(scenario, n, metric)| {
            let mut seen: Vec<&Figure> = rounds
                .iter()
                .filter_map(|round| {
                    round
                        .iter()
                        .filter(|r| r.scenario == scenario && r.n == n)
                        .flat_map(|r| &r.figures)
                        .find(|f| f.metric == metric && f.number.is_some())
                })
                .collect();
            seen.sort_by(|a, b| a.number.unwrap_or(f64::NAN).total_cmp(&b.number.unwrap_or(f64::NAN)));
            let at = |i: usize| seen.get(i).map_or_else(String::new, |f| f.value.clone());
            let judged: Vec<bool> = seen.iter().filter_map(|f| f.pass).collect();
            Spread {
                scenario: scenario.to_string(),
                n,
                metric: metric.to_string(),
                rounds: seen.len(),
                min: at(0),
                median: at(seen.len().saturating_sub(1) / 2),
                max: at(seen.len().saturating_sub(1)),
                target: seen.iter().find_map(|f| f.target.clone()),
                passed: (!judged.is_empty()).then(|| judged.iter().filter(|p| **p).count()),
            }
        })
        .collect()
}

/// The spread as tables, one per scenario and N.
pub fn print(spreads: &[Spread], rounds: usize) {
    println!("\n== spread over {rounds} rounds (min / median / max; verdicts PASS in k of the rounds) ==");
    let w0 = spreads.iter().map(|s| s.metric.len()).max().unwrap_or(0).max(6);
    let width = |pick: fn(&Spread) -> &str| spreads.iter().map(|s| pick(s).len()).max().unwrap_or(0).max(3);
    let (w1, w2, w3) = (width(|s| &s.min), width(|s| &s.median), width(|s| &s.max));
    let mut heading = None;
    for s in spreads {
        if heading != Some((&s.scenario, s.n)) {
            heading = Some((&s.scenario, s.n));
            println!("\n{} (N = {})", s.scenario, s.n);
            println!("{:<w0$}  {:>w1$}  {:>w2$}  {:>w3$}  verdicts", "metric", "min", "median", "max");
        }
        let verdicts = match (&s.target, s.passed) {
            (Some(target), Some(passed)) => format!("{target}: PASS {passed}/{}", s.rounds),
            _ if s.rounds < rounds => format!("(in {} of {rounds} rounds)", s.rounds),
            _ => String::new(),
        };
        println!("{:<w0$}  {:>w1$}  {:>w2$}  {:>w3$}  {verdicts}", s.metric, s.min, s.median, s.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(time_s: f64, p99_ms: f64) -> Vec<Report> {
        let mut r = Report::new("converge", 1000);
        r.info("time until all Ready", format!("{time_s:.2} s"), Some(time_s));
        r.target("Ready latency p99", format!("{p99_ms:.1} ms"), p99_ms, "< 100 ms", p99_ms < 100.0);
        r.info("no number", "text".into(), None);
        vec![r]
    }

    #[test]
    fn each_figure_gets_its_smallest_median_and_largest_measured_text() {
        let rounds = [round(12.25, 47.1), round(11.10, 131.2), round(11.32, 54.8)];
        let spreads = spread(&rounds);
        assert_eq!(spreads.len(), 2, "a figure without a number has no spread");
        assert_eq!(
            (spreads[0].min.as_str(), spreads[0].median.as_str(), spreads[0].max.as_str()),
            ("11.10 s", "11.32 s", "12.25 s")
        );
        assert_eq!(spreads[0].passed, None);
        assert_eq!((spreads[1].metric.as_str(), spreads[1].rounds), ("Ready latency p99", 3));
        assert_eq!(spreads[1].passed, Some(2), "one of the three rounds missed the target");
        assert_eq!(spreads[1].target.as_deref(), Some("< 100 ms"));
    }

    #[test]
    fn the_median_of_an_even_count_is_the_lower_measured_value() {
        let spreads = spread(&[round(4.0, 1.0), round(1.0, 1.0), round(3.0, 1.0), round(2.0, 1.0)]);
        assert_eq!(spreads[0].median, "2.00 s");
    }

    #[test]
    fn a_figure_some_rounds_lack_counts_only_the_rounds_that_have_it() {
        let mut second = round(2.0, 50.0);
        second[0].figures.remove(0);
        let mut other_n = Report::new("converge", 10);
        other_n.info("time until all Ready", "0.50 s".into(), Some(0.5));
        second.push(other_n);
        let spreads = spread(&[round(1.0, 40.0), second]);
        let time_1000 = spreads.iter().find(|s| s.n == 1000 && s.metric == "time until all Ready").unwrap();
        assert_eq!((time_1000.rounds, time_1000.min.as_str()), (1, "1.00 s"));
        let time_10 = spreads.iter().find(|s| s.n == 10).unwrap();
        assert_eq!((time_10.rounds, time_10.max.as_str()), (1, "0.50 s"));
        assert_eq!(spreads.len(), 3);
    }
}
