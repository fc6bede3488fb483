//! Content negotiation: what the client accepts (JSON, Table, PartialObjectMetadata) and how request bodies are
//! decoded (JSON, YAML, protobuf, the four patch types).

use serde_json::{Value, json};

use crate::cluster::PatchBody;
use crate::error::{ApiError, ApiResult};
use crate::resources::ResourceType;

/// Bodies above this are refused with 413, as upstream's 3 MiB limit.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Json,
    Table,
    /// PartialObjectMetadata(List): metadata only.
    Metadata,
}

/// Picks the first acceptable media type of an Accept header, as upstream's negotiation does.
pub fn output(accept: Option<&str>) -> ApiResult<Output> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Output::Json);
    };
    for part in accept.split(',') {
        let mut pieces = part.split(';').map(str::trim);
        let media = pieces.next().unwrap_or_default().to_ascii_lowercase();
        let mut as_ = None;
        let mut group = None;
        for p in pieces {
            if let Some((k, v)) = p.split_once('=') {
                match k.trim() {
                    "as" => as_ = Some(v.trim().to_string()),
                    "g" => group = Some(v.trim().to_string()),
                    _ => {}
                }
            }
        }
        let json_like = matches!(media.as_str(), "application/json" | "*/*" | "application/*" | "application/yaml");
        if !json_like {
            continue;
        }
        match (as_.as_deref(), group.as_deref()) {
            (None, _) => return Ok(Output::Json),
            (Some("Table"), Some("meta.k8s.io")) => return Ok(Output::Table),
            (Some("PartialObjectMetadata" | "PartialObjectMetadataList"), Some("meta.k8s.io")) => {
                return Ok(Output::Metadata);
            }
            _ => continue,
        }
    }
    Err(ApiError::new(
        406,
        "NotAcceptable",
        format!("only the following media types are accepted: application/json, application/yaml (got {accept:?})"),
    ))
}

pub fn media_type(content_type: Option<&str>) -> String {
    content_type.unwrap_or_default().split(';').next().unwrap_or_default().trim().to_ascii_lowercase()
}

/// An unparsable body gets upstream's `transformDecodeError` text: Go's JSON syntax error and the start of the
/// body (`summarizeData`).
fn parse_json(body: &[u8], kind: &str) -> ApiResult<Value> {
    serde_json::from_slice(body).map_err(|e| {
        let (error, summary) = match crate::gojson::syntax_error(body) {
            Some(go) => (go, summarize(body)),
            None => (e.to_string(), summarize(body)),
        };
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {error} ({summary})"
        ))
    })
}

/// Upstream's `summarizeData(body, 30)`: a body that starts like an object as text, any other in hex.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let head = &body[..body.len().min(MAX)];
    let more = if body.len() > MAX { " ..." } else { "" };
    match body.first() {
        None => "<empty>".to_string(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => format!("{}{more}", head.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

fn parse_yaml(body: &[u8]) -> ApiResult<Value> {
    serde_saphyr::from_slice::<Value>(body)
        .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))
}

/// A create/update body: JSON, YAML or protobuf.
pub fn decode_object(content_type: Option<&str>, body: &[u8], rt: &ResourceType) -> ApiResult<Value> {
    if body.len() > MAX_BODY {
        return Err(ApiError::too_large());
    }
    match media_type(content_type).as_str() {
        "" | "application/json" => parse_json(body, &rt.kind),
        "application/yaml" | "application/x-yaml" | "text/yaml" => parse_yaml(body),
        crate::protobuf::CONTENT_TYPE => crate::protobuf::decode_body(body),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// Dotted paths (`data`, `spec.ports[0].name`) of the object members a JSON body repeats: serde_json keeps the
/// last one silently, upstream's strict decoder reports each as `duplicate field "path"`. A body that is not
/// JSON yields none (its decoding reports the error).
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let seed = DuplicateSeed { path: String::new(), found: &mut found };
    if serde::de::DeserializeSeed::deserialize(seed, &mut de).is_err() {
        return Vec::new();
    }
    found
}

/// Walks a JSON document without building it, noting repeated member names.
struct DuplicateSeed<'a> {
    path: String,
    found: &'a mut Vec<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for DuplicateSeed<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for DuplicateSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let DuplicateSeed { path, found } = self;
        let mut i = 0;
        while seq.next_element_seed(DuplicateSeed { path: format!("{path}[{i}]"), found: &mut *found })?.is_some() {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let DuplicateSeed { path, found } = self;
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            if !seen.insert(key) {
                found.push(child.clone());
            }
            map.next_value_seed(DuplicateSeed { path: child, found: &mut *found })?;
        }
        Ok(())
    }
}

/// A PATCH body, by its content type.
pub fn decode_patch(content_type: Option<&str>, body: &[u8], rt: &ResourceType) -> ApiResult<PatchBody> {
    if body.len() > MAX_BODY {
        return Err(ApiError::too_large());
    }
    let bad = |e: String| ApiError::bad_request(format!("error decoding patch: {e}"));
    match media_type(content_type).as_str() {
        // Upstream hands the raw bytes to evanphx/json-patch's MergePatch, whose error for a body that is not JSON
        // is this fixed text.
        "application/merge-patch+json" => {
            serde_json::from_slice(body).map(PatchBody::Merge).map_err(|_| ApiError::bad_request("invalid JSON patch"))
        }
        "application/json-patch+json" => serde_json::from_slice(body)
            .map(PatchBody::Json)
            .map_err(|e| bad(crate::gojson::syntax_error(body).unwrap_or_else(|| e.to_string()))),
        "application/strategic-merge-patch+json" => {
            serde_json::from_slice(body).map(PatchBody::Strategic).map_err(|e| bad(e.to_string()))
        }
        "application/apply-patch+yaml" | "application/apply-patch+json" => {
            // JSON is YAML; try the fast parser first.
            let v = match serde_json::from_slice::<Value>(body) {
                Ok(v) => v,
                Err(_) => parse_yaml(body)?,
            };
            if !v.is_object() {
                return Err(ApiError::bad_request(format!(
                    "error decoding YAML: the apply body must be a {} object",
                    rt.kind
                )));
            }
            Ok(PatchBody::Apply(v))
        }
        _ => Err(ApiError::unsupported_patch_type()),
    }
}

/// The object's metadata in PartialObjectMetadata form.
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_fields_are_found_with_their_path() {
        let body = br#"{"metadata":{"name":"a","name":"b"},"data":{"x":"1"},"data":{"y":"2"},"l":[{"k":1,"k":2}]}"#;
        assert_eq!(duplicate_fields(body), ["metadata.name", "data", "l[0].k"]);
        assert!(duplicate_fields(br#"{"a":{"a":1}}"#).is_empty());
        assert!(duplicate_fields(b"not json").is_empty());
    }

    #[test]
    fn kubectl_get_asks_for_tables() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(output(Some(a)).unwrap(), Output::Table);
    }

    #[test]
    fn metadata_watches_ask_for_partial_metadata() {
        let a = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(output(Some(a)).unwrap(), Output::Metadata);
    }

    #[test]
    fn protobuf_with_json_fallback_gets_json() {
        assert_eq!(output(Some("application/vnd.kubernetes.protobuf,application/json")).unwrap(), Output::Json);
        assert_eq!(output(Some("application/vnd.kubernetes.protobuf")).unwrap_err().code, 406);
    }
}
