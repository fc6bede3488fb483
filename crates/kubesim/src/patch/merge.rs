//! RFC 7386 JSON merge patch: objects merge recursively, `null` deletes a key, anything else replaces.

use serde_json::{Map, Value};

/// Applies a merge patch to `target` and returns the result.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let Value::Object(patch_map) = patch else {
        // A non-object patch replaces the whole document.
        return patch.clone();
    };
    let mut result = match target {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    for (key, value) in patch_map {
        if value.is_null() {
            result.remove(key);
        } else {
            let merged = merge_patch(result.get(key).unwrap_or(&Value::Null), value);
            result.insert(key.clone(), merged);
        }
    }
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The examples of RFC 7386 appendix A.
    #[test]
    fn rfc7386_examples() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (json!({"a":"b","b":"c"}), json!({"a":null}), json!({"b":"c"})),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (json!({"a":{"b":"c"}}), json!({"a":{"b":"d","c":null}}), json!({"a":{"b":"d"}})),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (json!({}), json!({"a":{"bb":{"ccc":null}}}), json!({"a":{"bb":{}}})),
        ];
        for (target, patch, expected) in cases {
            assert_eq!(merge_patch(&target, &patch), expected, "target {target} patch {patch}");
        }
    }

    #[test]
    fn kubectl_scale_and_label_patches() {
        let deploy = json!({"metadata":{"name":"web","labels":{"app":"web"}},"spec":{"replicas":1}});
        let scaled = merge_patch(&deploy, &json!({"spec":{"replicas":5}}));
        assert_eq!(scaled["spec"]["replicas"], 5);
        let labelled = merge_patch(&scaled, &json!({"metadata":{"labels":{"x":"y"}}}));
        assert_eq!(labelled["metadata"]["labels"], json!({"app":"web","x":"y"}));
        let unlabelled = merge_patch(&labelled, &json!({"metadata":{"labels":{"app":null}}}));
        assert_eq!(unlabelled["metadata"]["labels"], json!({"x":"y"}));
        assert_eq!(unlabelled["metadata"]["name"], "web");
    }

    #[test]
    fn lists_are_replaced_not_merged() {
        let obj = json!({"metadata":{"finalizers":["a","b"]}});
        let out = merge_patch(&obj, &json!({"metadata":{"finalizers":["c"]}}));
        assert_eq!(out["metadata"]["finalizers"], json!(["c"]));
    }
}
