//! The operator's own figures, read from its /metrics text as Prometheus would: a histogram's buckets, and quantiles
//! estimated from them the way `histogram_quantile` does (linear within the bucket).

/// A histogram's cumulative bucket counts by upper bound, in ascending order (the last is +Inf).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Buckets(Vec<(f64, u64)>);

impl Buckets {
    /// The `name` histogram of an OpenMetrics text; empty if the text has none.
    pub fn parse(text: &str, name: &str) -> Buckets {
        let prefix = format!("{name}_bucket{{le=\"");
        let mut buckets: Vec<(f64, u64)> = text
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix(&prefix)?;
                let (le, count) = rest.split_once("\"}")?;
                let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
                Some((le, count.trim().parse().ok()?))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Buckets(buckets)
    }

    /// What was observed after `before` (the same histogram read earlier).
    pub fn since(&self, before: &Buckets) -> Buckets {
        Buckets(
            self.0
                .iter()
                .map(|&(le, count)| {
                    let earlier = before.0.iter().find(|(l, _)| *l == le).map_or(0, |(_, c)| *c);
                    (le, count.saturating_sub(earlier))
                })
                .collect(),
        )
    }

    pub fn count(&self) -> u64 {
        self.0.last().map_or(0, |(_, c)| *c)
    }

    /// The `q` quantile (0..=1), linear within its bucket; the highest finite bound when it falls in +Inf.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = q * total as f64;
        let mut lower = (0.0, 0u64);
        for &(le, count) in &self.0 {
            if count as f64 >= rank {
                if le.is_infinite() {
                    return Some(lower.0);
                }
                let inside = (count - lower.1) as f64;
                let share = if inside > 0.0 { (rank - lower.1 as f64) / inside } else { 1.0 };
                return Some(lower.0 + (le - lower.0) * share);
            }
            lower = (le, count);
        }
        Some(lower.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# TYPE lag_seconds histogram\n\
        lag_seconds_sum 1.5\n\
        lag_seconds_count 100\n\
        lag_seconds_bucket{le=\"0.001\"} 10\n\
        lag_seconds_bucket{le=\"0.002\"} 60\n\
        lag_seconds_bucket{le=\"0.004\"} 98\n\
        lag_seconds_bucket{le=\"+Inf\"} 100\n\
        other_bucket{le=\"0.001\"} 7\n";

    #[test]
    fn quantiles_are_linear_within_their_bucket() {
        let b = Buckets::parse(TEXT, "lag_seconds");
        assert_eq!(b.count(), 100);
        assert_eq!(b.quantile(0.05), Some(0.0005));
        // Rank 50 is 40 of the 50 between 1 and 2 ms.
        assert!((b.quantile(0.5).unwrap_or(0.0) - 0.0018).abs() < 1e-12);
        // Rank 99 is beyond the last finite bound: that bound is all that is known.
        assert_eq!(b.quantile(0.99), Some(0.004));
    }

    #[test]
    fn what_was_observed_since_an_earlier_read_is_the_difference() {
        let before = Buckets::parse(TEXT, "lag_seconds");
        let after = Buckets::parse(&TEXT.replace("} 98", "} 148").replace("} 100", "} 150"), "lag_seconds");
        let since = after.since(&before);
        assert_eq!(since.count(), 50);
        // All 50 lie between 2 and 4 ms.
        assert!((since.quantile(0.5).unwrap_or(0.0) - 0.003).abs() < 1e-12);
        assert_eq!(Buckets::default().quantile(0.5), None);
    }
}
