//! RFC 6902 JSON patch with the behaviour kube-apiserver has (it uses evanphx/json-patch): a `test` of a
//! missing member whose parent exists succeeds against `null` (kube-runtime's finalizer helper relies on it),
//! a patch that is not a list of operations is 400, and any operation that does not apply is 422 Invalid with
//! the generic message upstream sends.

use serde_json::Value;

use crate::error::{ApiError, ApiResult};

/// Applies a JSON patch (a list of operations) to `target` and returns the result; `target` is untouched
/// when any operation fails, as upstream applies patches atomically.
pub fn json_patch(target: &Value, patch: &Value) -> ApiResult<Value> {
    // Upstream first decodes the body into its own operation list to check it (fieldValidation Warn, the
    // default, or Strict), so that decoder's type error is the one a client sees.
    let Value::Array(ops) = patch else {
        return Err(ApiError::bad_request(format!(
            "error decoding patch: json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp",
            json_type_name(patch)
        )));
    };
    let mut doc = target.clone();
    for op in ops {
        apply_op(&mut doc, op).map_err(|_| not_applied())?;
    }
    Ok(doc)
}

fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// What upstream answers for every operation that does not apply, including a failed `test`.
fn not_applied() -> ApiError {
    ApiError::generic(422, "Invalid", "the server rejected our request due to an error in our request")
}

/// Why one operation failed; only used to stop, upstream does not report the detail.
#[derive(Debug)]
struct OpFailed;

type OpResult<T> = Result<T, OpFailed>;

fn apply_op(doc: &mut Value, op: &Value) -> OpResult<()> {
    let kind = op.get("op").and_then(Value::as_str).ok_or(OpFailed)?;
    let path = parse_pointer(op.get("path").and_then(Value::as_str).ok_or(OpFailed)?)?;
    let value = || op.get("value").cloned().ok_or(OpFailed);
    match kind {
        "add" => add(doc, &path, value()?),
        "remove" => remove(doc, &path).map(drop),
        "replace" => replace(doc, &path, value()?),
        "move" => {
            let from = parse_pointer(op.get("from").and_then(Value::as_str).ok_or(OpFailed)?)?;
            // A value cannot be moved into one of its own children.
            if path.len() > from.len() && path[..from.len()] == from[..] {
                return Err(OpFailed);
            }
            let v = remove(doc, &from)?;
            add(doc, &path, v)
        }
        "copy" => {
            let from = parse_pointer(op.get("from").and_then(Value::as_str).ok_or(OpFailed)?)?;
            let v = get(doc, &from).cloned().ok_or(OpFailed)?;
            add(doc, &path, v)
        }
        "test" => {
            let expected = op.get("value").unwrap_or(&Value::Null);
            match get(doc, &path) {
                Some(actual) if actual == expected => Ok(()),
                Some(_) => Err(OpFailed),
                // A missing member of an existing container tests equal to null.
                None if expected.is_null() && parent_exists(doc, &path) => Ok(()),
                None => Err(OpFailed),
            }
        }
        _ => Err(OpFailed),
    }
}

/// RFC 6901 pointer into reference tokens.
fn parse_pointer(pointer: &str) -> OpResult<Vec<String>> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let rest = pointer.strip_prefix('/').ok_or(OpFailed)?;
    Ok(rest.split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect())
}

/// An existing array index (no leading zeros, no sign), as RFC 6901 writes them.
fn array_index(token: &str, len: usize) -> Option<usize> {
    if token.is_empty() || (token.len() > 1 && token.starts_with('0')) || !token.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token.parse::<usize>().ok().filter(|i| *i < len)
}

fn get<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |cur, token| match cur {
        Value::Object(m) => m.get(token),
        Value::Array(a) => array_index(token, a.len()).and_then(|i| a.get(i)),
        _ => None,
    })
}

fn get_mut<'a>(doc: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(doc, |cur, token| match cur {
        Value::Object(m) => m.get_mut(token),
        Value::Array(a) => {
            let len = a.len();
            array_index(token, len).and_then(move |i| a.get_mut(i))
        }
        _ => None,
    })
}

/// Upstream applies JSON patches with evanphx/json-patch v4, whose `replace` only checks that the parent exists
/// when it is an object: a missing member is then set, as `add` would (arrays still need the index).
fn replace(doc: &mut Value, path: &[String], v: Value) -> OpResult<()> {
    if let Some(slot) = get_mut(doc, path) {
        *slot = v;
        return Ok(());
    }
    let (last, parent) = path.split_last().ok_or(OpFailed)?;
    match get_mut(doc, parent) {
        Some(Value::Object(m)) => {
            m.insert(last.clone(), v);
            Ok(())
        }
        _ => Err(OpFailed),
    }
}

fn parent_exists(doc: &Value, path: &[String]) -> bool {
    match path.split_last() {
        Some((_, parent)) => matches!(get(doc, parent), Some(Value::Object(_))),
        None => false,
    }
}

fn add(doc: &mut Value, path: &[String], value: Value) -> OpResult<()> {
    let Some((last, parent)) = path.split_last() else {
        *doc = value;
        return Ok(());
    };
    match get_mut(doc, parent).ok_or(OpFailed)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            let index = if last == "-" { a.len() } else { array_index(last, a.len() + 1).ok_or(OpFailed)? };
            a.insert(index, value);
            Ok(())
        }
        _ => Err(OpFailed),
    }
}

fn remove(doc: &mut Value, path: &[String]) -> OpResult<Value> {
    let (last, parent) = path.split_last().ok_or(OpFailed)?;
    match get_mut(doc, parent).ok_or(OpFailed)? {
        Value::Object(m) => m.remove(last).ok_or(OpFailed),
        Value::Array(a) => {
            let index = array_index(last, a.len()).ok_or(OpFailed)?;
            Ok(a.remove(index))
        }
        _ => Err(OpFailed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn apply(target: Value, patch: Value) -> ApiResult<Value> {
        json_patch(&target, &patch)
    }

    #[test]
    fn all_six_operations() {
        let doc = json!({"a": {"b": [1, 2, 3]}, "c": "x"});
        let out = apply(
            doc,
            json!([
                {"op": "add", "path": "/a/b/1", "value": 9},
                {"op": "add", "path": "/a/b/-", "value": 4},
                {"op": "remove", "path": "/a/b/0"},
                {"op": "replace", "path": "/c", "value": "y"},
                {"op": "copy", "from": "/c", "path": "/d"},
                {"op": "move", "from": "/a/b", "path": "/e"},
                {"op": "test", "path": "/e", "value": [9, 2, 3, 4]},
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": {}, "c": "y", "d": "y", "e": [9, 2, 3, 4]}));
    }

    #[test]
    fn kubectl_replace_replicas() {
        let out =
            apply(json!({"spec": {"replicas": 1}}), json!([{"op": "replace", "path": "/spec/replicas", "value": 6}]));
        assert_eq!(out.unwrap()["spec"]["replicas"], 6);
    }

    #[test]
    fn test_of_missing_member_against_null_succeeds() {
        // kube-runtime's finalizer helper, on an object without finalizers.
        let obj = json!({"metadata": {"name": "x", "resourceVersion": "7"}});
        let out = apply(
            obj,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/cleanup"]},
            ]),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["example.com/cleanup"]));
    }

    #[test]
    fn test_of_missing_member_against_a_value_fails() {
        let err = apply(json!({"metadata": {}}), json!([{"op": "test", "path": "/metadata/finalizers", "value": []}]))
            .unwrap_err();
        assert_eq!(err.code, 422);
    }

    #[test]
    fn test_under_a_missing_parent_fails_even_against_null() {
        let err =
            apply(json!({"metadata": {}}), json!([{"op": "test", "path": "/spec/x", "value": null}])).unwrap_err();
        assert_eq!(err.code, 422);
    }

    #[test]
    fn failed_test_is_422_invalid_with_upstream_message_and_nothing_applied() {
        // Kopf's optimistic lock: test the resourceVersion, then change.
        let obj = json!({"metadata": {"resourceVersion": "5", "finalizers": ["a"]}});
        let err = apply(
            obj,
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "4"},
                {"op": "remove", "path": "/metadata/finalizers/0"},
            ]),
        )
        .unwrap_err();
        let status = err.to_status();
        assert_eq!(status["code"], 422);
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(status["message"], "the server rejected our request due to an error in our request");
    }

    #[test]
    fn remove_finalizer_by_index_as_kubectl_sends_it() {
        let obj = json!({"metadata": {"finalizers": ["example.com/f"]}});
        let out = apply(obj, json!([{"op": "remove", "path": "/metadata/finalizers/0"}])).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!([]));
    }

    #[test]
    fn replace_of_a_missing_member_sets_it() {
        // As kube-apiserver's json-patch v4 does (recorded in the conformance corpus).
        let out = apply(json!({"o": {"k": 1}}), json!([{"op": "replace", "path": "/o/nope", "value": 2}]));
        assert_eq!(out.ok(), Some(json!({"o": {"k": 1, "nope": 2}})));
    }

    #[test]
    fn operations_that_do_not_apply_are_422() {
        let doc = json!({"a": [1], "o": {"k": 1}});
        let bad = [
            json!([{"op": "remove", "path": "/missing"}]),
            json!([{"op": "remove", "path": "/a/1"}]),
            json!([{"op": "replace", "path": "/a/3", "value": 1}]),
            json!([{"op": "replace", "path": "/x/y", "value": 1}]),
            json!([{"op": "add", "path": "/a/5", "value": 1}]),
            json!([{"op": "add", "path": "/a/01", "value": 1}]),
            json!([{"op": "add", "path": "/x/y", "value": 1}]),
            json!([{"op": "add", "path": "/o/z"}]),
            json!([{"op": "move", "from": "/o", "path": "/o/inner"}]),
            json!([{"op": "copy", "from": "/nope", "path": "/b"}]),
            json!([{"op": "frobnicate", "path": "/a"}]),
            json!([{"op": "add", "value": 1}]),
            json!([{"op": "add", "path": "no-slash", "value": 1}]),
        ];
        for patch in bad {
            assert_eq!(apply(doc.clone(), patch.clone()).unwrap_err().code, 422, "{patch}");
        }
    }

    #[test]
    fn a_patch_that_is_not_a_list_is_400() {
        let err = apply(json!({}), json!({"op": "add"})).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(err.reason, "BadRequest");
    }

    #[test]
    fn pointer_escapes_address_annotation_keys() {
        let obj = json!({"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "t0", "a~b": "1"}}});
        let out = apply(
            obj,
            json!([
                {"op": "replace", "path": "/metadata/annotations/kubectl.kubernetes.io~1restartedAt", "value": "t1"},
                {"op": "remove", "path": "/metadata/annotations/a~0b"},
            ]),
        )
        .unwrap();
        assert_eq!(out["metadata"]["annotations"], json!({"kubectl.kubernetes.io/restartedAt": "t1"}));
    }

    #[test]
    fn add_to_root_replaces_the_document_and_add_replaces_existing_members() {
        assert_eq!(apply(json!({"a": 1}), json!([{"op": "add", "path": "", "value": [1]}])).unwrap(), json!([1]));
        assert_eq!(apply(json!({"a": 1}), json!([{"op": "add", "path": "/a", "value": 2}])).unwrap(), json!({"a": 2}));
    }

    #[test]
    fn empty_patch_is_a_no_op() {
        let doc = json!({"a": 1});
        assert_eq!(apply(doc.clone(), json!([])).unwrap(), doc);
    }
}
