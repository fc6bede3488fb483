//! The contract as a ValidatingAdmissionPolicy: the API server refuses at `kubectl apply` what the operator would
//! mark Invalid, with the same reason and words. Generated from the platform profile (a pure function, like the
//! CRD); `deploy/admission-policy.yaml` holds the rendered default and `tests/it/admission_policy.rs` keeps it equal.
//!
//! Only rules that need no cluster state are here; the operator stays the source of truth (with the policy absent
//! or in `Warn`, status reports as before). The CEL uses the standard library, `matches` (regexes in the subset
//! RE2 and Rust's `regex` agree on) and the strings extension (`indexOf`, `lastIndexOf`, `substring`, `split`),
//! which both kube-apiserver and kubesim provide.

use serde_json::{Value, json};

use crate::contract::{Reason, example_repository, free_port_suggestion, join_ports};
use crate::image::{DEFAULT_REGISTRY, ImageRefError, LEGACY_DEFAULT_REGISTRY, MAX_NAME_LEN, OFFICIAL_PREFIX};
use crate::profile::{MAX_PORT, MAX_REPLICAS, MIN_PORT, MIN_REPLICAS, PlatformProfile};
use crate::wording::{self, Piece, lit};

/// The policy's and the binding's name.
pub const POLICY_NAME: &str = "microservice-contract.platform.example.com";
pub const BINDING_NAME: &str = "microservice-contract.platform.example.com";

/// Regexes of the image reference grammar, as `image.rs` parses it, one part at a time.
const COMPONENT: &str = r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$";
const TAG: &str = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$";
const DIGEST_ALGORITHM: &str = r"^[a-z0-9]+(?:[+._-][a-z0-9]+)*:";
const PORT: &str = r"(?::0*(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?$";
const HOST: &str =
    r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)";
/// `char::is_whitespace` in ASCII; RE2's `\s` and Rust's differ, an explicit class reads the same in both.
const WHITESPACE: &str = r"[ \t\n\x0B\f\r]";
const DNS1035_LABEL: &str = r"^[a-z]([-a-z0-9]*[a-z0-9])?$";

fn string_list<S: AsRef<str>>(items: &[S]) -> String {
    format!("[{}]", items.iter().map(|s| lit(s.as_ref())).collect::<Vec<_>>().join(", "))
}

/// A value for a template placeholder: fixed when the policy is generated, or computed by CEL at admission.
enum Fill {
    Fixed(String),
    Cel(String),
}

/// A CEL expression that writes `template` with `fills`: the same words [`wording::render`] writes in Rust.
fn cel_message(reason: Reason, field: &str, template: &str, fills: &[(&str, Fill)]) -> String {
    let mut text = String::new();
    let mut parts: Vec<String> = Vec::new();
    let message = wording::headline(reason.as_str(), field, template);
    for piece in wording::pieces(&message) {
        match piece {
            Piece::Text(t) => text.push_str(t),
            Piece::Placeholder(name) => match fills.iter().find(|(key, _)| *key == name).map(|(_, fill)| fill) {
                Some(Fill::Fixed(value)) => text.push_str(value),
                Some(Fill::Cel(expr)) => {
                    if !text.is_empty() {
                        parts.push(lit(&std::mem::take(&mut text)));
                    }
                    parts.push(expr.clone());
                }
                None => text.push_str(&format!("{{{name}}}")),
            },
        }
    }
    if !text.is_empty() {
        parts.push(lit(&text));
    }
    parts.join(" + ")
}

/// An [`ImageRefError`]'s message with its value computed by CEL: the error's own Display (image.rs's words),
/// made with a marker for the value, the marker then replaced by `expr`.
fn cel_error(make: impl Fn(String) -> ImageRefError, expr: &str) -> String {
    const MARK: &str = "\u{1}";
    cel_text(&make(MARK.to_string()).to_string(), MARK, expr)
}

fn cel_text(text: &str, mark: &str, expr: &str) -> String {
    text.split(mark).map(lit).collect::<Vec<_>>().join(&format!(" + {expr} + "))
}

fn variable(name: &str, expression: String) -> Value {
    json!({"name": name, "expression": expression})
}

fn validation(reason: Reason, expression: String, message_expression: String) -> Value {
    // `message` is what the API server says when the messageExpression cannot be evaluated.
    json!({
        "expression": expression,
        "messageExpression": message_expression,
        "message": format!("{reason}: the Microservice breaks the platform contract"),
        "reason": "Invalid",
    })
}

// Over 80 lines on purpose: A table: the policy's manifest with one validation per contract rule, each with its CEL
// expression and the contract's own message, in the contract's order.
/// The ValidatingAdmissionPolicy for `profile`.
pub fn policy(profile: &PlatformProfile) -> Value {
    let mutable = string_list(&profile.mutable_tags);
    let allowed = string_list(&profile.normalized_repositories());
    let legacy = lit(LEGACY_DEFAULT_REGISTRY);
    let default_registry = lit(DEFAULT_REGISTRY);
    let variables = vec![
        variable("image", "object.spec.image".into()),
        // The image split as image.rs splits it: the first `@` starts the digest, a `:` after the last `/` the tag.
        variable("at", "variables.image.indexOf('@')".into()),
        variable(
            "nameTag",
            "variables.at < 0 ? variables.image : variables.image.substring(0, variables.at)".into(),
        ),
        variable("digest", "variables.at < 0 ? '' : variables.image.substring(variables.at + 1)".into()),
        variable("segment", "variables.nameTag.lastIndexOf('/') + 1".into()),
        variable("colon", "variables.nameTag.substring(variables.segment).lastIndexOf(':')".into()),
        variable(
            "tag",
            "variables.colon < 0 ? '' : variables.nameTag.substring(variables.segment + variables.colon + 1)".into(),
        ),
        variable(
            "name",
            "variables.colon < 0 ? variables.nameTag : variables.nameTag.substring(0, variables.segment + variables.colon)"
                .into(),
        ),
        variable(
            "first",
            "variables.name.indexOf('/') < 0 ? '' : variables.name.substring(0, variables.name.indexOf('/'))".into(),
        ),
        // The first component names a registry only when it looks like a host.
        variable(
            "hasRegistry",
            "variables.name.indexOf('/') >= 0 && (variables.first.contains('.') || variables.first.contains(':') || \
             variables.first == 'localhost' || variables.first.matches('[A-Z]'))"
                .into(),
        ),
        variable("registry", "variables.hasRegistry ? variables.first : ''".into()),
        variable("path", "variables.hasRegistry ? variables.name.substring(size(variables.first) + 1) : variables.name".into()),
        variable("badComponents", format!("variables.path.split('/').filter(c, !c.matches({}))", lit(COMPONENT))),
        // Why the image is not a reference, in image.rs's words and order; '' when it is one.
        variable(
            "refError",
            [
                format!("variables.image == '' ? {}", lit(&ImageRefError::Empty.to_string())),
                format!("variables.image.matches({}) ? {}", lit(WHITESPACE), lit(&ImageRefError::Whitespace.to_string())),
                // Only sha256 and sha512 digests: a malformed one, a short sha512, another algorithm.
                format!(
                    "variables.at >= 0 && !variables.digest.matches('^sha256:[0-9a-f]{{64}}$') && \
                     !variables.digest.matches('^sha512:[0-9a-f]{{128}}$') ? \
                     (variables.digest.startsWith('sha512:') ? {} : \
                     variables.digest.startsWith('sha256:') || !variables.digest.matches({}) ? {} : {})",
                    cel_error(ImageRefError::InvalidSha512Digest, "variables.digest"),
                    lit(DIGEST_ALGORITHM),
                    cel_error(ImageRefError::InvalidDigest, "variables.digest"),
                    cel_error(ImageRefError::UnsupportedDigest, "variables.digest")
                ),
                format!(
                    "variables.colon >= 0 && !variables.tag.matches({}) ? {}",
                    lit(TAG),
                    cel_error(ImageRefError::InvalidTag, "variables.tag")
                ),
                format!("variables.name == '' ? {}", lit(&ImageRefError::MissingRepository.to_string())),
                format!(
                    "variables.hasRegistry && !variables.registry.matches({}) ? {}",
                    lit(&format!("{HOST}{PORT}")),
                    cel_error(ImageRefError::InvalidRegistry, "variables.registry")
                ),
                format!(
                    "size(variables.name) > {MAX_NAME_LEN} ? {}",
                    cel_text(
                        &ImageRefError::NameTooLong(usize::MAX).to_string(),
                        &usize::MAX.to_string(),
                        "string(size(variables.name))"
                    )
                ),
                "size(variables.badComponents) == 0 ? ''".to_string(),
                format!("variables.badComponents[0] == '' ? {}", lit(&ImageRefError::EmptyComponent.to_string())),
                format!(
                    "variables.badComponents[0].matches('[A-Z]') ? {}",
                    cel_error(ImageRefError::Uppercase, "variables.badComponents[0]")
                ),
                cel_error(ImageRefError::InvalidComponent, "variables.badComponents[0]"),
            ]
            .join(" : "),
        ),
        variable(
            "repository",
            format!(
                "(variables.registry in ['', {legacy}] ? {default_registry} : variables.registry) + '/' + \
                 (variables.registry in ['', {default_registry}, {legacy}] && !variables.path.contains('/') ? {} : '') \
                 + variables.path",
                lit(&format!("{OFFICIAL_PREFIX}/"))
            ),
        ),
        variable(
            "replicas",
            format!("has(object.spec.replicas) ? object.spec.replicas : {}", profile.default_replicas),
        ),
    ];
    let image_ok = "variables.refError != ''";
    let in_range = format!("object.spec.port >= {MIN_PORT} && object.spec.port <= {MAX_PORT}");
    let validations = vec![
        validation(
            Reason::InvalidImageReference,
            "variables.refError == ''".into(),
            cel_message(
                Reason::InvalidImageReference,
                "spec.image",
                wording::INVALID_IMAGE_REFERENCE,
                &[
                    ("image", Fill::Cel("variables.image".into())),
                    ("error", Fill::Cel("variables.refError".into())),
                    ("example", Fill::Fixed(format!("{}:{}", example_repository(profile), wording::EXAMPLE_TAG))),
                ],
            ),
        ),
        validation(
            Reason::ImageNotAllowed,
            format!("{image_ok} || variables.repository in {allowed}"),
            cel_message(
                Reason::ImageNotAllowed,
                "spec.image",
                wording::IMAGE_NOT_ALLOWED,
                &[
                    ("repository", Fill::Cel("variables.repository".into())),
                    ("allowed", Fill::Fixed(profile.allowed_repositories.join(", "))),
                    (
                        "example",
                        // The spec's tag when it may serve, as contract.rs suggests it.
                        Fill::Cel(format!(
                            "{} + (variables.colon >= 0 && !(variables.tag in {mutable}) ? variables.tag : {})",
                            lit(&format!("{}:", example_repository(profile))),
                            lit(wording::EXAMPLE_TAG)
                        )),
                    ),
                ],
            ),
        ),
        validation(
            Reason::MissingTag,
            format!("{image_ok} || variables.colon >= 0 || variables.at >= 0"),
            cel_message(
                Reason::MissingTag,
                "spec.image",
                wording::MISSING_TAG,
                &[("image", Fill::Cel("variables.image".into())), ("written", Fill::Cel("variables.name".into()))],
            ),
        ),
        validation(
            Reason::MutableTag,
            // A digest pins the content even next to a mutable tag.
            format!("{image_ok} || variables.colon < 0 || variables.at >= 0 || !(variables.tag in {mutable})"),
            cel_message(
                Reason::MutableTag,
                "spec.image",
                wording::MUTABLE_TAG,
                &[("tag", Fill::Cel("variables.tag".into())), ("written", Fill::Cel("variables.name".into()))],
            ),
        ),
        validation(
            Reason::PortOutOfRange,
            in_range.clone(),
            cel_message(
                Reason::PortOutOfRange,
                "spec.port",
                wording::PORT_OUT_OF_RANGE,
                &[
                    ("port", Fill::Cel("string(object.spec.port)".into())),
                    ("min", Fill::Fixed(MIN_PORT.to_string())),
                    ("max", Fill::Fixed(MAX_PORT.to_string())),
                ],
            ),
        ),
        validation(
            Reason::PortReserved,
            format!("!({in_range}) || !(object.spec.port in [{}])", join_ports(&profile.reserved_ports)),
            cel_message(
                Reason::PortReserved,
                "spec.port",
                wording::PORT_RESERVED,
                &[
                    ("port", Fill::Cel("string(object.spec.port)".into())),
                    ("reserved", Fill::Fixed(join_ports(&profile.reserved_ports))),
                    ("suggestion", Fill::Fixed(free_port_suggestion(profile).to_string())),
                ],
            ),
        ),
        validation(
            Reason::ReplicasOutOfRange,
            format!("variables.replicas >= {MIN_REPLICAS} && variables.replicas <= {MAX_REPLICAS}"),
            cel_message(
                Reason::ReplicasOutOfRange,
                "spec.replicas",
                wording::REPLICAS_OUT_OF_RANGE,
                &[
                    ("replicas", Fill::Cel("string(variables.replicas)".into())),
                    ("min", Fill::Fixed(MIN_REPLICAS.to_string())),
                    ("max", Fill::Fixed(MAX_REPLICAS.to_string())),
                    ("default", Fill::Fixed(profile.default_replicas.to_string())),
                ],
            ),
        ),
        validation(
            Reason::InvalidName,
            format!("size(object.metadata.name) <= 63 && object.metadata.name.matches({})", lit(DNS1035_LABEL)),
            cel_message(
                Reason::InvalidName,
                "metadata.name",
                wording::INVALID_NAME,
                &[("name", Fill::Cel("object.metadata.name".into()))],
            ),
        ),
    ];
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["platform.example.com"],
                "apiVersions": ["v1alpha1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["microservices"],
                // Written out although it is the default: the rule list is atomic, so a rule the server completes
                // with `scope` would differ from the applied one and every `kubectl apply` would re-send it.
                "scope": "Namespaced",
            }]},
            // An update that leaves the spec alone (labels, annotations, deletion) is not the contract's business:
            // a Microservice admitted under `Warn` can still be labelled or deleted.
            "matchConditions": [{
                "name": "spec-written",
                "expression": "request.operation != 'UPDATE' || object.spec != oldObject.spec",
            }],
            "variables": variables,
            "validations": validations,
        },
    })
}

/// The binding that puts [`policy`] in force for every Microservice, refusing (`Deny`) what breaks the contract.
pub fn binding() -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": BINDING_NAME},
        "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
    })
}

/// `deploy/admission-policy.yaml`: the policy and its binding as one YAML stream.
pub fn policy_yaml(profile: &PlatformProfile) -> Result<String, serde_saphyr::SerializeError> {
    let header = "# Generated from the platform profile by crates/operator/src/admission_policy.rs; do not edit.\n\
                  # Regenerate: UPDATE_GOLDEN=1 cargo test -p microservice-core --test it admission_policy\n";
    Ok(format!("{header}{}---\n{}", serde_saphyr::to_string(&policy(profile))?, serde_saphyr::to_string(&binding())?))
}
