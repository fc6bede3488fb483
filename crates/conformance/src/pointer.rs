//! JSON pointers with one extension: a segment `[key=value]` selects the first list item whose `key` is the
//! string `value` (discovery documents and conditions are lists whose order is no contract).

use serde_json::Value;

enum Segment<'a> {
    Key(String),
    Select(&'a str, &'a str),
}

fn segments(pointer: &str) -> Vec<Segment<'_>> {
    pointer
        .split('/')
        .skip(1)
        .map(|s| {
            if let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']'))
                && let Some((k, v)) = inner.split_once('=')
            {
                return Segment::Select(k, v);
            }
            Segment::Key(s.replace("~1", "/").replace("~0", "~"))
        })
        .collect()
}

fn step<'v>(value: &'v Value, seg: &Segment<'_>) -> Option<&'v Value> {
    match seg {
        Segment::Key(k) => match value {
            Value::Object(m) => m.get(k),
            Value::Array(a) => k.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        },
        Segment::Select(k, v) => value.as_array()?.iter().find(|item| item.get(*k).and_then(Value::as_str) == Some(*v)),
    }
}

/// The value at `pointer`, if any (`""` is the whole value).
pub fn get<'v>(value: &'v Value, pointer: &str) -> Option<&'v Value> {
    let mut cur = value;
    for seg in segments(pointer) {
        cur = step(cur, &seg)?;
    }
    Some(cur)
}

/// Removes what `pointer` designates, if present.
pub fn remove(value: &mut Value, pointer: &str) {
    let segs = segments(pointer);
    let Some((last, parents)) = segs.split_last() else {
        return;
    };
    let mut cur = value;
    for seg in parents {
        let next = match (seg, cur) {
            (Segment::Key(k), Value::Object(m)) => m.get_mut(k),
            (Segment::Key(k), Value::Array(a)) => k.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            (Segment::Select(k, v), Value::Array(a)) => {
                a.iter_mut().find(|item| item.get(*k).and_then(Value::as_str) == Some(*v))
            }
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match (last, cur) {
        (Segment::Key(k), Value::Object(m)) => {
            m.remove(k);
        }
        (Segment::Key(k), Value::Array(a)) => {
            if let Ok(i) = k.parse::<usize>()
                && i < a.len()
            {
                a.remove(i);
            }
        }
        (Segment::Select(k, v), Value::Array(a)) => a.retain(|item| item.get(*k).and_then(Value::as_str) != Some(*v)),
        _ => {}
    }
}

/// An object mapping each pointer to what it designates (null when absent).
pub fn project(value: &Value, pointers: &[String]) -> Value {
    Value::Object(pointers.iter().map(|p| (p.clone(), get(value, p).cloned().unwrap_or(Value::Null))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selects_list_items_by_key() {
        let v = json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "B", "status": "True"}]}});
        assert_eq!(get(&v, "/status/conditions/[type=B]/status"), Some(&json!("True")));
        assert_eq!(get(&v, "/status/conditions/1/type"), Some(&json!("B")));
        let mut w = v.clone();
        remove(&mut w, "/status/conditions/[type=A]");
        assert_eq!(w, json!({"status": {"conditions": [{"type": "B", "status": "True"}]}}));
    }

    #[test]
    fn escapes() {
        let v = json!({"a/b": {"~c": 1}});
        assert_eq!(get(&v, "/a~1b/~0c"), Some(&json!(1)));
    }
}
