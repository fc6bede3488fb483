//! Structural comparison of two normalised JSON values, as readable lines: `path: real X, kubesim Y`.

use serde_json::Value;

/// Every difference between `real` (expected) and `sim`, one line each, with JSON-pointer paths under `at`.
pub fn diff(at: &str, real: &Value, sim: &Value, out: &mut Vec<String>) {
    match (real, sim) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                let p = format!("{at}/{}", escape(k));
                match b.get(k) {
                    Some(vb) => diff(&p, va, vb, out),
                    None => out.push(format!("{p}: kubesim lacks it (real: {})", short(va))),
                }
            }
            for (k, vb) in b {
                if !a.contains_key(k) {
                    out.push(format!("{at}/{}: only kubesim has it ({})", escape(k), short(vb)));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                out.push(format!("{at}: real has {} items, kubesim {}", a.len(), b.len()));
            }
            for (i, (va, vb)) in a.iter().zip(b.iter()).enumerate() {
                diff(&format!("{at}/{i}"), va, vb, out);
            }
            for (i, vb) in b.iter().enumerate().skip(a.len()) {
                out.push(format!("{at}/{i}: only kubesim has it ({})", short(vb)));
            }
            for (i, va) in a.iter().enumerate().skip(b.len()) {
                out.push(format!("{at}/{i}: kubesim lacks it (real: {})", short(va)));
            }
        }
        _ if real == sim => {}
        _ => out.push(format!("{at}: real {}, kubesim {}", short(real), short(sim))),
    }
}

fn escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// A value on one line, cut at 160 characters.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 160 {
        let cut: String = s.chars().take(157).collect();
        format!("{cut}...")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_name_paths() {
        let mut out = Vec::new();
        diff(
            "",
            &json!({"a": 1, "b": [1, 2], "c": {"d/e": "x"}}),
            &json!({"a": 2, "b": [1], "c": {"d/e": "x"}, "z": true}),
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                "/a: real 1, kubesim 2",
                "/b: real has 2 items, kubesim 1",
                "/b/1: kubesim lacks it (real: 2)",
                "/z: only kubesim has it (true)"
            ]
        );
    }
}
