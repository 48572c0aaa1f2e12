//! `{{ resource }}` templating of client CONFIG values (spec/ingestors.md, "TLS Client
//! Configuration"): [`resolve_config`] turns a client's CONFIG map and MOUNT list into plain
//! key/value strings in which every placeholder names the mounted version's directory on this
//! node, `<resources dir>/<resource>/<version>`.
//!
//! Correctness rests on refusing rather than guessing: a placeholder is `{{`, optional spaces,
//! a resource name (`[a-z_][a-z0-9_]*`), optional spaces, `}}`; anything else between `{{` and
//! `}}`, or a `{{` never closed, is an error, so a typo never reaches a connector as a literal
//! path. A name that is no resource, a resource the client does not MOUNT, and a mounted
//! version that does not exist (or `LATEST` of a resource with no version) are errors naming
//! the CONFIG key and the placeholder. Values that are not strings are rendered as their
//! literals and never templated.

use std::collections::BTreeMap;
use std::path::Path;

use nervix_nspl::ast::catalog::Mount;
use nervix_nspl::ast::{ConfigMap, ConfigValue, ResourceVersion as MountVersion};

use crate::catalog::Resource;

/// Why a CONFIG map could not be resolved; each names the key and the placeholder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MountError {
    #[error("CONFIG '{key}': {placeholder} names no resource")]
    UnknownResource { key: String, placeholder: String },
    #[error("CONFIG '{key}': {placeholder} names resource '{resource}', which the client does not MOUNT")]
    NotMounted {
        key: String,
        placeholder: String,
        resource: String,
    },
    #[error("CONFIG '{key}': {placeholder} mounts version {version} of resource '{resource}', which does not exist")]
    NoSuchVersion {
        key: String,
        placeholder: String,
        resource: String,
        version: u64,
    },
    #[error("CONFIG '{key}': {placeholder} mounts LATEST of resource '{resource}', which has no version yet")]
    NoVersion {
        key: String,
        placeholder: String,
        resource: String,
    },
    #[error("CONFIG '{key}': {placeholder} is not a placeholder: write {{{{ <resource> }}}}")]
    Malformed { key: String, placeholder: String },
}

/// The CONFIG entries in order with every `{{ name }}` replaced by the mounted version's
/// directory; see the module docs.
pub fn resolve_config(
    config: &ConfigMap,
    mounts: &[Mount],
    resources: &BTreeMap<String, Resource>,
    resources_dir: &Path,
) -> Result<Vec<(String, String)>, MountError> {
    config
        .entries
        .iter()
        .map(|(key, value)| {
            let text = match value {
                ConfigValue::String(text) => substitute(key, text, |placeholder, name| {
                    mounted_dir(key, placeholder, name, mounts, resources, resources_dir)
                })?,
                ConfigValue::Integer(n) => n.to_string(),
                ConfigValue::Decimal(x) => x.to_string(),
                ConfigValue::Bool(b) => b.to_string(),
            };
            Ok((key.clone(), text))
        })
        .collect()
}

/// `text` with each placeholder replaced by `resolve(placeholder, name)`.
fn substitute(
    key: &str,
    text: &str,
    mut resolve: impl FnMut(&str, &str) -> Result<String, MountError>,
) -> Result<String, MountError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(MountError::Malformed {
                key: key.to_owned(),
                placeholder: rest[open..].to_owned(),
            });
        };
        let placeholder = &rest[open..open + 2 + close + 2];
        let name = after[..close].trim_matches(' ');
        if !is_name(name) {
            return Err(MountError::Malformed {
                key: key.to_owned(),
                placeholder: placeholder.to_owned(),
            });
        }
        out.push_str(&resolve(placeholder, name)?);
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The directory of the version of `name` that `mounts` selects.
fn mounted_dir(
    key: &str,
    placeholder: &str,
    name: &str,
    mounts: &[Mount],
    resources: &BTreeMap<String, Resource>,
    resources_dir: &Path,
) -> Result<String, MountError> {
    let Some(resource) = resources.get(name) else {
        return Err(MountError::UnknownResource {
            key: key.to_owned(),
            placeholder: placeholder.to_owned(),
        });
    };
    let Some(mount) = mounts.iter().find(|m| m.resource.name == name) else {
        return Err(MountError::NotMounted {
            key: key.to_owned(),
            placeholder: placeholder.to_owned(),
            resource: name.to_owned(),
        });
    };
    let version = match mount.version {
        MountVersion::Number(number) if resource.has_version(number) => number,
        MountVersion::Number(number) => {
            return Err(MountError::NoSuchVersion {
                key: key.to_owned(),
                placeholder: placeholder.to_owned(),
                resource: name.to_owned(),
                version: number,
            })
        }
        MountVersion::Latest => resource.latest().ok_or_else(|| MountError::NoVersion {
            key: key.to_owned(),
            placeholder: placeholder.to_owned(),
            resource: name.to_owned(),
        })?,
    };
    Ok(resources_dir
        .join(name)
        .join(version.to_string())
        .to_string_lossy()
        .into_owned())
}

/// `[a-z_][a-z0-9_]*`, the shape of every NSPL name.
fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use nervix_nspl::ast::Ident;
    use nervix_nspl::{Span, Statement};

    use super::*;
    use crate::catalog::ResourceVersion;

    fn resource(name: &str, versions: &[u64]) -> (String, Resource) {
        let definition =
            nervix_nspl::parse_statement(&format!("CREATE RESOURCE {name};")).expect("parses");
        let resource = Resource {
            name: name.into(),
            definition,
            versions: versions
                .iter()
                .map(|&number| ResourceVersion {
                    number,
                    files: vec![("ca.pem".into(), 1)],
                })
                .collect(),
        };
        (name.into(), resource)
    }

    fn mount(name: &str, version: MountVersion) -> Mount {
        Mount {
            resource: Ident {
                name: name.into(),
                span: Span::default(),
            },
            version,
        }
    }

    fn config(entries: &[(&str, ConfigValue)]) -> ConfigMap {
        ConfigMap {
            entries: entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        }
    }

    fn string(text: &str) -> ConfigValue {
        ConfigValue::String(text.into())
    }

    fn catalog() -> BTreeMap<String, Resource> {
        [
            resource("dev_tls", &[1, 2]),
            resource("other", &[1]),
            resource("empty", &[]),
        ]
        .into_iter()
        .collect()
    }

    fn resolve(
        entries: &[(&str, ConfigValue)],
        mounts: &[Mount],
    ) -> Result<Vec<(String, String)>, MountError> {
        resolve_config(
            &config(entries),
            mounts,
            &catalog(),
            Path::new("/data/resources"),
        )
    }

    #[test]
    fn placeholders_become_the_mounted_version_directory() {
        let resolved = resolve(
            &[
                ("ssl.ca.location", string("{{ dev_tls }}/ca.pem")),
                ("both", string("{{dev_tls}}/a:{{  dev_tls }}/b")),
                ("plain", string("https://example.com/{x}")),
                ("timeout_ms", ConfigValue::Integer(5000)),
                ("insecure", ConfigValue::Bool(false)),
            ],
            &[mount("dev_tls", MountVersion::Number(1))],
        )
        .expect("resolves");
        assert_eq!(
            resolved,
            [
                (
                    "ssl.ca.location".into(),
                    "/data/resources/dev_tls/1/ca.pem".into()
                ),
                (
                    "both".into(),
                    "/data/resources/dev_tls/1/a:/data/resources/dev_tls/1/b".into()
                ),
                ("plain".into(), "https://example.com/{x}".into()),
                ("timeout_ms".into(), "5000".into()),
                ("insecure".into(), "false".into()),
            ]
        );
        let latest = resolve(
            &[("tls_ca_file", string("{{ dev_tls }}/ca.pem"))],
            &[mount("dev_tls", MountVersion::Latest)],
        )
        .expect("resolves");
        assert_eq!(latest[0].1, "/data/resources/dev_tls/2/ca.pem");
    }

    #[test]
    fn every_unresolvable_placeholder_names_its_key() {
        let mounts = [
            mount("dev_tls", MountVersion::Number(7)),
            mount("empty", MountVersion::Latest),
        ];
        let error = |value: &str| {
            resolve(&[("tls_ca_file", string(value))], &mounts)
                .expect_err("refused")
                .to_string()
        };
        assert_eq!(
            error("{{ nope }}/ca.pem"),
            "CONFIG 'tls_ca_file': {{ nope }} names no resource"
        );
        assert_eq!(
            error("{{ other }}/ca.pem"),
            "CONFIG 'tls_ca_file': {{ other }} names resource 'other', which the client does not MOUNT"
        );
        assert_eq!(
            error("{{ dev_tls }}/ca.pem"),
            "CONFIG 'tls_ca_file': {{ dev_tls }} mounts version 7 of resource 'dev_tls', which does not exist"
        );
        assert_eq!(
            error("{{empty}}"),
            "CONFIG 'tls_ca_file': {{empty}} mounts LATEST of resource 'empty', which has no version yet"
        );
        assert_eq!(
            error("{{ Dev-TLS }}/x"),
            "CONFIG 'tls_ca_file': {{ Dev-TLS }} is not a placeholder: write {{ <resource> }}"
        );
        assert_eq!(
            error("a {{ dev_tls"),
            "CONFIG 'tls_ca_file': {{ dev_tls is not a placeholder: write {{ <resource> }}"
        );
    }

    #[test]
    fn a_definition_is_not_needed_to_resolve() {
        // The resolver reads only names and versions: any definition statement will do.
        let (_, r) = resource("dev_tls", &[3]);
        assert!(matches!(r.definition, Statement::Catalog(_)));
        let resources: BTreeMap<String, Resource> = [("dev_tls".to_string(), r)].into();
        let resolved = resolve_config(
            &config(&[("k", string("{{ dev_tls }}"))]),
            &[mount("dev_tls", MountVersion::Latest)],
            &resources,
            Path::new("r"),
        )
        .expect("resolves");
        assert_eq!(resolved, [("k".into(), "r/dev_tls/3".into())]);
    }
}
