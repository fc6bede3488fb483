//! Response bodies in the negotiated form: plain objects and lists, Tables, PartialObjectMetadata(List).

use serde_json::{Map, Value, json};

use super::negotiate::{Output, partial_metadata};
use crate::cluster::ObjectList;
use crate::resources::ResourceType;

fn list_meta(list: &ObjectList) -> Value {
    let mut m = Map::new();
    m.insert("resourceVersion".into(), json!(list.resource_version));
    if let Some(c) = &list.continue_token {
        m.insert("continue".into(), json!(c));
    }
    if let Some(r) = list.remaining_item_count {
        m.insert("remainingItemCount".into(), json!(r));
    }
    Value::Object(m)
}

pub fn list(rt: &ResourceType, list: ObjectList, out: Output) -> Value {
    match out {
        Output::Json => json!({
            "kind": rt.list_kind,
            "apiVersion": rt.api_version(),
            "metadata": list_meta(&list),
            "items": list.items,
        }),
        Output::Metadata => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": list_meta(&list),
            "items": list.items.iter().map(partial_metadata).collect::<Vec<_>>(),
        }),
        Output::Table => {
            let mut t = table(rt, &list.items, &list.resource_version);
            if let Some(c) = &list.continue_token {
                t["metadata"]["continue"] = json!(c);
            }
            t
        }
    }
}

pub fn object(rt: &ResourceType, obj: Value, out: Output) -> Value {
    match out {
        Output::Json => obj,
        Output::Metadata => partial_metadata(&obj),
        Output::Table => {
            let rv = obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default().to_string();
            table(rt, std::slice::from_ref(&obj), &rv)
        }
    }
}

/// Server-side printing (`kubectl get`): Name and Age (a stand-in until the table module's renderer lands).
pub fn table(_rt: &ResourceType, items: &[Value], rv: &str) -> Value {
    let now = jiff::Timestamp::now();
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let name = o.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
            let age = o
                .pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .map(|t| short_age(now.as_second() - t.as_second()))
                .unwrap_or_else(|| "<unknown>".into());
            json!({"cells": [name, age], "object": partial_metadata(o)})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
            {"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0},
        ],
        "rows": rows,
    })
}

fn short_age(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..120 => format!("{s}s"),
        120..3600 => format!("{}m", s / 60),
        3600..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}
