//! The operator as a child process (the `bench-operator` binary beside this one), and what /proc says about it.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::Serialize;

use crate::error::{BenchError, Result};
use crate::fixture::NAMESPACE;

/// The operator's binary, built beside `bench` from this crate: it links the operator and nothing of the emulator.
const OPERATOR_BINARY: &str = "bench-operator";

/// Linux reports utime/stime in USER_HZ ticks, which is 100 on every architecture the kernel exposes to userspace.
const USER_HZ: f64 = 100.0;

/// CPU time and memory of the operator process, from /proc/PID/stat and /proc/PID/status.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Usage {
    pub cpu_seconds: f64,
    /// VmHWM: the peak resident set size over the process's life.
    pub peak_rss_bytes: u64,
    /// VmRSS: the resident set size now.
    pub rss_bytes: u64,
}

impl Usage {
    pub fn peak_rss_mib(&self) -> f64 {
        self.peak_rss_bytes as f64 / (1024.0 * 1024.0)
    }

    pub fn rss_mib(&self) -> f64 {
        self.rss_bytes as f64 / (1024.0 * 1024.0)
    }
}

pub struct OperatorProcess {
    child: Child,
    /// The last reconcile count the child printed; -1 until it printed one.
    reconciles: Arc<AtomicI64>,
    /// Where the child serves /metrics, once it said.
    metrics: Arc<OnceLock<SocketAddr>>,
}

impl OperatorProcess {
    /// Starts `bench-operator` against `kubeconfig`; the child prints its reconcile count whenever it moved.
    pub fn spawn(kubeconfig: &Path, resync: Duration) -> Result<Self> {
        let bench = std::env::current_exe().map_err(BenchError::io("cannot find this executable"))?;
        let exe = bench.with_file_name(OPERATOR_BINARY);
        if !exe.is_file() {
            return Err(BenchError::Child(format!(
                "cannot start: {} is missing; build it with `cargo build --release --locked -p microservice-bench` \
                 (which builds `bench` and `bench-operator` together)",
                exe.display()
            )));
        }
        // A profiler in front of the operator (e.g. BENCH_OPERATOR_WRAPPER=heaptrack): its figures then include the
        // profiler's own, so they are for finding where time or memory goes, not for the report.
        let mut command = match std::env::var_os("BENCH_OPERATOR_WRAPPER") {
            Some(wrapper) => {
                let mut command = Command::new(wrapper);
                command.arg(exe);
                command
            }
            None => Command::new(exe),
        };
        let mut child = command
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--namespace")
            .arg(NAMESPACE)
            .arg("--resync-interval")
            .arg(resync.as_secs().max(1).to_string())
            .arg("--report")
            .env("RUST_LOG", std::env::var("BENCH_OPERATOR_LOG").unwrap_or_else(|_| "error".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(BenchError::io("cannot start the operator process"))?;
        let reconciles = Arc::new(AtomicI64::new(-1));
        let metrics = Arc::new(OnceLock::new());
        if let Some(stdout) = child.stdout.take() {
            let (seen, served) = (reconciles.clone(), metrics.clone());
            // Drained to its end, so the child never blocks on a full pipe; a profiler in front of it may print
            // lines of its own, which are passed on.
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(std::result::Result::ok) {
                    if let Some(n) = parse_reconciles(&line) {
                        seen.store(n, Ordering::Relaxed);
                    } else if let Some(address) = line.strip_prefix("metrics ").and_then(|a| a.trim().parse().ok()) {
                        let _ = served.set(address);
                    } else {
                        println!("{line}");
                    }
                }
            });
        }
        Ok(OperatorProcess { child, reconciles, metrics })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reconciles the operator has finished (None until it first told its count).
    pub fn reconciles(&self) -> Option<i64> {
        let n = self.reconciles.load(Ordering::Relaxed);
        (n >= 0).then_some(n)
    }

    /// The child's /metrics text now (empty if it cannot be read).
    pub async fn metrics(&self) -> String {
        let Some(address) = self.metrics.get() else { return String::new() };
        microservice_testkit::http::get(*address, "/metrics")
            .await
            .filter(|a| a.status == 200)
            .map(|a| a.body)
            .unwrap_or_default()
    }

    /// Fails when the child has exited (it should run until killed).
    pub fn check_alive(&mut self) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                Err(BenchError::Child(format!("exited early ({status}); run with BENCH_OPERATOR_LOG=info to see why")))
            }
            Err(e) => Err(BenchError::Child(format!("cannot be waited for: {e}"))),
        }
    }

    pub fn usage(&self) -> Result<Usage> {
        usage_of(self.pid())
    }

    /// SIGKILL (no graceful shutdown: the restart scenario starts over a killed operator). Returns the usage just
    /// before the kill.
    pub fn kill(mut self) -> Result<Usage> {
        let usage = self.usage();
        let _ = self.child.kill();
        let _ = self.child.wait();
        usage
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn usage_of(pid: u32) -> Result<Usage> {
    let stat =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(BenchError::io("cannot read /proc/PID/stat"))?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(BenchError::io("cannot read /proc/PID/status"))?;
    let cpu_seconds =
        parse_cpu_seconds(&stat).ok_or_else(|| BenchError::Child(format!("has an unreadable /proc/{pid}/stat")))?;
    Ok(Usage {
        cpu_seconds,
        peak_rss_bytes: status_kib(&status, "VmHWM:").unwrap_or(0) * 1024,
        rss_bytes: status_kib(&status, "VmRSS:").unwrap_or(0) * 1024,
    })
}

/// The count of a `reconciles N` line.
fn parse_reconciles(line: &str) -> Option<i64> {
    line.strip_prefix("reconciles ")?.trim().parse().ok()
}

/// utime + stime (fields 14 and 15) of /proc/PID/stat; the command name (field 2) may contain spaces and
/// parentheses, so fields are counted from the last `)`.
fn parse_cpu_seconds(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}

fn status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconcile_count_is_read_from_its_line_only() {
        assert_eq!(parse_reconciles("reconciles 1042"), Some(1042));
        assert_eq!(parse_reconciles("reconciles x"), None);
        assert_eq!(parse_reconciles("heaptrack output will be written to ..."), None);
    }

    #[test]
    fn cpu_time_is_counted_after_the_command_name() {
        let stat = "4242 (bench (op) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 75 0 0 20 0 9 0 100 0 0";
        assert_eq!(parse_cpu_seconds(stat), Some(3.25));
    }

    #[test]
    fn reads_this_process() {
        let usage = usage_of(std::process::id()).unwrap();
        assert!(usage.peak_rss_bytes >= usage.rss_bytes && usage.rss_bytes > 0);
    }
}
