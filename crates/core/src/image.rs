//! Container image references (`[registry[:port]/]path[:tag][@digest]`), parsed the way the container runtime
//! reads them (the distribution reference grammar), so the contract judges the image that will actually be pulled.

use std::fmt;

use thiserror::Error;

/// Registry assumed when a reference names none, as container runtimes do.
pub const DEFAULT_REGISTRY: &str = "docker.io";
pub const LEGACY_DEFAULT_REGISTRY: &str = "index.docker.io";
pub const OFFICIAL_PREFIX: &str = "library";
pub const MAX_NAME_LEN: usize = 255;
pub const MAX_TAG_LEN: usize = 128;

/// Why a string is not an image reference.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ImageRefError {
    #[error("the image reference is empty")]
    Empty,
    #[error("the image reference contains whitespace")]
    Whitespace,
    #[error("the repository name is {0} characters long; at most 255 are allowed")]
    NameTooLong(usize),
    #[error("registry `{0}` is not a valid host[:port]")]
    InvalidRegistry(String),
    #[error("the repository path has an empty component (a leading, trailing or double `/`)")]
    EmptyComponent,
    #[error("repository component `{0}` must be lowercase")]
    Uppercase(String),
    #[error(
        "repository component `{0}` may contain only lowercase letters, digits and single `.`/`_`, `__` or `-` \
         separators between them"
    )]
    InvalidComponent(String),
    #[error("tag `{0}` must start with a letter, digit or `_` and contain at most 128 letters, digits, `_`, `.`, `-`")]
    InvalidTag(String),
    #[error("digest `{0}` must look like `sha256:` followed by 64 lowercase hex digits")]
    InvalidDigest(String),
    #[error("digest `{0}` must look like `sha512:` followed by 128 lowercase hex digits")]
    InvalidSha512Digest(String),
    /// A well-formed digest of an algorithm runtimes do not pull by (e.g. `md5`): a kubelet would refuse it.
    #[error(
        "digest `{0}` uses an algorithm images are not pulled by; use `sha256:` followed by 64 lowercase hex digits \
         (or `sha512:` followed by 128)"
    )]
    UnsupportedDigest(String),
    #[error("there is no repository name before the tag or digest")]
    MissingRepository,
}

/// A parsed image reference. `registry` and `path` are as written; [`ImageReference::repository`] gives the
/// normalized name the runtime pulls (`todo-api` → `docker.io/library/todo-api`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageReference {
    pub registry: Option<String>,
    pub path: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

impl ImageReference {
    pub fn parse(input: &str) -> Result<Self, ImageRefError> {
        if input.is_empty() {
            return Err(ImageRefError::Empty);
        }
        if input.chars().any(char::is_whitespace) {
            return Err(ImageRefError::Whitespace);
        }
        let (name_and_tag, digest) = match input.split_once('@') {
            Some((name, digest)) => {
                validate_digest(digest)?;
                (name, Some(digest.to_string()))
            }
            None => (input, None),
        };
        // A `:` after the last `/` separates the tag; one before it belongs to a registry port.
        let last_slash = name_and_tag.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match name_and_tag[last_slash..].rfind(':') {
            Some(i) => {
                let at = last_slash + i;
                let tag = &name_and_tag[at + 1..];
                validate_tag(tag)?;
                (&name_and_tag[..at], Some(tag.to_string()))
            }
            None => (name_and_tag, None),
        };
        if name.is_empty() {
            return Err(ImageRefError::MissingRepository);
        }
        let (registry, path) = split_registry(name)?;
        if name.len() > MAX_NAME_LEN {
            return Err(ImageRefError::NameTooLong(name.len()));
        }
        for component in path.split('/') {
            validate_component(component)?;
        }
        Ok(ImageReference { registry: registry.map(str::to_string), path: path.to_string(), tag, digest })
    }

    /// The normalized repository the runtime pulls from, e.g. `ghcr.io/example/todo-api`.
    pub fn repository(&self) -> String {
        let registry = match self.registry.as_deref() {
            None | Some(LEGACY_DEFAULT_REGISTRY) => DEFAULT_REGISTRY,
            Some(registry) => registry,
        };
        if registry == DEFAULT_REGISTRY && !self.path.contains('/') {
            format!("{registry}/{OFFICIAL_PREFIX}/{}", self.path)
        } else {
            format!("{registry}/{}", self.path)
        }
    }

    /// The version the workload reports (`service.version`): the tag, or the digest when there is no tag.
    pub fn version(&self) -> Option<&str> {
        self.tag.as_deref().or(self.digest.as_deref())
    }
}

impl fmt::Display for ImageReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(registry) = &self.registry {
            write!(f, "{registry}/")?;
        }
        f.write_str(&self.path)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// Normalizes a repository name without tag or digest (as the platform profile lists them).
pub fn normalize_repository(name: &str) -> Result<String, ImageRefError> {
    let parsed = ImageReference::parse(name)?;
    match (&parsed.tag, &parsed.digest) {
        (None, None) => Ok(parsed.repository()),
        (Some(tag), _) => Err(ImageRefError::InvalidComponent(format!("{}:{tag}", parsed.path))),
        (None, Some(digest)) => Err(ImageRefError::InvalidDigest(digest.clone())),
    }
}

/// The first component is a registry only when it looks like a host: it has a `.` or a `:` port, is
/// `localhost`, or has uppercase letters (which repository paths never have).
fn split_registry(name: &str) -> Result<(Option<&str>, &str), ImageRefError> {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':']) || first == "localhost" || first.chars().any(|c| c.is_ascii_uppercase()) =>
        {
            validate_registry(first)?;
            Ok((Some(first), rest))
        }
        _ => Ok((None, name)),
    }
}

fn validate_registry(registry: &str) -> Result<(), ImageRefError> {
    let invalid = || ImageRefError::InvalidRegistry(registry.to_string());
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        let (addr, after) = rest.split_once(']').ok_or_else(invalid)?;
        if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.') {
            return Err(invalid());
        }
        match after {
            "" => (None, None),
            _ => (None, Some(after.strip_prefix(':').ok_or_else(invalid)?)),
        }
    } else {
        match registry.split_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(registry), None),
        }
    };
    if let Some(host) = host {
        let label_ok = |label: &str| {
            !label.is_empty()
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        };
        if !host.split('.').all(label_ok) {
            return Err(invalid());
        }
    }
    if let Some(port) = port
        && !(port.chars().all(|c| c.is_ascii_digit()) && matches!(port.parse::<u32>(), Ok(1..=65535)))
    {
        return Err(invalid());
    }
    Ok(())
}

fn validate_component(component: &str) -> Result<(), ImageRefError> {
    if component.is_empty() {
        return Err(ImageRefError::EmptyComponent);
    }
    if component.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(ImageRefError::Uppercase(component.to_string()));
    }
    let invalid = || ImageRefError::InvalidComponent(component.to_string());
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    // component := alnum+ (separator alnum+)*, separator := `.` | `_` | `__` | `-`+
    let starts_and_ends_alnum = component.starts_with(alnum) && component.ends_with(alnum);
    if !starts_and_ends_alnum || !component.chars().all(|c| alnum(c) || matches!(c, '.' | '_' | '-')) {
        return Err(invalid());
    }
    let separators_ok = component
        .split(alnum)
        .filter(|s| !s.is_empty())
        .all(|separator| matches!(separator, "." | "_" | "__") || separator.chars().all(|c| c == '-'));
    if separators_ok { Ok(()) } else { Err(invalid()) }
}

fn validate_tag(tag: &str) -> Result<(), ImageRefError> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let ok = tag.len() <= MAX_TAG_LEN
        && tag.chars().next().is_some_and(word)
        && tag.chars().all(|c| word(c) || c == '.' || c == '-');
    if ok { Ok(()) } else { Err(ImageRefError::InvalidTag(tag.to_string())) }
}

fn validate_digest(digest: &str) -> Result<(), ImageRefError> {
    let invalid = || ImageRefError::InvalidDigest(digest.to_string());
    let (algorithm, encoded) = digest.split_once(':').ok_or_else(invalid)?;
    let algorithm_ok = !algorithm.is_empty()
        && algorithm
            .split(['+', '.', '_', '-'])
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
    if !algorithm_ok {
        return Err(invalid());
    }
    let lower_hex = |s: &str| s.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
    // Only the digests container runtimes verify: the grammar's other algorithms would be refused at pull time.
    match algorithm {
        "sha256" if encoded.len() == 64 && lower_hex(encoded) => Ok(()),
        "sha256" => Err(invalid()),
        "sha512" if encoded.len() == 128 && lower_hex(encoded) => Ok(()),
        "sha512" => Err(ImageRefError::InvalidSha512Digest(digest.to_string())),
        _ => Err(ImageRefError::UnsupportedDigest(digest.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// (registry, path, tag, digest, normalized repository)
    type Parts = (Option<String>, String, Option<String>, Option<String>, String);

    fn parts(input: &str) -> Parts {
        let r = ImageReference::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        (r.registry.clone(), r.path.clone(), r.tag.clone(), r.digest.clone(), r.repository())
    }

    #[test]
    fn valid_references_parse_into_their_parts() {
        let digest = Some(SHA.to_string());
        let s = |v: &str| Some(v.to_string());
        let cases: Vec<(String, Parts)> = vec![
            (
                "ghcr.io/example/todo-api:1.4.2".into(),
                (s("ghcr.io"), "example/todo-api".into(), s("1.4.2"), None, "ghcr.io/example/todo-api".into()),
            ),
            ("todo-api:1".into(), (None, "todo-api".into(), s("1"), None, "docker.io/library/todo-api".into())),
            (
                "example/todo-api:v2".into(),
                (None, "example/todo-api".into(), s("v2"), None, "docker.io/example/todo-api".into()),
            ),
            (
                "localhost/todo-api:dev".into(),
                (s("localhost"), "todo-api".into(), s("dev"), None, "localhost/todo-api".into()),
            ),
            (
                "localhost:5000/todo-api:dev".into(),
                (s("localhost:5000"), "todo-api".into(), s("dev"), None, "localhost:5000/todo-api".into()),
            ),
            (
                "registry.internal:5000/team/apps/todo-api:1.0.0-rc.1".into(),
                (
                    s("registry.internal:5000"),
                    "team/apps/todo-api".into(),
                    s("1.0.0-rc.1"),
                    None,
                    "registry.internal:5000/team/apps/todo-api".into(),
                ),
            ),
            (
                "registry.internal:5000/todo-api".into(),
                (s("registry.internal:5000"), "todo-api".into(), None, None, "registry.internal:5000/todo-api".into()),
            ),
            (
                format!("ghcr.io/example/todo-api@{SHA}"),
                (s("ghcr.io"), "example/todo-api".into(), None, digest.clone(), "ghcr.io/example/todo-api".into()),
            ),
            (
                format!("ghcr.io/example/todo-api:1.4.2@{SHA}"),
                (
                    s("ghcr.io"),
                    "example/todo-api".into(),
                    s("1.4.2"),
                    digest.clone(),
                    "ghcr.io/example/todo-api".into(),
                ),
            ),
            (
                "index.docker.io/nginx:1.27".into(),
                (s("index.docker.io"), "nginx".into(), s("1.27"), None, "docker.io/library/nginx".into()),
            ),
            (
                "[::1]:5000/todo-api:1".into(),
                (s("[::1]:5000"), "todo-api".into(), s("1"), None, "[::1]:5000/todo-api".into()),
            ),
            (
                "ghcr.io/example/todo_api__x.y-z--w:_under".into(),
                (
                    s("ghcr.io"),
                    "example/todo_api__x.y-z--w".into(),
                    s("_under"),
                    None,
                    "ghcr.io/example/todo_api__x.y-z--w".into(),
                ),
            ),
            (
                "Registry.Example.com/todo-api:A.B".into(),
                (s("Registry.Example.com"), "todo-api".into(), s("A.B"), None, "Registry.Example.com/todo-api".into()),
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(parts(&input), expected, "{input}");
        }
    }

    #[test]
    fn display_round_trips() {
        for input in ["ghcr.io/example/todo-api:1.4.2", "todo-api", "localhost:5000/a/b:c", &format!("a/b:1@{SHA}")] {
            let parsed = ImageReference::parse(input).unwrap();
            assert_eq!(parsed.to_string(), input);
        }
    }

    #[test]
    fn malformed_references_are_rejected_with_the_reason() {
        use ImageRefError::*;
        let long_tag = format!("todo-api:{}", "a".repeat(129));
        let long_name = format!("ghcr.io/{}:1", "a".repeat(250));
        let cases: Vec<(&str, ImageRefError)> = vec![
            ("", Empty),
            ("ghcr.io/example/todo-api: 1", Whitespace),
            ("ghcr.io/Example/todo-api:1", Uppercase("Example".into())),
            ("ghcr.io//todo-api:1", EmptyComponent),
            ("ghcr.io/example/todo-api/:1", EmptyComponent),
            ("/todo-api:1", EmptyComponent),
            ("ghcr.io/example/-todo:1", InvalidComponent("-todo".into())),
            ("ghcr.io/example/todo-:1", InvalidComponent("todo-".into())),
            ("ghcr.io/example/todo..api:1", InvalidComponent("todo..api".into())),
            ("ghcr.io/example/todo___api:1", InvalidComponent("todo___api".into())),
            ("ghcr.io/example/todo+api:1", InvalidComponent("todo+api".into())),
            ("ghcr.io/example/todo-api:", InvalidTag("".into())),
            ("ghcr.io/example/todo-api:-1", InvalidTag("-1".into())),
            ("ghcr.io/example/todo-api:1:2", InvalidComponent("todo-api:1".into())),
            (&long_tag, InvalidTag("a".repeat(129))),
            ("ghcr.io/example/todo-api@sha256:abc", InvalidDigest("sha256:abc".into())),
            ("ghcr.io/example/todo-api@", InvalidDigest("".into())),
            ("ghcr.io/example/todo-api@1.2", InvalidDigest("1.2".into())),
            (":latest", MissingRepository),
            ("@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", MissingRepository),
            (
                "ghcr.io/example/todo-api@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
                InvalidDigest("sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef".into()),
            ),
            ("ghcr.io/a@sha256:x@sha256:y", InvalidDigest("sha256:x@sha256:y".into())),
            ("reg-.io/todo-api:1", InvalidRegistry("reg-.io".into())),
            ("reg.io:99999/todo-api:1", InvalidRegistry("reg.io:99999".into())),
            ("reg.io:port/todo-api:1", InvalidRegistry("reg.io:port".into())),
            ("[zz]:5000/todo-api:1", InvalidRegistry("[zz]:5000".into())),
            (&long_name, NameTooLong(258)),
        ];
        for (input, expected) in cases {
            assert_eq!(ImageReference::parse(input), Err(expected), "{input}");
        }
    }

    #[test]
    fn only_digests_a_runtime_pulls_by_are_accepted() {
        let hex = |n: usize| "0123456789abcdef".repeat(8)[..n].to_string();
        let sha512 = format!("sha512:{}", hex(128));
        assert!(ImageReference::parse(&format!("ghcr.io/example/todo-api@{sha512}")).is_ok());
        let md5 = format!("md5:{}", hex(32));
        let refused = ImageReference::parse(&format!("ghcr.io/example/todo-api@{md5}")).unwrap_err();
        assert_eq!(refused, ImageRefError::UnsupportedDigest(md5));
        assert!(refused.to_string().contains("use `sha256:` followed by 64"), "{refused}");
        let short512 = format!("sha512:{}", hex(64));
        let refused = ImageReference::parse(&format!("ghcr.io/example/todo-api@{short512}")).unwrap_err();
        assert!(refused.to_string().contains("`sha512:` followed by 128"), "{refused}");
        assert!(!refused.to_string().contains("sha256"), "{refused}");
    }

    #[test]
    fn a_tag_without_a_repository_says_so() {
        let refused = ImageReference::parse(":latest").unwrap_err();
        assert_eq!(refused.to_string(), "there is no repository name before the tag or digest");
    }

    #[test]
    fn version_prefers_the_tag_and_falls_back_to_the_digest() {
        assert_eq!(ImageReference::parse("a/b:1.2").unwrap().version(), Some("1.2"));
        assert_eq!(ImageReference::parse(&format!("a/b:1.2@{SHA}")).unwrap().version(), Some("1.2"));
        assert_eq!(ImageReference::parse(&format!("a/b@{SHA}")).unwrap().version(), Some(SHA));
        assert_eq!(ImageReference::parse("a/b").unwrap().version(), None);
    }

    #[test]
    fn normalize_repository_refuses_tags_and_digests() {
        assert_eq!(normalize_repository("ghcr.io/example/todo-api").as_deref(), Ok("ghcr.io/example/todo-api"));
        assert_eq!(normalize_repository("nginx").as_deref(), Ok("docker.io/library/nginx"));
        assert!(normalize_repository("ghcr.io/example/todo-api:1").is_err());
        assert!(normalize_repository(&format!("ghcr.io/example/todo-api@{SHA}")).is_err());
    }
}
