//! autoscaling/v2 HorizontalPodAutoscalers: upstream's defaults (`SetDefaults_HorizontalPodAutoscaler`) and the
//! parts of `ValidateHorizontalPodAutoscaler` a client meets (scale target, replica bounds, metric sources).
//! kubesim stores them and computes no metrics: nothing scales on its own.

use serde_json::{Value, json};

use crate::error::Cause;
use crate::names::{self, err};

/// Upstream's `autoscaling.DefaultCPUUtilization`.
const DEFAULT_CPU_UTILIZATION: i64 = 80;
const METRIC_TYPES: [&str; 5] = ["ContainerResource", "External", "Object", "Pods", "Resource"];
const TARGET_TYPES: [&str; 3] = ["AverageValue", "Utilization", "Value"];

/// minReplicas 1; no metrics means CPU at 80%; a behavior that is given gets its missing rules and fields.
pub fn default(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else { return };
    if spec.get("minReplicas").is_none_or(Value::is_null) {
        spec.insert("minReplicas".into(), json!(1));
    }
    if spec.get("metrics").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {
                "type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]),
        );
    }
    let Some(behavior) = spec.get_mut("behavior").and_then(Value::as_object_mut) else { return };
    let up = json!([{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]);
    let down = json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]);
    for (key, window, policies) in [("scaleUp", 0, up), ("scaleDown", 300, down)] {
        let rules = behavior.entry(key).or_insert_with(|| json!({}));
        if rules.is_null() {
            *rules = json!({});
        }
        let Some(rules) = rules.as_object_mut() else { continue };
        if rules.get("stabilizationWindowSeconds").is_none_or(Value::is_null) {
            rules.insert("stabilizationWindowSeconds".into(), json!(window));
        }
        if rules.get("selectPolicy").is_none_or(Value::is_null) {
            rules.insert("selectPolicy".into(), json!("Max"));
        }
        if rules.get("policies").and_then(Value::as_array).is_none_or(Vec::is_empty) {
            rules.insert("policies".into(), policies);
        }
    }
}

pub fn validate(obj: &Value, out: &mut Vec<Cause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    for field in ["kind", "name"] {
        let path = format!("spec.scaleTargetRef.{field}");
        let value = spec.pointer(&format!("/scaleTargetRef/{field}")).and_then(Value::as_str).unwrap_or_default();
        if value.is_empty() {
            out.push(err::required(&path, ""));
        } else {
            for message in names::path_segment_errors(value) {
                out.push(err::invalid_str(&path, value, &message));
            }
        }
    }
    let min = spec.get("minReplicas").and_then(Value::as_i64);
    if let Some(min) = min
        && min < 1
    {
        out.push(err::invalid("spec.minReplicas", &min.to_string(), "must be greater than or equal to 1"));
    }
    // An int32 that is not a pointer: absent reads as 0, as upstream decodes it.
    let max = spec.get("maxReplicas").and_then(Value::as_i64).unwrap_or(0);
    if max < 1 {
        out.push(err::invalid("spec.maxReplicas", &max.to_string(), "must be greater than 0"));
    }
    if let Some(min) = min
        && max < min
    {
        out.push(err::invalid("spec.maxReplicas", &max.to_string(), "must be greater than or equal to `minReplicas`"));
    }
    for (index, metric) in spec.get("metrics").and_then(Value::as_array).into_iter().flatten().enumerate() {
        metric_spec(metric, &format!("spec.metrics[{index}]"), out);
    }
}

fn metric_spec(metric: &Value, path: &str, out: &mut Vec<Cause>) {
    let type_ = metric.get("type").and_then(Value::as_str).unwrap_or_default();
    if type_.is_empty() {
        out.push(err::required(&format!("{path}.type"), "must specify a metric source type"));
        return;
    }
    if !METRIC_TYPES.contains(&type_) {
        out.push(err::not_supported(&format!("{path}.type"), &json!(type_), &METRIC_TYPES));
        return;
    }
    if type_ != "Resource" {
        return;
    }
    let Some(resource) = metric.get("resource").filter(|r| !r.is_null()) else {
        out.push(err::required(&format!("{path}.resource"), "must populate information for the given metric source"));
        return;
    };
    let path = format!("{path}.resource");
    if resource.get("name").and_then(Value::as_str).unwrap_or_default().is_empty() {
        out.push(err::required(&format!("{path}.name"), "must specify a resource name"));
    }
    let target = resource.get("target").unwrap_or(&Value::Null);
    let target_type = target.get("type").and_then(Value::as_str).unwrap_or_default();
    if target_type.is_empty() {
        out.push(err::required(&format!("{path}.target.type"), "must specify a metric target type"));
    } else if !TARGET_TYPES.contains(&target_type) {
        out.push(err::not_supported(&format!("{path}.target.type"), &json!(target_type), &TARGET_TYPES));
    }
    if let Some(utilization) = target.get("averageUtilization").and_then(Value::as_i64)
        && utilization <= 0
    {
        out.push(err::invalid(
            &format!("{path}.target.averageUtilization"),
            &utilization.to_string(),
            "must be greater than 0",
        ));
    }
    if target_type == "Utilization" && target.get("averageUtilization").is_none_or(Value::is_null) {
        out.push(err::required(
            &format!("{path}.target.averageUtilization"),
            "must set either a target raw value or a target utilization",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_min_replicas_cpu_and_a_given_behavior() {
        let mut hpa = json!({"spec": {"maxReplicas": 3, "scaleTargetRef": {"kind": "Deployment", "name": "d"}}});
        default(&mut hpa);
        assert_eq!(hpa["spec"]["minReplicas"], 1);
        assert_eq!(hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 80);
        assert!(hpa["spec"].get("behavior").is_none(), "behavior is defaulted only when given");
        hpa["spec"]["behavior"] = json!({"scaleDown": {"stabilizationWindowSeconds": 60}});
        default(&mut hpa);
        let behavior = &hpa["spec"]["behavior"];
        assert_eq!(behavior["scaleDown"]["stabilizationWindowSeconds"], 60);
        assert_eq!(behavior["scaleDown"]["selectPolicy"], "Max");
        assert_eq!(behavior["scaleUp"]["stabilizationWindowSeconds"], 0);
        assert_eq!(behavior["scaleUp"]["policies"].as_array().map(Vec::len), Some(2));
        let again = hpa.clone();
        default(&mut hpa);
        assert_eq!(hpa, again, "idempotent");
    }

    #[test]
    fn validation_speaks_as_upstream() {
        let mut out = Vec::new();
        validate(&json!({"spec": {"minReplicas": 0}}), &mut out);
        let found: Vec<(String, String)> = out.into_iter().map(|c| (c.field, c.message)).collect();
        let expected = [
            ("spec.scaleTargetRef.kind", "Required value"),
            ("spec.scaleTargetRef.name", "Required value"),
            ("spec.minReplicas", "Invalid value: 0: must be greater than or equal to 1"),
            ("spec.maxReplicas", "Invalid value: 0: must be greater than 0"),
        ];
        assert_eq!(found, expected.map(|(f, m)| (f.to_string(), m.to_string())));
        let mut out = Vec::new();
        let hpa = json!({"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "minReplicas": 4, "maxReplicas": 2,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}}]}});
        validate(&hpa, &mut out);
        let fields: Vec<&str> = out.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["spec.maxReplicas", "spec.metrics[0].resource.target.averageUtilization"]);
    }
}
