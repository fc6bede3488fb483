//! One control-plane process: started with its output in a log file, killed when dropped.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::Error;

pub(super) struct Process {
    pub name: &'static str,
    binary: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Process {
    pub fn start(name: &'static str, binary: PathBuf, args: Vec<String>, log_dir: &Path) -> Result<Process, Error> {
        let mut process = Process { name, binary, args, log: log_dir.join(format!("{name}.log")), child: None };
        process.spawn()?;
        Ok(process)
    }

    fn spawn(&mut self) -> Result<(), Error> {
        let open = |append: bool| {
            File::options()
                .create(true)
                .append(append)
                .write(true)
                .open(&self.log)
                .map_err(|e| Error::Setup(format!("cannot open {}: {e}", self.log.display())))
        };
        let stdout = open(true)?;
        let stderr = open(true)?;
        let child = Command::new(&self.binary)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| Error::Setup(format!("cannot start {} ({}): {e}", self.name, self.binary.display())))?;
        self.child = Some(child);
        Ok(())
    }

    /// SIGKILL and wait: a crash, not a shutdown.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the process and starts it again with the same arguments (and the same data).
    pub fn restart(&mut self) -> Result<(), Error> {
        self.kill();
        self.spawn()
    }

    /// The error for a process that exited or never became ready, with the end of its log.
    pub fn failure(&mut self, what: &str) -> Error {
        let exited = match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(status))) => format!(" (it exited: {status})"),
            _ => String::new(),
        };
        Error::NotReady { component: self.name, what: format!("{what}{exited}"), log_tail: self.log_tail(25) }
    }

    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(Some(_))) | None)
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port nothing listens on right now. Another process may take it before ours binds it; the component then
/// fails to start, and `ControlPlane::start` tries again with fresh ports.
pub(super) fn free_port() -> Result<u16, Error> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Error::Setup(format!("cannot find a free port on 127.0.0.1: {e}")))
}
