//! The words of the contract's refusals, in one place: the operator fills them in Rust ([`render`]) for status
//! and Events, and the admission policy turns the same templates into CEL `messageExpression`s
//! ([`crate::admission_policy`]), so a user reads one message wherever the refusal reaches them.
//!
//! A template is text with `{name}` placeholders; it has no other braces.

pub const INVALID_IMAGE_REFERENCE: &str =
    "`{image}` is not an image reference ({error}); write REPOSITORY:TAG or REPOSITORY@sha256:DIGEST, e.g. `{example}`";
pub const IMAGE_NOT_ALLOWED: &str =
    "repository `{repository}` is not one the platform runs (allowed: {allowed}); use e.g. `{example}`";
pub const MISSING_TAG: &str = "`{image}` has no tag or digest, so what runs could change without a spec change; pin a \
                               version, e.g. `{written}:1.4.2` or `{written}@sha256:<digest>`";
pub const MUTABLE_TAG: &str = "tag `{tag}` is mutable (it moves to new images), so rollouts would not be reproducible; \
                               use a version tag or a digest, e.g. `{written}:1.4.2` or `{written}@sha256:<digest>`";
pub const PORT_OUT_OF_RANGE: &str = "port {port} is outside {min}-{max}; the container runs unprivileged, so listen on \
                                     an unprivileged port such as 8080";
pub const PORT_RESERVED: &str =
    "port {port} is reserved by the platform (reserved: {reserved}); choose another port, e.g. {suggestion}";
pub const REPLICAS_OUT_OF_RANGE: &str = "replicas {replicas} is outside {min}-{max}; set a number in that range or \
                                         leave replicas out to get the platform default ({default})";
pub const SCALING_EXCLUSIVE: &str = "spec.replicas and spec.autoscaling are exclusive: remove spec.replicas to let \
                                     the HorizontalPodAutoscaler scale, or spec.autoscaling to fix the number of pods";
pub const AUTOSCALING_OUT_OF_RANGE: &str = "autoscaling bounds {min}-{max} are not within {low}-{high} with \
                                            minReplicas <= maxReplicas; set bounds in that range";
pub const CPU_TARGET_OUT_OF_RANGE: &str = "CPU target {target}% is outside 1-100; set a percentage of the CPU request, \
                                           or leave it out for {default}%";
pub const INVALID_NAME: &str = "name `{name}` cannot name a Service: use at most 63 lowercase letters, digits and \
                                `-`, starting with a letter and ending with a letter or digit, e.g. `todo-api`";

/// The tag the examples suggest when the spec's own tag cannot serve.
pub const EXAMPLE_TAG: &str = "1.4.2";

/// One piece of a template: literal text, or the placeholder's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    Text(&'a str),
    Placeholder(&'a str),
}

/// Splits a template into text and placeholders, in order.
pub fn pieces(template: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else { break };
        if open > 0 {
            out.push(Piece::Text(&rest[..open]));
        }
        out.push(Piece::Placeholder(&rest[open + 1..close]));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    out
}

/// Fills a template. A placeholder missing from `values` stays as written, which the tests would show.
pub fn render(template: &str, values: &[(&str, &str)]) -> String {
    pieces(template)
        .into_iter()
        .map(|piece| match piece {
            Piece::Text(text) => text.to_string(),
            Piece::Placeholder(name) => values
                .iter()
                .find(|(key, _)| *key == name)
                .map_or_else(|| format!("{{{name}}}"), |(_, value)| value.to_string()),
        })
        .collect()
}

/// How a refusal reads where only one line fits (an admission denial, a CLI line): reason, field, message.
pub fn headline(reason: &str, field: &str, message: &str) -> String {
    format!("{reason}: {field}: {message}")
}

/// A CEL string literal.
pub(crate) fn lit(text: &str) -> String {
    let mut out = String::from("'");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{b}' => out.push_str("\\v"),
            '\u{c}' => out.push_str("\\f"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_split_into_text_and_placeholders() {
        assert_eq!(
            pieces("port {port} is {what}."),
            [
                Piece::Text("port "),
                Piece::Placeholder("port"),
                Piece::Text(" is "),
                Piece::Placeholder("what"),
                Piece::Text(".")
            ]
        );
        assert_eq!(
            render(PORT_RESERVED, &[("port", "9090"), ("reserved", "9090"), ("suggestion", "8080")]),
            "port 9090 is reserved by the platform (reserved: 9090); choose another port, e.g. 8080"
        );
    }

    #[test]
    fn every_template_is_balanced() {
        for template in [
            INVALID_IMAGE_REFERENCE,
            IMAGE_NOT_ALLOWED,
            MISSING_TAG,
            MUTABLE_TAG,
            PORT_OUT_OF_RANGE,
            PORT_RESERVED,
            REPLICAS_OUT_OF_RANGE,
            SCALING_EXCLUSIVE,
            AUTOSCALING_OUT_OF_RANGE,
            CPU_TARGET_OUT_OF_RANGE,
            INVALID_NAME,
        ] {
            assert_eq!(template.matches('{').count(), template.matches('}').count(), "{template}");
        }
    }
}
