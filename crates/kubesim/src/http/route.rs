//! URL → what is asked for. Resource paths follow upstream's layout:
//! `/api/v1[/watch][/namespaces/NS]/PLURAL[/NAME[/SUB]]` and the same under `/apis/GROUP/VERSION`.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Version,
    /// `/api`
    Api,
    /// `/apis`
    Apis,
    /// `/apis/GROUP`
    Group(String),
    /// `/api/v1`, `/apis/GROUP/VERSION`
    ResourceList {
        group: String,
        version: String,
    },
    OpenApiRoot,
    /// `/openapi/v3/apis/G/V`, `/openapi/v3/api/v1`
    OpenApiDoc(String),
    Health,
    Metrics,
    Faults,
    Resource(ResourcePath),
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The legacy `/watch/` path prefix.
    pub watch_prefix: bool,
}

pub fn parse(path: &str) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "readyz" | "livez", ..] => Route::Health,
        ["metrics"] => Route::Metrics,
        ["_kubesim", "faults"] => Route::Faults,
        ["openapi", "v3"] => Route::OpenApiRoot,
        ["openapi", "v3", rest @ ..] if !rest.is_empty() => Route::OpenApiDoc(rest.join("/")),
        ["api"] => Route::Api,
        ["apis"] => Route::Apis,
        ["apis", group] => Route::Group(group.to_string()),
        ["api", version, rest @ ..] => resource(String::new(), version.to_string(), rest),
        ["apis", group, version, rest @ ..] => resource(group.to_string(), version.to_string(), rest),
        _ => Route::NotFound,
    }
}

fn resource(group: String, version: String, rest: &[&str]) -> Route {
    let (watch_prefix, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let mk = |plural: &str, namespace: Option<&str>, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(ResourcePath {
            group: group.clone(),
            version: version.clone(),
            plural: plural.to_string(),
            namespace: namespace.map(String::from),
            name: name.map(String::from),
            subresource: sub.map(String::from),
            watch_prefix,
        })
    };
    match rest {
        [] if !watch_prefix => Route::ResourceList { group: group.clone(), version: version.clone() },
        [plural] => mk(plural, None, None, None),
        [plural, name] => mk(plural, None, Some(name), None),
        // A namespace's own subresources, not a collection inside it.
        ["namespaces", name, sub @ ("status" | "finalize")] if group.is_empty() => {
            mk("namespaces", None, Some(name), Some(sub))
        }
        ["namespaces", ns, plural] => mk(plural, Some(ns), None, None),
        [plural, name, sub] => mk(plural, None, Some(name), Some(sub)),
        ["namespaces", ns, plural, name] => mk(plural, Some(ns), Some(name), None),
        ["namespaces", ns, plural, name, sub] => mk(plural, Some(ns), Some(name), Some(sub)),
        _ => Route::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse(path) {
            Route::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaced_objects_and_subresources() {
        let r = res("/apis/apps/v1/namespaces/default/deployments/web/scale");
        assert_eq!((r.group.as_str(), r.plural.as_str()), ("apps", "deployments"));
        assert_eq!(r.namespace.as_deref(), Some("default"));
        assert_eq!(r.name.as_deref(), Some("web"));
        assert_eq!(r.subresource.as_deref(), Some("scale"));
    }

    #[test]
    fn namespaces_themselves() {
        let r = res("/api/v1/namespaces/foo");
        assert_eq!((r.plural.as_str(), r.name.as_deref(), r.namespace.as_deref()), ("namespaces", Some("foo"), None));
        let r = res("/api/v1/namespaces/foo/status");
        assert_eq!(r.subresource.as_deref(), Some("status"));
        let r = res("/api/v1/namespaces/foo/pods");
        assert_eq!((r.plural.as_str(), r.namespace.as_deref(), r.name.as_deref()), ("pods", Some("foo"), None));
    }

    #[test]
    fn discovery_and_legacy_watch_paths() {
        assert_eq!(parse("/api/v1"), Route::ResourceList { group: String::new(), version: "v1".into() });
        assert_eq!(parse("/apis/apps"), Route::Group("apps".into()));
        assert!(res("/api/v1/watch/namespaces/default/pods").watch_prefix);
        assert_eq!(parse("/nope"), Route::NotFound);
    }
}
