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

/// The controller recordings compare a normal form because the real controllers' raw sequences vary between runs;
/// that is only sound while the normal form itself agreed in every recorded run.
#[test]
fn controller_recordings_agreed_in_every_real_run() {
    let scenarios = scenario::load_all(&record::scenarios_dir()).unwrap_or_else(|e| panic!("{e}"));
    let sequences: Vec<_> = scenarios.iter().filter(|s| s.file.steps.iter().any(|st| st.sequence.is_some())).collect();
    assert!(sequences.len() >= 5, "the controller scenarios are loaded");
    for s in sequences {
        let rec =
            record::load(&s.id).unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("{}: unrecorded", s.id));
        let st = rec.stability.unwrap_or_else(|| panic!("{}: recorded once only (record --repeat 3)", s.id));
        assert!(st.runs >= 3, "{}: {st}", s.id);
        assert_eq!(st.compared_identical, st.runs, "{}: the compared form varied between real runs: {st}", s.id);
    }
}

/// The normal form is not vacuous: a skipped condition transition, another final tuple or a broken invariant in a
/// recorded sequence is a difference.
#[test]
fn a_changed_controller_sequence_is_a_difference() {
    let rec = record::load("controllers/image-update").unwrap_or_else(|e| panic!("{e}")).expect("recorded");
    let step = rec.run.outcomes.iter().position(|o| o.name == "update-rollout").expect("the update step");
    assert!(record::compare(&rec.run, &rec.run).is_empty());
    let mutations: [fn(&mut serde_json::Value); 3] = [
        |b| {
            b["conditionSequence"].as_array_mut().expect("a sequence").remove(1);
        },
        |b| b["final"]["updated"] = 2.into(),
        |b| b["invariants"]["availabilityKeptOnceMinAvailableReached"] = false.into(),
    ];
    for m in mutations {
        let mut changed = rec.run.clone();
        m(&mut changed.outcomes[step].body);
        assert!(!record::compare(&rec.run, &changed).is_empty());
    }
}
