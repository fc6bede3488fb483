//! The hermetic check: every scenario against kubesim, compared with the real server's recorded answers.
//! A difference fails the test unless `docs/kubesim-deviations.md` lists the scenario (with its reason); a
//! listed scenario that is now identical fails too (the list must stay true), and so does a scenario without
//! a recording (nothing is skipped silently).

use conformance::record::{self, Verdict};
use conformance::scenario;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubesim_matches_the_recorded_real_server() {
    let scenarios = scenario::load_all(&record::scenarios_dir()).unwrap_or_else(|e| panic!("{e}"));
    let known = record::known_deviations().unwrap_or_else(|e| panic!("{e}"));
    let verdicts = conformance::check_kubesim(&scenarios).await.unwrap_or_else(|e| panic!("{e}"));
    println!("{}", record::report(&scenarios, &verdicts, &known));
    let mut problems = Vec::new();
    for (s, v) in scenarios.iter().zip(&verdicts) {
        match v {
            Verdict::Identical if known.contains_key(&s.id) => {
                problems.push(format!("{}: listed in docs/kubesim-deviations.md but now identical: remove it", s.id))
            }
            Verdict::Different(lines) if !known.contains_key(&s.id) => {
                problems.push(format!("{}: NEW difference:\n    {}", s.id, lines.join("\n    ")))
            }
            Verdict::Unrecorded => {
                problems.push(format!("{}: no recording (run `cargo run -p kubesim-conformance -- record`)", s.id))
            }
            _ => {}
        }
    }
    for id in known.keys() {
        if !scenarios.iter().any(|s| &s.id == id) {
            problems.push(format!("{id}: listed in docs/kubesim-deviations.md but no such scenario"));
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}
