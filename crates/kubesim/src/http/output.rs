//! Response bodies in the negotiated form: plain objects and lists, Tables, PartialObjectMetadata(List).

use serde_json::{Map, Value, json};

use super::negotiate::{Output, partial_metadata};
use crate::cluster::ObjectList;
use crate::resources::ResourceType;

/// `unstructured`: the list is a custom resource's, served as upstream's UnstructuredList.
fn list_meta(list: &ObjectList, unstructured: bool) -> Value {
    let mut m = Map::new();
    m.insert("resourceVersion".into(), json!(list.resource_version));
    if let Some(c) = &list.continue_token {
        m.insert("continue".into(), json!(c));
    } else if unstructured {
        // Custom resources are listed unstructured: upstream sets continue even when it is empty.
        m.insert("continue".into(), json!(""));
    }
    if let Some(r) = list.remaining_item_count {
        m.insert("remainingItemCount".into(), json!(r));
    }
    Value::Object(m)
}

pub fn list(rt: &ResourceType, list: ObjectList, out: Output) -> Value {
    match out {
        Output::Json => {
            let meta = list_meta(&list, rt.is_crd());
            let mut items = list.items;
            // Typed lists of built-ins carry no apiVersion/kind per item (the list says it); custom resources,
            // served unstructured, keep them.
            if matches!(rt.origin, crate::resources::Origin::BuiltIn) {
                for item in &mut items {
                    if let Some(m) = item.as_object_mut() {
                        m.remove("apiVersion");
                        m.remove("kind");
                    }
                }
            }
            json!({"kind": rt.list_kind, "apiVersion": rt.api_version(), "metadata": meta, "items": items})
        }
        Output::Metadata => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": list_meta(&list, false),
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

/// Server-side printing (`kubectl get`).
pub fn table(rt: &ResourceType, items: &[Value], rv: &str) -> Value {
    crate::table::render_table(rt, items, rv, jiff::Timestamp::now())
}
