//! A minimal real control plane for `record` (etcd + kube-apiserver + kube-controller-manager on loopback),
//! kept small and isolated so the project's testkit harness can replace it. Binaries come from
//! `CONFORMANCE_BIN_DIR` or `hack/control-plane/build.sh --print-dir`. Everything lives in a temporary
//! directory and the processes are killed when the [`ControlPlane`] is dropped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::Error;
use crate::scenario::workspace_dir;
use crate::target::Target;

/// The admin's static bearer token (group system:masters); loopback only, for one run.
const ADMIN_TOKEN: &str = "conformance-admin-token";

pub struct ControlPlane {
    dir: PathBuf,
    url: String,
    children: Vec<Child>,
}

fn free_port() -> Result<u16, Error> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| Error::ControlPlane(format!("no free port: {e}")))?;
    l.local_addr().map(|a| a.port()).map_err(|e| Error::ControlPlane(e.to_string()))
}

fn bin_dir() -> Result<PathBuf, Error> {
    if let Ok(d) = std::env::var("CONFORMANCE_BIN_DIR") {
        return Ok(PathBuf::from(d));
    }
    let script = workspace_dir().join("hack/control-plane/build.sh");
    let out = std::process::Command::new(&script)
        .arg("--print-dir")
        .output()
        .map_err(|e| Error::ControlPlane(format!("{}: {e}", script.display())))?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let check = std::process::Command::new(&script).arg("--check").status();
    if !matches!(check, Ok(s) if s.success()) {
        return Err(Error::ControlPlane(format!("the binaries are not built yet in {dir} (run {})", script.display())));
    }
    Ok(PathBuf::from(dir))
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|source| Error::Io { path: path.display().to_string(), source })
}

fn spawn(bin: &Path, args: &[String], log: &Path) -> Result<Child, Error> {
    let out = std::fs::File::create(log).map_err(|source| Error::Io { path: log.display().to_string(), source })?;
    let err = out.try_clone().map_err(|source| Error::Io { path: log.display().to_string(), source })?;
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::ControlPlane(format!("{}: {e}", bin.display())))
}

impl ControlPlane {
    pub async fn start() -> Result<ControlPlane, Error> {
        let bins = bin_dir()?;
        let dir = std::env::temp_dir().join(format!("kubesim-conformance-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io { path: dir.display().to_string(), source })?;
        let mut plane = ControlPlane { dir: dir.clone(), url: String::new(), children: Vec::new() };
        let d = |name: &str| dir.join(name).display().to_string();

        let (client, peer, secure, cm) = (free_port()?, free_port()?, free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let etcd_args: Vec<String> = vec![
            format!("--data-dir={}", d("etcd")),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
        ];
        plane.children.push(spawn(&bins.join("etcd"), &etcd_args, &dir.join("etcd.log"))?);

        // An ECDSA P-256 key signs ServiceAccount tokens (kube-apiserver accepts PKCS#8 PEM).
        let key = rcgen::KeyPair::generate().map_err(|e| Error::ControlPlane(e.to_string()))?;
        write(&dir.join("sa.key"), &key.serialize_pem())?;
        write(&dir.join("sa.pub"), &key.public_key_pem())?;
        write(&dir.join("tokens.csv"), &format!("{ADMIN_TOKEN},admin,admin,\"system:masters\"\n"))?;
        let api_args: Vec<String> = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={secure}"),
            format!("--cert-dir={}", d("certs")),
            format!("--service-account-key-file={}", d("sa.pub")),
            format!("--service-account-signing-key-file={}", d("sa.key")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            "--service-cluster-ip-range=10.96.0.0/12".into(),
            "--authorization-mode=Node,RBAC".into(),
            // The endpoint reconciler refuses loopback addresses; nothing here needs the kubernetes Endpoints.
            "--endpoint-reconciler-type=none".into(),
            format!("--token-auth-file={}", d("tokens.csv")),
        ];
        plane.children.push(spawn(&bins.join("kube-apiserver"), &api_args, &dir.join("kube-apiserver.log"))?);
        plane.url = format!("https://127.0.0.1:{secure}");

        let target = plane.target().await?;
        wait_ready(&target, "/readyz").await?;

        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {}\n    insecure-skip-tls-verify: true\nusers:\n- name: t\n  user:\n    token: {ADMIN_TOKEN}\ncontexts:\n- name: t\n  context:\n    cluster: t\n    user: t\ncurrent-context: t\n",
            plane.url
        );
        write(&dir.join("admin.kubeconfig"), &kubeconfig)?;
        let cm_args: Vec<String> = vec![
            format!("--kubeconfig={}", d("admin.kubeconfig")),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={cm}"),
            "--leader-elect=false".into(),
            format!("--service-account-private-key-file={}", d("sa.key")),
            format!("--root-ca-file={}", d("certs/apiserver.crt")),
        ];
        plane.children.push(spawn(&bins.join("kube-controller-manager"), &cm_args, &dir.join("kcm.log"))?);
        eprintln!("control plane at {} (logs in {})", plane.url, dir.display());
        Ok(plane)
    }

    /// The admin's view of the API server (its serving certificate is self-signed: not checked, loopback).
    pub async fn target(&self) -> Result<Target, Error> {
        Target::direct("kube-apiserver", &self.url, None, ADMIN_TOKEN).await
    }

    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }
}

/// Polls `path` until it answers 200, at most two minutes (kube-apiserver's post-start hooks).
async fn wait_ready(target: &Target, path: &str) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let req =
            http::Request::get(path).body(kube::client::Body::empty()).map_err(|e| Error::ControlPlane(e.to_string()));
        if let Ok(resp) = target.admin().send(req?).await
            && resp.status() == 200
        {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::ControlPlane(format!("{path} did not answer 200 within 120s")));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            let _ = c.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
