//! The reads: get, list (with continue tokens and resourceVersion semantics) and watch.

use super::*;
use base64::DecodeError;
use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

impl Cluster {
    pub(super) fn selectors(
        &self,
        rt: &ResourceType,
        labels: Option<&str>,
        fields: Option<&str>,
    ) -> ApiResult<Selectors> {
        let labels = labels.filter(|s| !s.is_empty()).map(LabelSelector::parse).transpose()?;
        let fields = match fields.filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => {
                let sel = FieldSelector::parse(s)?;
                crate::builtin::check_field_selector(rt, &sel)?;
                Some(sel)
            }
        };
        Ok(Selectors { labels, fields })
    }

    pub fn get(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> ApiResult<Value> {
        let st = self.inner.store.lock();
        st.get(&ResourceKey::of(rt), &key_of(rt, ns, name))
            .map(|o| present(rt, &o))
            .ok_or_else(|| ApiError::not_found(&rt.plural, &rt.group, name))
    }

    // Over 80 lines on purpose: resourceVersion semantics, selectors and continue tokens interact, and one reading in
    // upstream order (storage/cacher `GetList`) is what checking it against upstream needs.
    pub fn list(&self, rt: &ResourceType, ns: Option<&str>, opts: &ListOptions) -> ApiResult<ObjectList> {
        let sel = self.selectors(rt, opts.label_selector.as_deref(), opts.field_selector.as_deref())?;
        let filter = watch::Filter {
            rt: Arc::new(rt.clone()),
            key: ResourceKey::of(rt),
            ns: None,
            labels: sel.labels,
            fields: sel.fields,
        };
        let ns = if rt.namespaced { ns } else { None };
        let rv_param = opts.resource_version.as_deref().filter(|s| !s.is_empty());
        let rv_match = opts.resource_version_match.as_deref().filter(|s| !s.is_empty());
        if rv_match.is_some() && rv_param.is_none() {
            return Err(ApiError::invalid_options(
                "ListOptions",
                vec![crate::names::err::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )],
            ));
        }
        let st = self.inner.store.lock();
        let current = st.current_rv();
        let (at, after) = match opts.continue_token.as_deref().filter(|s| !s.is_empty()) {
            Some(token) => {
                if rv_param.is_some_and(|r| r != "0") {
                    return Err(ApiError::bad_request(
                        "specifying resource version is not allowed when using continue",
                    ));
                }
                let (rv, key) = decode_continue(token)?;
                if rv < st.oldest_available() {
                    return Err(ApiError::gone(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                    ));
                }
                (rv, Some(key))
            }
            None => match (rv_param, rv_match) {
                (None, _) | (Some("0"), None | Some("NotOlderThan")) => (current, None),
                (Some(r), Some("Exact")) => {
                    let rv = parse_rv(r)?;
                    if rv > current {
                        return Err(too_large_rv(rv, current));
                    }
                    (rv, None)
                }
                (Some(r), None | Some("NotOlderThan")) => {
                    let rv = parse_rv(r)?;
                    if rv > current {
                        return Err(too_large_rv(rv, current));
                    }
                    (current, None)
                }
                (Some(_), Some(other)) => {
                    // Upstream's ValidateListOptions: an unknown match is an invalid value.
                    return Err(ApiError::invalid_options(
                        "ListOptions",
                        vec![crate::names::err::invalid_str("resourceVersionMatch", other, "unknown value")],
                    ));
                }
            },
        };
        let objects = st.range_at(&filter.key, ns, after.as_ref(), at)?;
        drop(st);
        let unfiltered = filter.labels.is_none() && filter.fields.is_none();
        let limit = opts.limit.filter(|l| *l > 0);
        let mut items = Vec::new();
        let mut last_key = None;
        let mut remaining = 0u64;
        for (k, obj) in objects {
            if !filter.matches(&obj) {
                continue;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                remaining += 1;
                if !unfiltered {
                    break;
                }
                continue;
            }
            items.push(present(rt, &obj));
            last_key = Some(k);
        }
        let more = remaining > 0;
        Ok(ObjectList {
            items,
            resource_version: at.to_string(),
            continue_token: if more { last_key.map(|k| encode_continue(at, &k)) } else { None },
            remaining_item_count: if more && unfiltered { Some(remaining) } else { None },
        })
    }

    pub fn watch(&self, rt: &ResourceType, ns: Option<&str>, opts: WatchOptions) -> ApiResult<WatchStream> {
        Ok(self.watcher(rt, ns, opts, false)?.into_stream())
    }

    /// The HTTP layer's JSON watch: plain events come as JSON lines serialised once for all watchers.
    pub fn watch_json(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: WatchOptions,
    ) -> ApiResult<BoxStream<'static, WatchItem>> {
        Ok(self.watcher(rt, ns, opts, true)?.into_items())
    }

    pub(super) fn watcher(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: WatchOptions,
        lines: bool,
    ) -> ApiResult<watch::Watcher> {
        let rt = self.canonical(rt)?;
        let sel = self.selectors(&rt, opts.label_selector.as_deref(), opts.field_selector.as_deref())?;
        let ns = if rt.namespaced { ns.filter(|s| !s.is_empty()).map(String::from) } else { None };
        let filter = watch::Filter {
            rt: rt.clone(),
            key: ResourceKey::of(&rt),
            ns: ns.clone(),
            labels: sel.labels,
            fields: sel.fields,
        };
        let rv = opts.resource_version.as_deref().filter(|s| !s.is_empty() && *s != "0").map(parse_rv).transpose()?;
        if opts.send_initial_events && opts.resource_version_match.as_deref() != Some("NotOlderThan") {
            return Err(ApiError::invalid(
                "ListOptions",
                "meta.k8s.io",
                "",
                vec![Cause::new(
                    "FieldValueForbidden",
                    "Forbidden: sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan",
                    "sendInitialEvents",
                )],
            ));
        }
        let from = if opts.send_initial_events { None } else { rv };
        let start = {
            let st = self.inner.store.lock();
            st.watch_start(&filter.key, ns.as_deref(), from)?
        };
        let mut w = watch::Watcher {
            inner: self.inner.clone(),
            rt: rt.clone(),
            filter,
            rx: start.rx,
            pending: Default::default(),
            last_rv: from.unwrap_or(start.current_rv),
            deadline: tokio::time::Instant::now() + opts.timeout.unwrap_or(Duration::from_secs(1800)),
            bookmarks: if opts.allow_bookmarks {
                Some(*self.inner.bookmark_interval.read().unwrap_or_else(|p| p.into_inner()))
            } else {
                None
            },
            done: false,
            lines,
        };
        for obj in &start.initial {
            if w.filter.matches(obj) {
                w.pending.push_back(watch::WatchItem::Event(WatchEvent::Added(present(&rt, obj))));
            }
        }
        // The end of the initial events is a bookmark: only a watcher that allows bookmarks gets it (upstream
        // accepts sendInitialEvents without allowWatchBookmarks and just never marks the end).
        if opts.send_initial_events && opts.allow_bookmarks {
            w.pending.push_back(watch::WatchItem::Event(WatchEvent::Bookmark(watch::bookmark(
                &rt,
                start.current_rv,
                true,
            ))));
        }
        w.replay(&start.replay);
        Ok(w)
    }

    /// Every committed change, for in-process controllers. A lagging subscriber gets `RecvError::Lagged` and
    /// should re-list.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.inner.store.subscribe()
    }
}

/// A continue token: the list's resourceVersion and the last key returned, as JSON in unpadded base64url like
/// upstream's (opaque to clients; the shared encoding makes a malformed token fail with upstream's text).
pub(super) fn encode_continue(rv: u64, key: &ObjectKey) -> String {
    let raw = json!({"rv": rv, "ns": key.0, "name": key.1}).to_string();
    CONTINUE_ENCODING.encode(raw)
}

/// Go's `base64.RawURLEncoding`: no padding, and (unlike the base64 crate's default) nonzero trailing bits
/// are accepted.
const CONTINUE_ENCODING: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone),
);

/// Upstream's errors for a token it cannot read: `invalid continue token: continue key is not valid: ` and the Go
/// base64 or JSON error.
pub(super) fn decode_continue(token: &str) -> ApiResult<(u64, ObjectKey)> {
    let invalid =
        |why: String| ApiError::bad_request(format!("invalid continue token: continue key is not valid: {why}"));
    let bytes = CONTINUE_ENCODING.decode(token).map_err(|e| {
        let at = match e {
            DecodeError::InvalidByte(at, _) | DecodeError::InvalidLastSymbol(at, _) => at,
            DecodeError::InvalidLength(len) => len.saturating_sub(1),
            DecodeError::InvalidPadding => token.len(),
        };
        invalid(format!("illegal base64 data at input byte {at}"))
    })?;
    if let Some(e) = crate::gojson::syntax_error(&bytes) {
        return Err(invalid(e));
    }
    let bad = || invalid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)".to_string());
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let ns = v.get("ns").and_then(Value::as_str).ok_or_else(bad)?;
    let name = v.get("name").and_then(Value::as_str).ok_or_else(bad)?;
    Ok((rv, (ns.to_string(), name.to_string())))
}

pub(super) fn too_large_rv(requested: u64, current: u64) -> ApiError {
    let mut e = ApiError::new(504, "Timeout", format!("Too large resource version: {requested}, current: {current}"));
    e.details.retry_after_seconds = Some(1);
    e
}

pub(super) struct Selectors {
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
}
