//! Resource requests: verb mapping as upstream does it (GET collection = list, `watch=true` = watch, ...), query
//! options, faults, counting, and the verbs' responses.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query, Request};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};

use super::negotiate::{self, Output};
use super::route::ResourcePath;
use super::{AppState, DEFAULT_WATCH_TIMEOUT, error_response, identity, json_response, output};
use crate::auth::UserInfo;
use crate::cluster::{
    DeleteOptions, DeleteOutcome, FieldValidation, ListOptions, PropagationPolicy, Subresource, WatchEvent, WatchItem,
    WatchOptions, WriteOptions, WriteOutcome,
};
use crate::error::{ApiError, ApiResult, Cause};
use crate::faults::FaultDecision;
use crate::names::{err, quote};
use crate::rbac::Attributes;
use crate::resources::{ResourceRef, ResourceType};

struct Params(Vec<(String, String)>);

impl Params {
    fn from_uri(uri: &axum::http::Uri) -> Self {
        // An unparsable query is treated as empty: upstream ignores what it does not understand.
        Params(Query::<Vec<(String, String)>>::try_from_uri(uri).map(|q| q.0).unwrap_or_default())
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1" | "True"))
    }
}

fn verb_of(method: &Method, path: &ResourcePath, q: &Params) -> Option<&'static str> {
    let named = path.name.is_some();
    Some(match (method.as_str(), named) {
        ("GET", false) if path.watch_prefix || q.flag("watch") => "watch",
        ("GET", true) if path.watch_prefix => "watch",
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", false) => "create",
        // Subresources created on an object: serviceaccounts/NAME/token.
        ("POST", true) if path.subresource.is_some() => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return None,
    })
}

/// What the authorizer is asked for this request (upstream's RequestInfo): lists and watches limited to one
/// `metadata.name` by field selector name that object, so resourceNames rules can allow them.
fn attributes(verb: &str, path: &ResourcePath, q: &Params) -> Attributes {
    let mut name = path.name.clone().unwrap_or_default();
    if name.is_empty() && matches!(verb, "list" | "watch") {
        name = q.get("fieldSelector").and_then(exact_name).unwrap_or_default();
    }
    Attributes::Resource {
        verb: verb.to_string(),
        group: path.group.clone(),
        resource: path.plural.clone(),
        subresource: path.subresource.clone().unwrap_or_default(),
        namespace: path.namespace.clone().unwrap_or_default(),
        name,
    }
}

/// `metadata.name=X` (or `==`) among a field selector's terms.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let value = term.trim().strip_prefix("metadata.name")?;
        let value = value.strip_prefix("==").or_else(|| value.strip_prefix('='))?;
        (!value.is_empty() && crate::names::path_segment_errors(value).is_empty()).then(|| value.to_string())
    })
}

pub async fn handle(state: &AppState, user: &UserInfo, path: ResourcePath, req: Request) -> Response {
    let q = Params::from_uri(req.uri());
    let resource_label = match &path.subresource {
        Some(s) => format!("{}/{s}", path.plural),
        None => path.plural.clone(),
    };
    let Some(verb) = verb_of(req.method(), &path, &q) else {
        state.counters.record(&req.method().as_str().to_lowercase(), &resource_label, 405);
        return error_response(&ApiError::method_not_allowed());
    };
    let attrs = attributes(verb, &path, &q);
    let allowed = identity::authorize(state, user, &attrs);
    if !allowed.allowed {
        state.counters.record(verb, &resource_label, 403);
        return error_response(&crate::rbac::forbidden(user, &attrs, &allowed.reason));
    }
    state.faults.wait_unpaused().await;
    let (delay, decision) = state.faults.decide(verb, &resource_label);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let response = match decision {
        Some(FaultDecision::Fail(e)) => error_response(&e),
        None => match serve(state, user, verb, &path, &resource_label, q, req).await {
            Ok(r) => r,
            Err(e) => error_response(&e),
        },
    };
    state.counters.record(verb, &resource_label, response.status().as_u16());
    response
}

fn resolve(state: &AppState, path: &ResourcePath) -> ApiResult<ResourceRef> {
    let rt = state.cluster.resolve(&path.group, &path.version, &path.plural)?;
    // Cluster-scoped types have no namespaced paths.
    if !rt.namespaced && path.namespace.is_some() {
        return Err(ApiError::path_not_found());
    }
    match path.subresource.as_deref() {
        None => {}
        Some("status") if rt.subresources.status => {}
        Some("scale") if rt.subresources.scale.is_some() => {}
        Some("finalize") if rt.group.is_empty() && rt.plural == "namespaces" => {}
        Some("token") if rt.group.is_empty() && rt.plural == "serviceaccounts" => {}
        Some(_) => return Err(ApiError::path_not_found()),
    }
    Ok(rt)
}

fn subresource(path: &ResourcePath) -> Subresource {
    match path.subresource.as_deref() {
        Some("status") => Subresource::Status,
        Some("scale") => Subresource::Scale,
        _ => Subresource::Main,
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Upstream's default field manager: the user agent up to its first `/`.
fn manager_from_user_agent(headers: &HeaderMap) -> String {
    let ua = header_str(headers, header::USER_AGENT).unwrap_or("unknown");
    let prefix = ua.split('/').next().unwrap_or(ua);
    prefix.chars().take(128).collect()
}

/// `options_kind` names the options type upstream validates (`CreateOptions`, `UpdateOptions`, `PatchOptions`):
/// a bad value is a 422 about that type, with every bad option as a cause.
fn write_options(q: &Params, headers: &HeaderMap, apply: bool, options_kind: &str) -> ApiResult<WriteOptions> {
    let mut causes = Vec::new();
    let dry_run = match q.get("dryRun") {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            // dryRun is a []string upstream, printed as a list.
            causes.push(Cause::new(
                "FieldValueNotSupported",
                format!("Unsupported value: [{}]: supported values: \"All\"", quote(other)),
                "dryRun",
            ));
            false
        }
    };
    let field_validation = match q.get("fieldValidation") {
        None | Some("") | Some("Warn") => FieldValidation::Warn,
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        Some(other) => {
            causes.push(err::not_supported(
                "fieldValidation",
                &Value::String(other.to_string()),
                &["", "Ignore", "Strict", "Warn"],
            ));
            FieldValidation::Warn
        }
    };
    if !causes.is_empty() {
        return Err(ApiError::invalid_options(options_kind, causes));
    }
    let field_manager = match q.get("fieldManager").filter(|m| !m.is_empty()) {
        Some(m) => Some(m.to_string()),
        // Apply requires an explicit manager; the cluster answers that with 422.
        None if apply => None,
        None => Some(manager_from_user_agent(headers)),
    };
    Ok(WriteOptions { dry_run, field_manager, field_validation, force: q.flag("force") })
}

/// fieldValidation=Strict refuses a JSON body that repeats a member, as upstream's strict decoder does
/// (serde_json would silently keep the last one).
fn refuse_duplicates(rt: &ResourceType, content_type: Option<&str>, body: &[u8], opts: &WriteOptions) -> ApiResult<()> {
    if opts.field_validation != FieldValidation::Strict
        || !matches!(negotiate::media_type(content_type).as_str(), "" | "application/json")
    {
        return Ok(());
    }
    let problems: Vec<String> =
        negotiate::duplicate_fields(body).into_iter().map(|p| format!("duplicate field \"{p}\"")).collect();
    if problems.is_empty() { Ok(()) } else { Err(crate::cluster::strict_decoding_error(rt, &problems)) }
}

fn list_options(q: &Params) -> ApiResult<ListOptions> {
    let limit = match q.get("limit").filter(|s| !s.is_empty()) {
        None => None,
        Some(l) => {
            Some(l.parse::<i64>().map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?.max(0) as usize)
        }
    };
    Ok(ListOptions {
        label_selector: q.get("labelSelector").map(String::from),
        field_selector: q.get("fieldSelector").map(String::from),
        limit,
        continue_token: q.get("continue").map(String::from),
        resource_version: q.get("resourceVersion").map(String::from),
        resource_version_match: q.get("resourceVersionMatch").map(String::from),
    })
}

async fn read_body(req: Request) -> ApiResult<(HeaderMap, Vec<u8>)> {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, negotiate::MAX_BODY).await.map_err(|_| ApiError::too_large())?;
    Ok((parts.headers, bytes.to_vec()))
}

fn with_warnings(mut r: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('"', "\\\""));
        if let Ok(v) = HeaderValue::from_str(&text) {
            r.headers_mut().append(header::WARNING, v);
        }
    }
    r
}

fn write_response(rt: &ResourceRef, out: WriteOutcome, created_code: u16, fmt: Output) -> Response {
    let code = if out.created { created_code } else { 200 };
    with_warnings(json_response(code, &output::object(rt, out.object, fmt)), &out.warnings)
}

// Over 80 lines on purpose: The dispatch of every verb on a resource path (one arm per verb), after the shared request
// checks; a table of verbs more than a sequence, and split per verb it would repeat those checks.
#[allow(clippy::too_many_arguments)]
async fn serve(
    state: &AppState,
    user: &UserInfo,
    verb: &str,
    path: &ResourcePath,
    resource_label: &str,
    q: Params,
    req: Request,
) -> ApiResult<Response> {
    let rt = resolve(state, path)?;
    if path.subresource.is_none() && !rt.verbs.iter().any(|v| v == verb) {
        return Err(ApiError::method_not_allowed());
    }
    let cluster = &state.cluster;
    let ns = path.namespace.as_deref();
    let name = path.name.as_deref().unwrap_or_default();
    // Namespaced objects are addressed through their namespace.
    if rt.namespaced && path.name.is_some() && ns.is_none() {
        return Err(ApiError::path_not_found());
    }
    let fmt = negotiate::output(header_str(req.headers(), header::ACCEPT))?;
    match verb {
        "get" => {
            let obj = match subresource(path) {
                Subresource::Scale => cluster.get_scale(&rt, ns, name)?,
                _ => cluster.get(&rt, ns, name)?,
            };
            Ok(json_response(200, &output::object(&rt, obj, fmt)))
        }
        "list" => {
            let list = cluster.list(&rt, ns, &list_options(&q)?)?;
            Ok(json_response(200, &output::list(&rt, list, fmt)))
        }
        "watch" => watch(state, &rt, path, resource_label, &q, fmt),
        "create" => {
            if rt.namespaced && ns.is_none() {
                return Err(ApiError::method_not_allowed());
            }
            let ct = header_str(req.headers(), header::CONTENT_TYPE).map(String::from);
            let (headers, body) = read_body(req).await?;
            let obj = negotiate::decode_object(ct.as_deref(), &body, &rt)?;
            let opts = write_options(&q, &headers, false, "CreateOptions")?;
            let manager = opts.field_manager.as_deref().unwrap_or_default();
            if let Some(answer) = identity_create(state, user, &rt, path, &obj, manager)? {
                return Ok(json_response(201, &answer));
            }
            refuse_duplicates(&rt, ct.as_deref(), &body, &opts)?;
            let out = cluster.create(&rt, ns, obj, &opts)?;
            Ok(write_response(&rt, out, 201, fmt))
        }
        "update" => {
            let ct = header_str(req.headers(), header::CONTENT_TYPE).map(String::from);
            let (headers, body) = read_body(req).await?;
            let opts = write_options(&q, &headers, false, "UpdateOptions")?;
            if path.subresource.as_deref() == Some("finalize") {
                cluster.finalize_namespace(name)?;
                return cluster.get(&rt, None, name).map(|o| json_response(200, &o)).or_else(|e| {
                    if e.code == 404 {
                        Ok(json_response(
                            200,
                            &json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": name}}),
                        ))
                    } else {
                        Err(e)
                    }
                });
            }
            let obj = negotiate::decode_object(ct.as_deref(), &body, &rt)?;
            refuse_duplicates(&rt, ct.as_deref(), &body, &opts)?;
            let out = cluster.update(&rt, ns, name, obj, subresource(path), &opts)?;
            Ok(write_response(&rt, out, 201, fmt))
        }
        "patch" => {
            let ct = header_str(req.headers(), header::CONTENT_TYPE).map(String::from);
            let (headers, body) = read_body(req).await?;
            let patch = negotiate::decode_patch(ct.as_deref(), &body, &rt)?;
            let apply = matches!(patch, crate::cluster::PatchBody::Apply(_));
            let opts = write_options(&q, &headers, apply, "PatchOptions")?;
            // An apply that creates the object needs create permission too, as upstream checks it.
            if apply && state.rbac && subresource(path) == Subresource::Main && cluster.get(&rt, ns, name).is_err() {
                let create = Attributes::Resource {
                    verb: "create".into(),
                    group: rt.group.clone(),
                    resource: rt.plural.clone(),
                    subresource: String::new(),
                    namespace: ns.unwrap_or_default().to_string(),
                    name: name.to_string(),
                };
                let decision = identity::authorize(state, user, &create);
                if !decision.allowed {
                    return Err(crate::rbac::forbidden(user, &create, &decision.reason));
                }
            }
            let out = cluster.patch(&rt, ns, name, patch, subresource(path), &opts)?;
            Ok(write_response(&rt, out, 201, fmt))
        }
        "delete" => {
            let (_, body) = read_body(req).await?;
            let opts = delete_options(&q, &body)?;
            match cluster.delete(&rt, ns, name, &opts)? {
                DeleteOutcome::Pending(obj) => Ok(json_response(200, &output::object(&rt, obj, fmt))),
                // Pods answer with the object; everything else with a Success Status.
                DeleteOutcome::Deleted(obj) if rt.group.is_empty() && rt.plural == "pods" => {
                    Ok(json_response(200, &output::object(&rt, obj, fmt)))
                }
                DeleteOutcome::Deleted(obj) => Ok(json_response(200, &success_status(&rt, &obj))),
            }
        }
        "deletecollection" => {
            let (_, body) = read_body(req).await?;
            let opts = delete_options(&q, &body)?;
            let items = cluster.delete_collection(&rt, ns, &list_options(&q)?, &opts)?;
            let list = crate::cluster::ObjectList {
                items,
                resource_version: cluster.resource_version().to_string(),
                continue_token: None,
                remaining_item_count: None,
            };
            Ok(json_response(200, &output::list(&rt, list, fmt)))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// Creates that store nothing: access and rules reviews, SelfSubjectReview, TokenRequest.
fn identity_create(
    state: &AppState,
    user: &UserInfo,
    rt: &ResourceRef,
    path: &ResourcePath,
    body: &Value,
    manager: &str,
) -> ApiResult<Option<Value>> {
    Ok(match (rt.group.as_str(), rt.plural.as_str(), path.subresource.as_deref()) {
        ("authorization.k8s.io", "selfsubjectaccessreviews", None) => {
            let mut review = identity::self_subject_access_review(state, user, body)?;
            review["metadata"] = identity::review_metadata(rt, body, manager);
            Some(review)
        }
        ("authorization.k8s.io", "selfsubjectrulesreviews", None) => {
            let mut review = identity::self_subject_rules_review(state, user, body)?;
            review["metadata"] = identity::review_metadata(rt, body, manager);
            Some(review)
        }
        ("authentication.k8s.io", "selfsubjectreviews", None) => Some(identity::self_subject_review(user)),
        ("", "serviceaccounts", Some("token")) => {
            let (ns, name) = (path.namespace.as_deref().unwrap_or_default(), path.name.as_deref().unwrap_or_default());
            Some(identity::token_request(state, ns, name, body)?)
        }
        _ => None,
    })
}

fn success_status(rt: &ResourceRef, obj: &Value) -> Value {
    let mut details = json!({
        "name": obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
        "kind": rt.plural,
        "uid": obj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
    });
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

fn delete_options(q: &Params, body: &[u8]) -> ApiResult<DeleteOptions> {
    let b: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    };
    let policy_str = q
        .get("propagationPolicy")
        .map(String::from)
        .or_else(|| b.get("propagationPolicy").and_then(Value::as_str).map(String::from));
    let mut propagation_policy = match policy_str.as_deref() {
        None | Some("") => None,
        Some("Background") => Some(PropagationPolicy::Background),
        Some("Foreground") => Some(PropagationPolicy::Foreground),
        Some("Orphan") => Some(PropagationPolicy::Orphan),
        Some(other) => {
            return Err(ApiError::invalid_options(
                "DeleteOptions",
                vec![err::not_supported(
                    "propagationPolicy",
                    &Value::String(other.to_string()),
                    &["Foreground", "Background", "Orphan", "nil"],
                )],
            ));
        }
    };
    let orphan =
        q.get("orphanDependents").map(|v| v == "true").or_else(|| b.get("orphanDependents").and_then(Value::as_bool));
    if propagation_policy.is_none() {
        propagation_policy = match orphan {
            Some(true) => Some(PropagationPolicy::Orphan),
            Some(false) => Some(PropagationPolicy::Background),
            None => None,
        };
    }
    let dry_run = q.get("dryRun") == Some("All")
        || b.get("dryRun").and_then(Value::as_array).is_some_and(|a| a.iter().any(|v| v == "All"));
    let grace_period_seconds = q
        .get("gracePeriodSeconds")
        .and_then(|s| s.parse().ok())
        .or_else(|| b.get("gracePeriodSeconds").and_then(Value::as_i64));
    Ok(DeleteOptions {
        propagation_policy,
        precondition_uid: b.pointer("/preconditions/uid").and_then(Value::as_str).map(String::from),
        precondition_resource_version: b
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(String::from),
        grace_period_seconds,
        dry_run,
    })
}

fn event_line(rt: &ResourceRef, ev: WatchEvent, fmt: Output) -> Vec<u8> {
    let (kind, obj) = match ev {
        WatchEvent::Added(o) => ("ADDED", output::object(rt, o, fmt)),
        WatchEvent::Modified(o) => ("MODIFIED", output::object(rt, o, fmt)),
        WatchEvent::Deleted(o) => ("DELETED", output::object(rt, o, fmt)),
        WatchEvent::Bookmark(o) => {
            let o = if fmt == Output::Metadata { negotiate::partial_metadata(&o) } else { o };
            ("BOOKMARK", o)
        }
        WatchEvent::Error(s) => ("ERROR", s),
    };
    crate::cluster::watch_line(kind, &obj)
}

fn watch(
    state: &AppState,
    rt: &ResourceRef,
    path: &ResourcePath,
    resource_label: &str,
    q: &Params,
    fmt: Output,
) -> ApiResult<Response> {
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_WATCH_TIMEOUT);
    let mut label_selector = q.get("labelSelector").map(String::from);
    let mut field_selector = q.get("fieldSelector").map(String::from);
    // The legacy /watch/.../NAME path watches one object.
    if let Some(name) = path.name.as_deref() {
        let by_name = format!("metadata.name={name}");
        field_selector = Some(match field_selector.filter(|f| !f.is_empty()) {
            Some(f) => format!("{f},{by_name}"),
            None => by_name,
        });
    }
    label_selector = label_selector.filter(|s| !s.is_empty());
    let opts = WatchOptions {
        label_selector,
        field_selector,
        resource_version: q.get("resourceVersion").map(String::from),
        resource_version_match: q.get("resourceVersionMatch").map(String::from),
        allow_bookmarks: q.flag("allowWatchBookmarks"),
        send_initial_events: q.flag("sendInitialEvents"),
        timeout: Some(timeout),
    };
    if opts.send_initial_events && !state.watch_list {
        return Err(ApiError::invalid_options(
            "ListOptions",
            vec![Cause::new(
                "FieldValueForbidden",
                "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                "sendInitialEvents",
            )],
        ));
    }
    let rt2 = rt.clone();
    let to_item = move |ev: WatchEvent| WatchItem::Event(ev);
    let stream: futures::stream::BoxStream<'static, WatchItem> = if state.faults.take_forced_gone(resource_label) {
        let asked = q.get("resourceVersion").and_then(|r| r.parse().ok()).unwrap_or(0);
        let gone = crate::store::too_old(asked, state.cluster.resource_version());
        futures::stream::once(async move { WatchItem::Event(WatchEvent::Error(gone.to_status())) }).boxed()
    } else {
        let started = if fmt == Output::Json {
            state.cluster.watch_json(rt, path.namespace.as_deref(), opts)
        } else {
            state.cluster.watch(rt, path.namespace.as_deref(), opts).map(|s| s.map(to_item).boxed())
        };
        match started {
            Ok(s) => s,
            // A too-old resourceVersion is reported inside the stream, as upstream's watch cache does.
            Err(e) if e.code == 410 => {
                futures::stream::once(async move { WatchItem::Event(WatchEvent::Error(e.to_status())) }).boxed()
            }
            Err(e) => return Err(e),
        }
    };
    let limits = state.faults.watch_faults(resource_label);
    let stream = match limits.drop_after_events {
        Some(n) => stream.take(n as usize).boxed(),
        None => stream,
    };
    let stream = match limits.drop_after {
        Some(d) => stream.take_until(tokio::time::sleep(d)).boxed(),
        None => stream,
    };
    // Events already waiting go out in one chunk: one write per burst instead of one per event.
    let body = Body::from_stream(stream.ready_chunks(256).map(move |items| {
        let mut out = Vec::new();
        for item in items {
            match item {
                WatchItem::Event(ev) => out.extend_from_slice(&event_line(&rt2, ev, fmt)),
                WatchItem::Line(line) => out.extend_from_slice(&line),
            }
        }
        Ok::<_, Infallible>(bytes::Bytes::from(out))
    }));
    let mut r = Response::new(body);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(r)
}
