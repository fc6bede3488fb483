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

fn media_type(content_type: Option<&str>) -> String {
    content_type.unwrap_or_default().split(';').next().unwrap_or_default().trim().to_ascii_lowercase()
}

fn parse_json(body: &[u8], kind: &str) -> ApiResult<Value> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {e}"
        ))
    })
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

/// A PATCH body, by its content type.
pub fn decode_patch(content_type: Option<&str>, body: &[u8], rt: &ResourceType) -> ApiResult<PatchBody> {
    if body.len() > MAX_BODY {
        return Err(ApiError::too_large());
    }
    let bad = |e: String| ApiError::bad_request(format!("error decoding patch: {e}"));
    match media_type(content_type).as_str() {
        "application/merge-patch+json" => {
            serde_json::from_slice(body).map(PatchBody::Merge).map_err(|e| bad(e.to_string()))
        }
        "application/json-patch+json" => {
            serde_json::from_slice(body).map(PatchBody::Json).map_err(|e| bad(e.to_string()))
        }
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
