//! SHOW, SHOW CREATE and DESCRIBE: read-only views of the catalog, rendered from the models,
//! with the running data plane's status and figures ([`super::runtime_view`]) where it runs.

use nervix_nspl::ast::catalog::{CatalogStmt, Pacing, Role};
use nervix_nspl::ast::ingestor::IngestorStmt;
use nervix_nspl::ast::session::{DescribeFormat, SessionStmt};
use nervix_nspl::render::render_statement;
use nervix_nspl::{ObjectKind, Span, Statement};

use super::session::ControlSession;
use crate::catalog::plan::{dependents, is_domain_kind, session_domain, StatementContext};
use crate::catalog::{kind_name, Catalog, CatalogError, Domain, Entity, EntityKey, RunState};

/// What SHOW needs besides the catalog.
pub struct ShowContext<'a> {
    pub node_name: &'a str,
    pub session: &'a ControlSession,
    /// Lines describing the cluster's members (SHOW CLUSTER STATUS, SHOW NODES).
    pub cluster: Vec<String>,
    /// The data plane's snapshot, when this node runs one.
    pub runtime: Option<&'a super::runtime_view::RuntimeView>,
}

pub fn show(
    catalog: &Catalog,
    context: &ShowContext<'_>,
    statement: &Statement,
    span: Span,
) -> Result<Vec<String>, CatalogError> {
    let domain_context = StatementContext {
        domain: context.session.domain.as_deref(),
        span,
        wall_ns: crate::runtime::clock::wall_ns(),
    };
    match statement {
        Statement::Catalog(CatalogStmt::ShowClusterStatus) => Ok(context.cluster.clone()),
        Statement::Session(SessionStmt::ShowRoles) => Ok(vec![
            "ADMIN may run every statement".into(),
            "OPERATOR may run every statement except user management".into(),
            "READER may run SHOW, DESCRIBE and USE".into(),
        ]),
        Statement::Session(SessionStmt::ShowAll(kind)) => match kind {
            ObjectKind::Domain => Ok(catalog.domains.values().map(domain_line).collect()),
            ObjectKind::User => Ok(catalog
                .users
                .values()
                .map(|u| format!("{} role={}", u.name, role_name(u.role)))
                .collect()),
            ObjectKind::Resource => Ok(catalog
                .resources
                .values()
                .map(|r| {
                    let versions: Vec<String> =
                        r.versions.iter().map(|v| v.number.to_string()).collect();
                    format!(
                        "{} versions={} latest={}",
                        r.name,
                        if versions.is_empty() {
                            "none".into()
                        } else {
                            versions.join(",")
                        },
                        r.latest().map_or("none".into(), |n| n.to_string())
                    )
                })
                .collect()),
            ObjectKind::Vhost => Ok(catalog
                .global
                .values()
                .filter(|e| e.key.kind == ObjectKind::Vhost)
                .map(|e| summary(e, None, context))
                .collect()),
            ObjectKind::Subscription => Ok(context
                .session
                .subscriptions
                .iter()
                .map(|(name, (domain, s))| format!("{name} relay={} domain={domain}", s.relay))
                .collect()),
            ObjectKind::Node => Ok(context.cluster.clone()),
            kind => {
                let domain = session_domain(catalog, domain_context)?;
                Ok(domain
                    .entities
                    .values()
                    .filter(|e| e.key.kind == *kind)
                    .map(|e| summary(e, Some(domain), context))
                    .collect())
            }
        },
        Statement::Session(SessionStmt::ShowCreate { kind, name }) => {
            let text = match kind {
                ObjectKind::Domain => catalog
                    .domains
                    .get(&name.name)
                    .map(|d| render_statement(&d.header.definition)),
                ObjectKind::Resource => catalog
                    .resources
                    .get(&name.name)
                    .map(|r| render_statement(&r.definition)),
                ObjectKind::User => catalog.users.get(&name.name).map(|u| {
                    format!(
                        "CREATE USER {} WITH PASSWORD '<masked>' ROLE {};",
                        u.name,
                        role_name(u.role)
                    )
                }),
                ObjectKind::Vhost => catalog
                    .global
                    .get(&EntityKey::new(ObjectKind::Vhost, name.name.as_str()))
                    .map(|e| render_statement(&e.definition)),
                ObjectKind::Subscription => {
                    context.session.subscriptions.get(&name.name).map(|(_, s)| {
                        render_statement(&Statement::Catalog(CatalogStmt::CreateSubscription(
                            s.clone(),
                        )))
                    })
                }
                ObjectKind::Node => None,
                kind => {
                    let domain = session_domain(catalog, domain_context)?;
                    domain
                        .entities
                        .get(&EntityKey::new(*kind, name.name.as_str()))
                        .map(|e| render_statement(&e.definition))
                }
            };
            text.map(|t| t.lines().map(String::from).collect())
                .ok_or_else(|| missing(*kind, name))
        }
        Statement::Session(SessionStmt::Describe { kind, name, format }) => {
            let key = EntityKey::new(*kind, name.name.as_str());
            let (entity, domain) = if is_domain_kind(*kind) {
                let domain = session_domain(catalog, domain_context)?;
                (domain.entities.get(&key), Some(domain))
            } else if *kind == ObjectKind::Vhost {
                (catalog.global.get(&key), None)
            } else {
                return describe_other(catalog, context, *kind, name);
            };
            let entity = entity.ok_or_else(|| missing(*kind, name))?;
            Ok(describe(entity, domain, context, *format))
        }
        _ => Err(CatalogError::new(span, "not a SHOW or DESCRIBE statement")),
    }
}

fn missing(kind: ObjectKind, name: &nervix_nspl::ast::Ident) -> CatalogError {
    CatalogError::new(
        name.span,
        format!("{} '{}' does not exist", kind_name(kind), name.name),
    )
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Admin => "ADMIN",
        Role::Operator => "OPERATOR",
        Role::Reader => "READER",
    }
}

fn domain_line(domain: &Domain) -> String {
    let (state, generation) = match &domain.header.run {
        RunState::Stopped => ("stopped", domain.header.generation),
        RunState::Started { generation, .. } => ("started", *generation),
    };
    let pacing = match &domain.header.definition {
        Statement::Catalog(CatalogStmt::CreateDomain(d)) => match &d.pacing {
            Pacing::Unpaced => "unpaced".to_string(),
            Pacing::Paced { period, skew } => format!(
                "paced period={} skew={}",
                nervix_nspl::render::fmt_duration(*period),
                nervix_nspl::render::fmt_duration(*skew)
            ),
        },
        _ => "unpaced".to_string(),
    };
    format!(
        "{} state={state} generation={generation} pacing={pacing} entities={}",
        domain.name(),
        domain.entities.len()
    )
}

/// One SHOW <KIND>S line; ingestors follow the spec's format
/// (`orders_in from=CLIENT PRODUCER schema=order_in owner=node-1 status=…`).
fn summary(entity: &Entity, domain: Option<&Domain>, context: &ShowContext<'_>) -> String {
    let node = context.node_name;
    let status = super::runtime_view::status(domain, context.runtime);
    let name = &entity.key.name;
    match &entity.definition {
        Statement::Ingestor(IngestorStmt::Create(create)) => {
            let source = match &create.decode {
                Some(codec) => format!("codec={codec}"),
                None => match from_clause(&entity.definition) {
                    Some(body) => format!(
                        "schema={}",
                        body.trim_start_matches("SCHEMA ")
                            .split_whitespace()
                            .next()
                            .unwrap_or_default()
                    ),
                    None => String::new(),
                },
            };
            let figures = match (&create.source, domain) {
                (nervix_nspl::ast::ingestor::SourceBody::ClientProducer { .. }, Some(domain))
                    if status == "running" =>
                {
                    super::runtime_view::ingestor_summary(context.runtime, domain.name(), name)
                }
                _ => String::new(),
            };
            format!(
                "{name} from={} {source} owner={node} status={status}{figures}",
                head_phrase(&entity.definition).unwrap_or_default(),
            )
        }
        Statement::Catalog(CatalogStmt::CreateRelay(relay)) => {
            let branch = match &relay.branching {
                nervix_nspl::ast::Branching::BranchedBy(b) => format!("branch={b}"),
                nervix_nspl::ast::Branching::Unbranched => "unbranched".into(),
            };
            format!("{name} schema={} {branch}", relay.schema)
        }
        Statement::Catalog(CatalogStmt::CreateVhost(vhost)) => format!(
            "{name} hosts={}{}",
            vhost.hosts.join(","),
            vhost
                .tls
                .as_ref()
                .map(|t| format!(
                    " tls={} {}",
                    t.resource,
                    nervix_nspl::render::fmt_version(t.version)
                ))
                .unwrap_or_default()
        ),
        _ if entity.key.kind == ObjectKind::Emitter
            || matches!(entity.definition, Statement::Processor(_)) =>
        {
            format!("{name} owner={node} status={status}")
        }
        _ => name.clone(),
    }
}

/// The ingestor head's phrase, read from its canonical first line (`KAFKA TOPIC`).
fn head_phrase(definition: &Statement) -> Option<String> {
    let text = render_statement(definition);
    let first = text.lines().next()?;
    let head = first.strip_prefix("CREATE ")?;
    let end = head.find(" INGESTOR ")?;
    Some(head[..end].to_string())
}

/// The source body after FROM as one line, from the canonical text.
fn from_clause(definition: &Statement) -> Option<String> {
    let text = render_statement(definition);
    let mut lines = text.lines().skip(1).map(str::trim);
    let first = lines.next()?.strip_prefix("FROM ")?.to_string();
    let mut body = vec![first];
    for line in lines {
        if ["DECODE ", "TIMESTAMP ", "FILTER ", "TO "]
            .iter()
            .any(|p| line.starts_with(p))
        {
            break;
        }
        body.push(line.to_string());
    }
    Some(body.join(" "))
}

fn describe(
    entity: &Entity,
    domain: Option<&Domain>,
    context: &ShowContext<'_>,
    format: DescribeFormat,
) -> Vec<String> {
    let node = context.node_name;
    let definition = render_statement(&entity.definition);
    let references = crate::validate::references(&entity.definition);
    let dependents: Vec<EntityKey> = domain
        .map(|d| dependents(d, &entity.key))
        .unwrap_or_default();
    let mut fields: Vec<(String, String)> = vec![
        ("kind".into(), kind_name(entity.key.kind)),
        ("name".into(), entity.key.name.clone()),
    ];
    if let Some(domain) = domain {
        fields.push(("domain".into(), domain.name().to_string()));
    }
    if let (Some(head), Some(body)) = (
        head_phrase(&entity.definition),
        from_clause(&entity.definition),
    ) {
        fields.push(("from".into(), format!("{head} {body}")));
    }
    if matches!(
        entity.definition,
        Statement::Ingestor(_) | Statement::Processor(_) | Statement::Emitter(_)
    ) {
        fields.push(("owner".into(), node.to_string()));
        fields.push((
            "status".into(),
            super::runtime_view::status(domain, context.runtime).to_string(),
        ));
    }
    fields.extend(super::runtime_view::figures(
        context.runtime,
        domain,
        entity,
    ));
    let list = |keys: &[EntityKey]| {
        if keys.is_empty() {
            "none".to_string()
        } else {
            keys.iter()
                .map(EntityKey::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    fields.push(("references".into(), list(&references)));
    fields.push(("dependents".into(), list(&dependents)));
    // The typed trees' spans point into the canonical text rendered above.
    let expressions: Vec<(String, String)> = entity
        .typed
        .iter()
        .map(|typed| {
            let text = definition
                .get(typed.span.start as usize..typed.span.end as usize)
                .unwrap_or("?")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            (text, typed.ty.to_string())
        })
        .collect();
    match format {
        DescribeFormat::Text => {
            let mut lines: Vec<String> = fields.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            if !expressions.is_empty() {
                lines.push("expressions:".into());
                lines.extend(
                    expressions
                        .iter()
                        .map(|(text, ty)| format!("  {text} : {ty}")),
                );
            }
            lines.push("definition:".into());
            lines.extend(definition.lines().map(|l| format!("  {l}")));
            lines
        }
        DescribeFormat::Json => {
            let mut object = serde_json::Map::new();
            for (k, v) in fields {
                object.insert(k, serde_json::Value::String(v));
            }
            let typed = expressions
                .into_iter()
                .map(|(text, ty)| serde_json::json!({ "expression": text, "type": ty }))
                .collect();
            object.insert("expressions".into(), serde_json::Value::Array(typed));
            object.insert("definition".into(), serde_json::Value::String(definition));
            vec![serde_json::Value::Object(object).to_string()]
        }
    }
}

fn describe_other(
    catalog: &Catalog,
    context: &ShowContext<'_>,
    kind: ObjectKind,
    name: &nervix_nspl::ast::Ident,
) -> Result<Vec<String>, CatalogError> {
    match kind {
        ObjectKind::Domain => catalog
            .domains
            .get(&name.name)
            .map(|d| vec![domain_line(d)])
            .ok_or_else(|| missing(kind, name)),
        ObjectKind::User => catalog
            .users
            .get(&name.name)
            .map(|u| {
                vec![
                    format!("name: {}", u.name),
                    format!("role: {}", role_name(u.role)),
                ]
            })
            .ok_or_else(|| missing(kind, name)),
        ObjectKind::Resource => catalog
            .resources
            .get(&name.name)
            .map(|r| {
                let mut lines = vec![format!("name: {}", r.name)];
                for v in &r.versions {
                    let files: Vec<String> = v
                        .files
                        .iter()
                        .map(|(f, size)| format!("{f} ({size} B)"))
                        .collect();
                    lines.push(format!("version {}: {}", v.number, files.join(", ")));
                }
                lines
            })
            .ok_or_else(|| missing(kind, name)),
        ObjectKind::Subscription => context
            .session
            .subscriptions
            .get(&name.name)
            .map(|(domain, s)| {
                vec![
                    format!("name: {}", name.name),
                    format!("relay: {}", s.relay),
                    format!("domain: {domain}"),
                ]
            })
            .ok_or_else(|| missing(kind, name)),
        _ => Err(missing(kind, name)),
    }
}
