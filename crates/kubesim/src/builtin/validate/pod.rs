//! Validation of a Pod spec and its containers (also inside workload templates), and of Pod updates.

use super::*;

pub(super) const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

pub(super) fn port_number(v: &Value, path: &str, out: &mut Vec<Cause>) {
    let n = v.as_i64().unwrap_or(0);
    if !(1..=65535).contains(&n) {
        out.push(err::invalid(path, &go_repr(v), "must be between 1 and 65535, inclusive"));
    }
}

/// `ValidatePodSpec` (the parts clients trip over).
pub(super) fn pod_spec(spec: &Value, path: &str, out: &mut Vec<Cause>) {
    let mut volumes = Vec::new();
    for (i, v) in spec.get("volumes").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let p = format!("{path}.volumes[{i}].name");
        let name = str_at(v, "/name");
        if name.is_empty() {
            out.push(err::required(&p, ""));
        } else if volumes.contains(&name) {
            out.push(err::duplicate(&p, &Value::String(name.into())));
        } else {
            for msg in names::dns1123_label_errors(name) {
                out.push(err::invalid_str(&p, name, &msg));
            }
        }
        volumes.push(name);
    }
    let containers = spec.get("containers").and_then(Value::as_array);
    if containers.is_none_or(Vec::is_empty) {
        out.push(err::required(&format!("{path}.containers"), ""));
    }
    let mut seen: Vec<&str> = Vec::new();
    for key in ["initContainers", "containers"] {
        for (i, c) in spec.get(key).and_then(Value::as_array).into_iter().flatten().enumerate() {
            container(c, &format!("{path}.{key}[{i}]"), &mut seen, &volumes, out);
        }
    }
    one_of(spec, "/restartPolicy", &format!("{path}.restartPolicy"), &["Always", "Never", "OnFailure"], out);
    one_of(
        spec,
        "/dnsPolicy",
        &format!("{path}.dnsPolicy"),
        &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
        out,
    );
    if let Some(n) = int_at(spec, "/terminationGracePeriodSeconds")
        && n < 0
    {
        // Upstream tolerates negative values on old objects only; new ones are rejected.
        out.push(err::invalid(
            &format!("{path}.terminationGracePeriodSeconds"),
            &n.to_string(),
            "must be greater than or equal to 0",
        ));
    }
    if let Some(n) = int_at(spec, "/activeDeadlineSeconds")
        && n <= 0
    {
        out.push(err::invalid(
            &format!("{path}.activeDeadlineSeconds"),
            &n.to_string(),
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    if let Some(sel) = spec.get("nodeSelector") {
        validate_labels(sel, &format!("{path}.nodeSelector"), out);
    }
    let sa = str_at(spec, "/serviceAccountName");
    if !sa.is_empty() {
        for msg in names::dns1123_subdomain_errors(sa) {
            out.push(err::invalid_str(&format!("{path}.serviceAccountName"), sa, &msg));
        }
    }
}

// Over 80 lines on purpose: The checks of upstream's `validateContainers` for one container in its order (the order of
// the causes).
pub(super) fn container<'a>(c: &'a Value, path: &str, seen: &mut Vec<&'a str>, volumes: &[&str], out: &mut Vec<Cause>) {
    let name = str_at(c, "/name");
    if name.is_empty() {
        out.push(err::required(&format!("{path}.name"), ""));
    } else if seen.contains(&name) {
        out.push(err::duplicate(&format!("{path}.name"), &Value::String(name.into())));
    } else {
        for msg in names::dns1123_label_errors(name) {
            out.push(err::invalid_str(&format!("{path}.name"), name, &msg));
        }
    }
    seen.push(name);
    if str_at(c, "/image").trim().is_empty() {
        out.push(err::required(&format!("{path}.image"), ""));
    }
    one_of(c, "/imagePullPolicy", &format!("{path}.imagePullPolicy"), &["Always", "IfNotPresent", "Never"], out);
    one_of(
        c,
        "/terminationMessagePolicy",
        &format!("{path}.terminationMessagePolicy"),
        &["FallbackToLogsOnError", "File"],
        out,
    );
    let mut port_names: Vec<&str> = Vec::new();
    for (i, p) in c.get("ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let pp = format!("{path}.ports[{i}]");
        match p.get("containerPort") {
            Some(v) => port_number(v, &format!("{pp}.containerPort"), out),
            None => out.push(err::required(&format!("{pp}.containerPort"), "")),
        }
        if let Some(h) = p.get("hostPort")
            && h.as_i64() != Some(0)
        {
            port_number(h, &format!("{pp}.hostPort"), out);
        }
        let pname = str_at(p, "/name");
        if !pname.is_empty() {
            for msg in names::port_name_errors(pname) {
                out.push(err::invalid_str(&format!("{pp}.name"), pname, &msg));
            }
            if port_names.contains(&pname) {
                out.push(err::duplicate(&format!("{pp}.name"), &Value::String(pname.into())));
            }
            port_names.push(pname);
        }
        one_of(p, "/protocol", &format!("{pp}.protocol"), PROTOCOLS, out);
    }
    for (i, e) in c.get("env").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let name = str_at(e, "/name");
        if name.is_empty() {
            out.push(err::required(&format!("{path}.env[{i}].name"), ""));
        }
    }
    for (i, m) in c.get("volumeMounts").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let mp = format!("{path}.volumeMounts[{i}]");
        let name = str_at(m, "/name");
        if name.is_empty() {
            out.push(err::required(&format!("{mp}.name"), ""));
        } else if !volumes.contains(&name) {
            out.push(err::not_found(&format!("{mp}.name"), &Value::String(name.into())));
        }
        if str_at(m, "/mountPath").is_empty() {
            out.push(err::required(&format!("{mp}.mountPath"), ""));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get(probe) {
            for field in
                ["initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"]
            {
                non_negative(p, &format!("/{field}"), &format!("{path}.{probe}.{field}"), out);
            }
            if probe != "readinessProbe"
                && let Some(n) = int_at(p, "/successThreshold")
                && n != 1
            {
                out.push(err::invalid(&format!("{path}.{probe}.successThreshold"), &n.to_string(), "must be 1"));
            }
        }
    }
}

/// Pod updates may change only images, activeDeadlineSeconds, tolerations (additions) and
/// terminationGracePeriodSeconds. Setting `spec.nodeName` on an unscheduled pod is allowed here: it stands
/// in for the `binding` subresource, which the emulator's scheduler uses.
pub(super) fn pod_update(obj: &Value, old: &Value, out: &mut Vec<Cause>) {
    let normalize = |spec: Option<&Value>, keep_node: Option<&Value>| {
        let mut s = spec.cloned().unwrap_or(Value::Null);
        if let Some(m) = s.as_object_mut() {
            for key in ["activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"] {
                m.remove(key);
            }
            if let Some(n) = keep_node {
                m.insert("nodeName".into(), n.clone());
            }
            for key in ["containers", "initContainers"] {
                for c in m.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten() {
                    if let Some(c) = c.as_object_mut() {
                        c.remove("image");
                    }
                }
            }
        }
        s
    };
    let old_node = old.pointer("/spec/nodeName").filter(|n| n.as_str().is_some_and(|s| !s.is_empty()));
    let new_node = obj.pointer("/spec/nodeName");
    let node = if old_node.is_none() { new_node } else { old_node };
    if normalize(obj.get("spec"), node) != normalize(old.get("spec"), node) {
        out.push(err::forbidden(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
}
