//! Starts the real control plane and keeps it until Ctrl-C: a cluster to explore with the matching kubectl.
//!
//!   cargo run -p microservice-testkit --bin control-plane [-- --nodes N]

use microservice_testkit::{ControlPlane, Options};

#[tokio::main]
async fn main() {
    let mut options = Options::default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {}
        [flag, n] if flag == "--nodes" => match n.parse() {
            Ok(n) => options.nodes = n,
            Err(_) => fail(&format!("--nodes takes a number, not {n}")),
        },
        _ => fail("usage: control-plane [--nodes N]"),
    }
    let plane = match ControlPlane::start(options).await {
        Ok(plane) => plane,
        Err(e) => fail(&e.to_string()),
    };
    println!("export KUBECONFIG={}", plane.kubeconfig().display());
    println!("alias kubectl={}", plane.kubectl().display());
    println!("Ctrl-C stops every process and removes the data");
    let _ = tokio::signal::ctrl_c().await;
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(2)
}
