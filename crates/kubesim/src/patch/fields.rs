//! Field sets as managedFields stores them (`fieldsV1`): a tree whose keys name path elements — `f:<field>`,
//! `k:{<list-map keys>}`, `v:<json value>` — and where `.` marks a node that is itself in the set. Also how
//! sets are computed from objects: the fields a value sets, and the fields one write changed.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::schema_info::{ListType, Node};

/// A set of field paths. Children are kept sorted by their serialised element, which is the order upstream
/// writes them (`.` first, then `f:` fields by name, then `k:` keys, then `v:` values).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    /// Whether the path leading to this node is itself in the set.
    pub member: bool,
    pub children: BTreeMap<String, FieldSet>,
}

/// A path: serialised path elements from the object root.
pub type Path = Vec<String>;

pub fn field(name: &str) -> String {
    format!("f:{name}")
}

pub fn value_element(v: &Value) -> String {
    format!("v:{v}")
}

/// The `k:` element naming a list-map item, or None when the item cannot be keyed.
pub fn key_element(item: &Value, keys: &[String], list: &Node) -> Option<String> {
    let obj = item.as_object()?;
    let mut key = Map::new();
    for k in keys {
        match obj.get(k).filter(|v| !v.is_null()).cloned().or_else(|| list.key_default(k)) {
            Some(v) => {
                key.insert(k.clone(), v);
            }
            // Upstream rejects items missing a key without default; an item only missing some is still named.
            None => continue,
        }
    }
    if key.is_empty() { None } else { Some(format!("k:{}", Value::Object(key))) }
}

impl FieldSet {
    fn leaf() -> FieldSet {
        FieldSet { member: true, children: BTreeMap::new() }
    }

    /// Reads a `fieldsV1` value; anything malformed is skipped rather than failing the write.
    pub fn from_fields_v1(v: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        if let Value::Object(m) = v {
            for (k, child) in m {
                if k == "." {
                    set.member = true;
                    continue;
                }
                let mut child = FieldSet::from_fields_v1(child);
                if child.children.is_empty() {
                    child.member = true;
                }
                set.children.insert(k.clone(), child);
            }
        }
        set
    }

    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && self.children.values().any(|c| !c.is_empty()) {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (k, child) in self.children.iter().filter(|(_, c)| !c.is_empty()) {
            m.insert(k.clone(), child.to_fields_v1());
        }
        Value::Object(m)
    }

    /// No path at all is in the set.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    pub fn child(&self, element: &str) -> Option<&FieldSet> {
        self.children.get(element)
    }

    pub fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    pub fn contains(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.contains(rest)),
        }
    }

    pub fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (k, child) in &other.children {
            self.children.entry(k.clone()).or_default().union(child);
        }
    }

    /// Takes every member of `other` out of this set (paths below them stay).
    pub fn remove_members(&mut self, other: &FieldSet) {
        if other.member {
            self.member = false;
        }
        for (k, o) in &other.children {
            if let Some(c) = self.children.get_mut(k) {
                c.remove_members(o);
            }
        }
        self.prune();
    }

    /// Takes every member of `other` and everything below it out of this set.
    pub fn remove_subtrees(&mut self, other: &FieldSet) {
        for (k, o) in &other.children {
            if o.member {
                self.children.remove(k);
            } else if let Some(c) = self.children.get_mut(k) {
                c.remove_subtrees(o);
            }
        }
        self.prune();
    }

    /// The paths that are members of both sets, in order.
    pub fn intersection(&self, other: &FieldSet) -> Vec<Path> {
        let mut out = Vec::new();
        intersect(self, other, &mut Vec::new(), &mut out);
        out
    }

    /// Every member path, in order.
    pub fn members(&self) -> Vec<Path> {
        self.intersection(self)
    }

    /// Drops children that hold no member.
    fn prune(&mut self) {
        self.children.retain(|_, c| {
            c.prune();
            !c.is_empty()
        });
    }
}

fn intersect(a: &FieldSet, b: &FieldSet, path: &mut Path, out: &mut Vec<Path>) {
    if a.member && b.member && !path.is_empty() {
        out.push(path.clone());
    }
    for (k, ca) in &a.children {
        if let Some(cb) = b.children.get(k) {
            path.push(k.clone());
            intersect(ca, cb, path, out);
            path.pop();
        }
    }
}

/// A path the way conflict messages print it: `.spec.template.spec.containers[name="backend"].image`.
pub fn path_string(path: &[String]) -> String {
    let mut s = String::new();
    for element in path {
        if let Some(name) = element.strip_prefix("f:") {
            s.push('.');
            s.push_str(name);
        } else if let Some(key) = element.strip_prefix("k:") {
            let parts: Vec<String> = match serde_json::from_str::<Map<String, Value>>(key) {
                Ok(m) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                Err(_) => vec![key.to_string()],
            };
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = element.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        } else if let Some(i) = element.strip_prefix("i:") {
            s.push_str(&format!("[{i}]"));
        }
    }
    s
}

/// Whether an object at this node merges field by field.
fn granular(node: &Node) -> bool {
    !node.is_atomic_object()
}

/// Names the items of a keyed list, or None when it has to be treated as atomic (unkeyable or duplicate items).
pub fn list_elements(items: &[Value], list: &Node) -> Option<Vec<String>> {
    let elements: Vec<String> = match list.list_type() {
        ListType::Atomic => return None,
        ListType::Set => {
            if items.iter().any(|v| v.is_object() || v.is_array()) {
                return None;
            }
            items.iter().map(value_element).collect()
        }
        ListType::Map(keys) => items.iter().map(|i| key_element(i, &keys, list)).collect::<Option<Vec<_>>>()?,
    };
    let mut sorted = elements.clone();
    sorted.sort();
    sorted.dedup();
    (sorted.len() == elements.len()).then_some(elements)
}

/// The fields a value sets, as an applier owns them: leaves (scalars, atomic values, empty objects and lists)
/// and list items; objects themselves are not members.
pub fn applied_set(v: &Value, node: &Node) -> FieldSet {
    value_set(v, node, false)
}

/// Every field of a value an Update added: as [`applied_set`], and the added objects and lists themselves are
/// members too (`.`), as upstream's comparison records a map or list that was absent before.
pub fn added_set(v: &Value, node: &Node) -> FieldSet {
    value_set(v, node, true)
}

fn value_set(v: &Value, node: &Node, mark_containers: bool) -> FieldSet {
    match v {
        Value::Object(m) if granular(node) && !m.is_empty() => {
            let mut set = FieldSet { member: mark_containers, children: BTreeMap::new() };
            for (k, child) in m {
                if child.is_null() {
                    continue;
                }
                set.children.insert(field(k), value_set(child, &node.field(k), mark_containers));
            }
            // An object of nulls only is a leaf, like an empty one.
            if set.children.is_empty() {
                set.member = true;
            }
            set
        }
        Value::Array(items) if !items.is_empty() => match list_elements(items, node) {
            Some(elements) => {
                let mut set = FieldSet { member: mark_containers, children: BTreeMap::new() };
                let item_node = node.item();
                for (element, item) in elements.into_iter().zip(items) {
                    let mut child = if element.starts_with("v:") {
                        FieldSet::leaf()
                    } else {
                        value_set(item, &item_node, mark_containers)
                    };
                    child.member = true;
                    set.children.insert(element, child);
                }
                set
            }
            None => FieldSet::leaf(),
        },
        _ => FieldSet::leaf(),
    }
}

/// What one write did to an object's fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Fields added or given a new value.
    pub changed: FieldSet,
    /// Fields (and list items) that are gone.
    pub removed: FieldSet,
}

/// Compares two versions of an object field by field, with list items matched by their keys.
pub fn changes(old: &Value, new: &Value, node: &Node) -> Changes {
    let mut out = Changes::default();
    diff(old, new, node, &mut out.changed, &mut out.removed);
    // The metadata path itself is never owned (upstream strips it), only what is inside.
    if let Some(meta) = out.changed.children.get_mut("f:metadata") {
        meta.member = false;
        if meta.is_empty() {
            out.changed.children.remove("f:metadata");
        }
    }
    out
}

fn diff(old: &Value, new: &Value, node: &Node, changed: &mut FieldSet, removed: &mut FieldSet) {
    if old == new {
        return;
    }
    match (old, new) {
        (Value::Object(o), Value::Object(n)) if granular(node) => {
            for (k, nv) in n {
                let child = node.field(k);
                match o.get(k).filter(|v| !v.is_null()) {
                    None if nv.is_null() => {}
                    None => {
                        changed.children.insert(field(k), added_set(nv, &child));
                    }
                    Some(ov) if nv.is_null() => {
                        let _ = ov;
                        removed.children.insert(field(k), FieldSet::leaf());
                    }
                    Some(ov) => {
                        let (mut c, mut r) = (FieldSet::default(), FieldSet::default());
                        diff(ov, nv, &child, &mut c, &mut r);
                        if !c.is_empty() {
                            changed.children.insert(field(k), c);
                        }
                        if !r.is_empty() {
                            removed.children.insert(field(k), r);
                        }
                    }
                }
            }
            for (k, ov) in o {
                if !n.contains_key(k) && !ov.is_null() {
                    removed.children.insert(field(k), FieldSet::leaf());
                }
            }
        }
        (Value::Array(o), Value::Array(n)) => match (list_elements(o, node), list_elements(n, node)) {
            (Some(oe), Some(ne)) => {
                let item_node = node.item();
                for (element, item) in ne.iter().zip(n) {
                    match oe.iter().position(|e| e == element) {
                        None => {
                            let mut set =
                                if element.starts_with("v:") { FieldSet::leaf() } else { added_set(item, &item_node) };
                            set.member = true;
                            changed.children.insert(element.clone(), set);
                        }
                        Some(i) => {
                            let (mut c, mut r) = (FieldSet::default(), FieldSet::default());
                            diff(&o[i], item, &item_node, &mut c, &mut r);
                            if !c.is_empty() {
                                changed.children.insert(element.clone(), c);
                            }
                            if !r.is_empty() {
                                removed.children.insert(element.clone(), r);
                            }
                        }
                    }
                }
                for element in oe.iter().filter(|e| !ne.contains(e)) {
                    removed.children.insert(element.clone(), FieldSet::leaf());
                }
            }
            _ => changed.member = true,
        },
        _ => changed.member = true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{ResourceType, builtin_types};
    use serde_json::json;

    fn deployment_type() -> ResourceType {
        builtin_types().into_iter().find(|t| t.kind == "Deployment").unwrap()
    }

    #[test]
    fn fields_v1_round_trips_with_dot_members() {
        let v = json!({"f:metadata":{"f:labels":{".":{},"f:app":{}}},
                       "f:spec":{"f:containers":{"k:{\"name\":\"a\"}":{".":{},"f:image":{},"f:name":{}}}}});
        let set = FieldSet::from_fields_v1(&v);
        assert!(set.contains(&["f:metadata".into(), "f:labels".into()]));
        assert!(!set.contains(&["f:metadata".into()]));
        assert_eq!(set.to_fields_v1(), v);
    }

    #[test]
    fn applied_set_names_list_items_by_key_and_keeps_atomic_selector_whole() {
        let rt = deployment_type();
        let obj = json!({"metadata":{"labels":{"app":"web"}},"spec":{"replicas":2,
            "selector":{"matchLabels":{"app":"web"}},
            "template":{"spec":{"containers":[{"name":"nginx","image":"nginx",
                "ports":[{"containerPort":80}]}]}}}});
        let set = applied_set(&obj, &Node::root(&rt));
        assert_eq!(
            set.to_fields_v1(),
            json!({"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:replicas":{},"f:selector":{},
                "f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{},
                    "f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}}}})
        );
    }

    #[test]
    fn path_strings_match_upstream_conflict_messages() {
        let path: Path = vec![
            "f:spec".into(),
            "f:template".into(),
            "f:spec".into(),
            "f:containers".into(),
            "k:{\"name\":\"backend\"}".into(),
            "f:image".into(),
        ];
        assert_eq!(path_string(&path), ".spec.template.spec.containers[name=\"backend\"].image");
        let ports: Path = vec!["f:ports".into(), "k:{\"containerPort\":80,\"protocol\":\"TCP\"}".into()];
        assert_eq!(path_string(&ports), ".ports[containerPort=80,protocol=\"TCP\"]");
        assert_eq!(path_string(&["f:finalizers".into(), "v:\"a\"".into()]), ".finalizers[=\"a\"]");
    }

    #[test]
    fn changes_find_modified_added_and_removed_fields() {
        let rt = deployment_type();
        let old = json!({"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"replicas":1,
            "template":{"spec":{"containers":[{"name":"x","image":"1"},{"name":"y","image":"1"}]}}}});
        let new = json!({"metadata":{"labels":{"a":"1","c":"3"}},"spec":{"replicas":2,
            "template":{"spec":{"containers":[{"name":"x","image":"2"},{"name":"z","image":"1"}]}}}});
        let c = changes(&old, &new, &Node::root(&rt));
        let changed: Vec<String> = c.changed.members().iter().map(|p| path_string(p)).collect();
        assert_eq!(
            changed,
            [
                ".metadata.labels.c",
                ".spec.replicas",
                ".spec.template.spec.containers[name=\"x\"].image",
                ".spec.template.spec.containers[name=\"z\"]",
                ".spec.template.spec.containers[name=\"z\"].image",
                ".spec.template.spec.containers[name=\"z\"].name",
            ]
        );
        let removed: Vec<String> = c.removed.members().iter().map(|p| path_string(p)).collect();
        assert_eq!(removed, [".metadata.labels.b", ".spec.template.spec.containers[name=\"y\"]"]);
    }

    #[test]
    fn set_operations() {
        let mut a = FieldSet::default();
        a.insert(&["f:spec".into(), "f:replicas".into()]);
        a.insert(&["f:spec".into(), "f:paused".into()]);
        let mut b = FieldSet::default();
        b.insert(&["f:spec".into(), "f:replicas".into()]);
        assert_eq!(a.intersection(&b), vec![vec!["f:spec".to_string(), "f:replicas".to_string()]]);
        a.remove_members(&b);
        assert!(!a.contains(&["f:spec".into(), "f:replicas".into()]));
        assert!(a.contains(&["f:spec".into(), "f:paused".into()]));
        let mut spec = FieldSet::default();
        spec.insert(&["f:spec".into()]);
        a.remove_subtrees(&spec);
        assert!(a.is_empty());
    }
}
