//! The operator's own figures, read from its /metrics text as Prometheus would: a histogram's buckets, and quantiles
//! estimated from them the way `histogram_quantile` does (linear within the bucket).

/// A histogram's cumulative bucket counts by upper bound, in ascending order (the last is +Inf).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Buckets(Vec<(f64, u64)>);

impl Buckets {
    /// The `name` histogram of an OpenMetrics text; empty if the text has none.
    pub fn parse(text: &str, name: &str) -> Buckets {
        Buckets::parse_where(text, name, &[])
    }

    /// The `name` histogram's series whose labels include every one of `labels`, summed bucket by bucket (a
    /// server splits one kind of request over series by labels not asked for, such as `component`).
    pub fn parse_where(text: &str, name: &str, labels: &[(&str, &str)]) -> Buckets {
        let prefix = format!("{name}_bucket{{");
        let mut sums: Vec<(f64, u64)> = Vec::new();
        for line in text.lines() {
            let Some((set, count)) = line.strip_prefix(&prefix).and_then(|rest| rest.rsplit_once("} ")) else {
                continue;
            };
            let label = |key: &str| set.split("\",").find_map(|pair| pair.strip_prefix(key)?.strip_prefix("=\""));
            let value = |key: &str| label(key).map(|v| v.trim_end_matches('"'));
            if !labels.iter().all(|(key, want)| value(key) == Some(want)) {
                continue;
            }
            let Some(le) = value("le").and_then(|le| if le == "+Inf" { Some(f64::INFINITY) } else { le.parse().ok() })
            else {
                continue;
            };
            let Ok(count) = count.trim().parse::<f64>() else { continue };
            match sums.iter_mut().find(|(l, _)| *l == le) {
                Some((_, sum)) => *sum += count as u64,
                None => sums.push((le, count as u64)),
            }
        }
        sums.sort_by(|a, b| a.0.total_cmp(&b.0));
        Buckets(sums)
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
    fn a_server_histogram_is_the_sum_of_the_series_with_the_labels_asked_for() {
        let text = "apiserver_request_duration_seconds_bucket{component=\"apiserver\",resource=\"microservices\",subresource=\"status\",verb=\"PATCH\",le=\"0.05\"} 3\n\
            apiserver_request_duration_seconds_bucket{component=\"apiserver\",resource=\"microservices\",subresource=\"status\",verb=\"PATCH\",le=\"+Inf\"} 4\n\
            apiserver_request_duration_seconds_bucket{component=\"\",resource=\"microservices\",subresource=\"status\",verb=\"PATCH\",le=\"0.05\"} 1\n\
            apiserver_request_duration_seconds_bucket{component=\"\",resource=\"microservices\",subresource=\"status\",verb=\"PATCH\",le=\"+Inf\"} 1\n\
            apiserver_request_duration_seconds_bucket{component=\"apiserver\",resource=\"microservices\",subresource=\"\",verb=\"PATCH\",le=\"+Inf\"} 9\n";
        let patch_status = [("resource", "microservices"), ("subresource", "status"), ("verb", "PATCH")];
        let b = Buckets::parse_where(text, "apiserver_request_duration_seconds", &patch_status);
        assert_eq!(b, Buckets(vec![(0.05, 4), (f64::INFINITY, 5)]));
        assert_eq!(
            Buckets::parse_where(text, "apiserver_request_duration_seconds", &[("verb", "GET")]),
            Buckets::default()
        );
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
