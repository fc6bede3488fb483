//! Writes whose answers are read only for what the operator keeps of them. kube's `Api` decodes every answer into
//! the whole typed object, managedFields included, which the caches then throw away; these requests decode the
//! answer as the watch decodes the kind (`Child::Watched`), or only its resourceVersion.

use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Request;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The part of an answer a status write keeps: the resourceVersion the server gave the object.
#[derive(Deserialize)]
pub struct Versioned {
    metadata: VersionedMeta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct VersionedMeta {
    resource_version: Option<String>,
}

impl Versioned {
    pub fn resource_version(&self) -> &str {
        self.metadata.resource_version.as_deref().unwrap_or_default()
    }
}

fn request<K: Resource<DynamicType = ()>>(namespace: &str) -> Request {
    Request::new(K::url_path(&(), Some(namespace)))
}

/// POSTs `obj` and decodes the answer as `A`.
pub async fn create<K, A>(client: &Client, namespace: &str, params: &PostParams, obj: &K) -> kube::Result<A>
where
    K: Resource<DynamicType = ()> + Serialize,
    A: DeserializeOwned,
{
    let body = serde_json::to_vec(obj).map_err(kube::Error::SerdeError)?;
    let req = request::<K>(namespace).create(params, body).map_err(kube::Error::BuildRequest)?;
    client.request(req).await
}

/// PATCHes `name` (of kind `K`), or its `subresource`, and decodes the answer as `A`.
pub async fn patch<K, A, P>(
    client: &Client,
    namespace: &str,
    name: &str,
    subresource: Option<&str>,
    params: &PatchParams,
    patch: &Patch<P>,
) -> kube::Result<A>
where
    K: Resource<DynamicType = ()>,
    A: DeserializeOwned,
    P: Serialize + std::fmt::Debug,
{
    let request = request::<K>(namespace);
    let req = match subresource {
        None => request.patch(name, params, patch),
        Some(sub) => request.patch_subresource(sub, name, params, patch),
    };
    client.request(req.map_err(kube::Error::BuildRequest)?).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_answer_is_read_for_its_resource_version_alone() {
        let answer = r#"{"apiVersion":"platform.example.com/v1alpha1","kind":"Microservice",
            "metadata":{"name":"a","resourceVersion":"42","managedFields":[{"manager":"x","fieldsV1":{"f:spec":{}}}]},
            "spec":{"image":"i","port":8080},"status":{"phase":"Ready"}}"#;
        let versioned: Versioned = serde_json::from_str(answer).expect("an answer");
        assert_eq!(versioned.resource_version(), "42");
    }
}
