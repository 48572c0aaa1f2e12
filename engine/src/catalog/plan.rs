//! The planner: turns one statement into the catalog changes it makes, after validating the
//! candidate catalog those changes produce. Pure logic over a catalog value — no I/O, no
//! clock — so every rule is testable without a node.
//!
//! Validation is incremental and equivalent to revalidating the whole domain: an entity's
//! validity depends only on the entities it references, so after a change only the changed
//! entity and the entities that reference it (transitively) can become invalid, and exactly
//! those are checked. COMMIT re-checks the whole candidate domain.

use nervix_nspl::ast::catalog::CatalogStmt;
use nervix_nspl::ast::emitter::EmitterStmt;
use nervix_nspl::ast::ingestor::IngestorStmt;
use nervix_nspl::ast::processor::ProcessorStmt;
use nervix_nspl::ast::session::SessionStmt;
use nervix_nspl::{ObjectKind, Span, Statement};

use super::{
    kind_name, Catalog, CatalogError, Change, Domain, DomainHeader, DomainScope, Entity, EntityKey,
    RunState,
};
use crate::{alter, validate};

/// What a statement does: the changes to replicate (empty for read-only statements) and the
/// lines to print.
#[derive(Debug, Default, PartialEq)]
pub struct Planned {
    pub changes: Vec<Change>,
    pub output: Vec<String>,
}

impl Planned {
    fn change(change: Change) -> Planned {
        Planned {
            changes: vec![change],
            output: Vec::new(),
        }
    }

    fn note(line: impl Into<String>) -> Planned {
        Planned {
            changes: Vec::new(),
            output: vec![line.into()],
        }
    }
}

/// Where a statement stands: its session's domain and the span of its text.
#[derive(Debug, Clone, Copy)]
pub struct StatementContext<'a> {
    pub domain: Option<&'a str>,
    pub span: Span,
    /// The leader's wall clock (UTC ns) when the statement runs: a START records it, so the
    /// planner itself reads no clock.
    pub wall_ns: i64,
}

/// Plans a definition statement (CREATE / ALTER / DROP of catalog entities, CREATE / DROP
/// DOMAIN, START / STOP). Statements that need the node — users, resources, subscriptions,
/// cluster commands, SHOW — are the caller's; they are refused here as not definitions.
pub fn plan_statement(
    catalog: &Catalog,
    context: StatementContext<'_>,
    statement: &Statement,
) -> Result<Planned, CatalogError> {
    match statement {
        Statement::Catalog(CatalogStmt::CreateDomain(create)) => {
            let name = &create.name.name;
            if catalog.domains.contains_key(name) {
                return exists_or_skip(
                    create.if_not_exists,
                    create.name.span,
                    format!("domain '{name}' already exists"),
                );
            }
            let mut definition = create.clone();
            definition.if_not_exists = false;
            Ok(Planned::change(Change::PutDomain(DomainHeader {
                name: name.clone(),
                definition: Statement::Catalog(CatalogStmt::CreateDomain(definition)),
                run: RunState::Stopped,
                generation: 0,
            })))
        }
        Statement::Session(SessionStmt::Drop {
            kind: ObjectKind::Domain,
            if_exists,
            name,
        }) => {
            let Some(domain) = catalog.domains.get(&name.name) else {
                return missing_or_skip(
                    *if_exists,
                    name.span,
                    format!("domain '{}' does not exist", name.name),
                );
            };
            if let Some(entity) = domain.entities.values().next() {
                return Err(CatalogError::new(
                    name.span,
                    format!(
                        "domain '{}' is not empty: it holds {} (and {} more); drop them first",
                        name.name,
                        entity.key,
                        domain.entities.len() - 1
                    ),
                ));
            }
            if matches!(domain.header.run, RunState::Started { .. }) {
                return Err(CatalogError::new(
                    name.span,
                    format!("domain '{}' is running: STOP it first", name.name),
                ));
            }
            Ok(Planned::change(Change::DropDomain(name.name.clone())))
        }
        Statement::Session(SessionStmt::Start(at)) => {
            let domain = session_domain(catalog, context)?;
            if matches!(domain.header.run, RunState::Started { .. }) {
                return Err(CatalogError::new(
                    context.span,
                    format!("domain '{}' is already started", domain.name()),
                ));
            }
            if let Err(message) = super::start::start_anchor(at, context.wall_ns) {
                return Err(CatalogError::new(context.span, message));
            }
            let mut header = domain.header.clone();
            header.generation += 1;
            header.run = RunState::Started {
                at: at.clone(),
                generation: header.generation,
                started_wall_ns: context.wall_ns,
            };
            Ok(Planned::change(Change::PutDomain(header)))
        }
        Statement::Session(SessionStmt::Stop) => {
            let domain = session_domain(catalog, context)?;
            if domain.header.run == RunState::Stopped {
                return Err(CatalogError::new(
                    context.span,
                    format!("domain '{}' is not started", domain.name()),
                ));
            }
            let mut header = domain.header.clone();
            header.run = RunState::Stopped;
            Ok(Planned::change(Change::PutDomain(header)))
        }
        Statement::Session(SessionStmt::Drop {
            kind,
            if_exists,
            name,
        }) if is_domain_kind(*kind) => {
            let domain = session_domain(catalog, context)?;
            let key = EntityKey::new(*kind, name.name.as_str());
            if !domain.entities.contains_key(&key) {
                return missing_or_skip(
                    *if_exists,
                    name.span,
                    format!("{key} does not exist in domain '{}'", domain.name()),
                );
            }
            if let Some(dependent) = dependents(domain, &key).into_iter().next() {
                return Err(CatalogError::new(
                    name.span,
                    format!("cannot drop {key}: {dependent} depends on it"),
                ));
            }
            Ok(Planned::change(Change::DeleteEntity {
                domain: domain.name().to_string(),
                key,
            }))
        }
        Statement::Session(SessionStmt::Drop {
            kind: ObjectKind::Vhost,
            if_exists,
            name,
        }) => {
            let key = EntityKey::new(ObjectKind::Vhost, name.name.as_str());
            if !catalog.global.contains_key(&key) {
                return missing_or_skip(*if_exists, name.span, format!("{key} does not exist"));
            }
            if let Some(dependent) = global_dependents(catalog, &key).into_iter().next() {
                return Err(CatalogError::new(
                    name.span,
                    format!("cannot drop {key}: {dependent} depends on it"),
                ));
            }
            Ok(Planned::change(Change::DeleteGlobal(key)))
        }
        _ => {
            if let Some((key, name_span, if_not_exists)) = definition_identity(statement) {
                return plan_create(catalog, context, statement, key, name_span, if_not_exists);
            }
            if let Some((key, name_span)) = alteration_target(statement) {
                return plan_alter(catalog, context, statement, key, name_span);
            }
            Err(CatalogError::new(
                context.span,
                "this statement is not a catalog definition",
            ))
        }
    }
}

fn exists_or_skip(
    if_not_exists: bool,
    span: Span,
    message: String,
) -> Result<Planned, CatalogError> {
    if if_not_exists {
        Ok(Planned::note(format!("{message}, skipped")))
    } else {
        Err(CatalogError::new(span, message))
    }
}

fn missing_or_skip(if_exists: bool, span: Span, message: String) -> Result<Planned, CatalogError> {
    if if_exists {
        Ok(Planned::note(format!("{message}, skipped")))
    } else {
        Err(CatalogError::new(span, message))
    }
}

/// Kinds that live inside a domain.
pub fn is_domain_kind(kind: ObjectKind) -> bool {
    !matches!(
        kind,
        ObjectKind::Domain
            | ObjectKind::Vhost
            | ObjectKind::Resource
            | ObjectKind::User
            | ObjectKind::Subscription
            | ObjectKind::Node
    )
}

/// The session's domain, or a refusal saying to choose one.
pub fn session_domain<'a>(
    catalog: &'a Catalog,
    context: StatementContext<'_>,
) -> Result<&'a Domain, CatalogError> {
    let Some(name) = context.domain else {
        return Err(CatalogError::new(
            context.span,
            "no domain selected: run USE <domain> first",
        ));
    };
    catalog
        .domains
        .get(name)
        .ok_or_else(|| CatalogError::new(context.span, format!("domain '{name}' does not exist")))
}

/// The entity a CREATE statement defines: its key, the span of its name, and IF NOT EXISTS.
pub fn definition_identity(statement: &Statement) -> Option<(EntityKey, Span, bool)> {
    let (kind, name, if_not_exists) = match statement {
        Statement::Catalog(c) => match c {
            CatalogStmt::CreateSchema(s) => (ObjectKind::Schema, &s.name, s.if_not_exists),
            CatalogStmt::CreateWireSchema(s) => (ObjectKind::WireSchema, &s.name, s.if_not_exists),
            CatalogStmt::CreateCodec(s) => (ObjectKind::Codec, &s.name, s.if_not_exists),
            CatalogStmt::CreateBranch(s) => (ObjectKind::Branch, &s.name, s.if_not_exists),
            CatalogStmt::CreateRelay(s) => (ObjectKind::Relay, &s.name, s.if_not_exists),
            CatalogStmt::CreateClient(s) => (ObjectKind::Client, &s.name, s.if_not_exists),
            CatalogStmt::CreateVhost(s) => (ObjectKind::Vhost, &s.name, s.if_not_exists),
            CatalogStmt::CreateEndpoint(s) => (ObjectKind::Endpoint, &s.name, s.if_not_exists),
            _ => return None,
        },
        Statement::Ingestor(IngestorStmt::Create(s)) => {
            (ObjectKind::Ingestor, &s.name, s.if_not_exists)
        }
        Statement::Ingestor(IngestorStmt::CreateSignalingProtocol(s)) => {
            (ObjectKind::SignalingProtocol, &s.name, s.if_not_exists)
        }
        Statement::Processor(ProcessorStmt::Create(s)) => (s.def.kind(), &s.name, s.if_not_exists),
        Statement::Emitter(EmitterStmt::Create(s)) => {
            (ObjectKind::Emitter, &s.name, s.if_not_exists)
        }
        _ => return None,
    };
    Some((
        EntityKey::new(kind, name.name.as_str()),
        name.span,
        if_not_exists,
    ))
}

/// The entity an ALTER statement changes, with the span of its name.
fn alteration_target(statement: &Statement) -> Option<(EntityKey, Span)> {
    let (kind, name) = match statement {
        Statement::Catalog(CatalogStmt::AlterSchema(a)) => (ObjectKind::Schema, &a.name),
        Statement::Catalog(CatalogStmt::AlterClient(a)) => (ObjectKind::Client, &a.name),
        Statement::Ingestor(IngestorStmt::Alter(a)) => (ObjectKind::Ingestor, &a.name),
        Statement::Processor(ProcessorStmt::Alter(a)) => (a.kind, &a.name),
        Statement::Emitter(EmitterStmt::Alter(a)) => (ObjectKind::Emitter, &a.name),
        _ => return None,
    };
    Some((EntityKey::new(kind, name.name.as_str()), name.span))
}

/// A definition as stored: without IF NOT EXISTS, which is about the statement, not the model.
pub fn stored_definition(statement: &Statement) -> Statement {
    let mut definition = statement.clone();
    match &mut definition {
        Statement::Catalog(c) => match c {
            CatalogStmt::CreateSchema(s) => s.if_not_exists = false,
            CatalogStmt::CreateWireSchema(s) => s.if_not_exists = false,
            CatalogStmt::CreateCodec(s) => s.if_not_exists = false,
            CatalogStmt::CreateBranch(s) => s.if_not_exists = false,
            CatalogStmt::CreateRelay(s) => s.if_not_exists = false,
            CatalogStmt::CreateClient(s) => s.if_not_exists = false,
            CatalogStmt::CreateVhost(s) => s.if_not_exists = false,
            CatalogStmt::CreateEndpoint(s) => s.if_not_exists = false,
            _ => {}
        },
        Statement::Ingestor(IngestorStmt::Create(s)) => s.if_not_exists = false,
        Statement::Ingestor(IngestorStmt::CreateSignalingProtocol(s)) => s.if_not_exists = false,
        Statement::Processor(ProcessorStmt::Create(s)) => s.if_not_exists = false,
        Statement::Emitter(EmitterStmt::Create(s)) => s.if_not_exists = false,
        _ => {}
    }
    definition
}

fn plan_create(
    catalog: &Catalog,
    context: StatementContext<'_>,
    statement: &Statement,
    key: EntityKey,
    name_span: Span,
    if_not_exists: bool,
) -> Result<Planned, CatalogError> {
    let exists = if is_domain_kind(key.kind) {
        session_domain(catalog, context)?
            .entities
            .contains_key(&key)
    } else {
        catalog.global.contains_key(&key)
    };
    if exists && if_not_exists {
        return exists_or_skip(true, name_span, format!("{key} already exists"));
    }
    // VERSION LATEST binds the newest version now; the model stores the number.
    let mut definition = stored_definition(statement);
    validate::catalog_entities::bind_latest(catalog, &mut definition)?;
    let entity = Entity::new(key.clone(), definition);
    if !is_domain_kind(key.kind) {
        if exists {
            return exists_or_skip(false, name_span, format!("{key} already exists"));
        }
        validate::validate_global(catalog, &entity)?;
        return Ok(Planned::change(Change::PutGlobal(entity)));
    }
    let domain = session_domain(catalog, context)?;
    if domain.entities.contains_key(&key) {
        return exists_or_skip(
            if_not_exists,
            name_span,
            format!("{key} already exists in domain '{}'", domain.name()),
        );
    }
    validate::validate_entity(
        &DomainScope::with_overlay(catalog, domain, &entity),
        &entity,
    )?;
    let entity = resolve_typed(catalog, domain, entity)?;
    Ok(Planned::change(Change::PutEntity {
        domain: domain.name().to_string(),
        entity,
    }))
}

fn plan_alter(
    catalog: &Catalog,
    context: StatementContext<'_>,
    statement: &Statement,
    key: EntityKey,
    name_span: Span,
) -> Result<Planned, CatalogError> {
    let domain = session_domain(catalog, context)?;
    let Some(stored) = domain.entities.get(&key) else {
        return Err(CatalogError::new(
            name_span,
            format!("{key} does not exist in domain '{}'", domain.name()),
        ));
    };
    let mut alteration = statement.clone();
    validate::catalog_entities::bind_latest(catalog, &mut alteration)?;
    let definition = alter::fold(stored, &alteration)?;
    let entity = Entity::new(key.clone(), definition);
    validate::validate_entity(
        &DomainScope::with_overlay(catalog, domain, &entity),
        &entity,
    )?;
    let entity = resolve_typed(catalog, domain, entity)?;
    let scope = DomainScope::with_overlay(catalog, domain, &entity);
    let retyped = revalidate_dependents(&scope, &key, context.span)?;
    let mut changes = vec![Change::PutEntity {
        domain: domain.name().to_string(),
        entity,
    }];
    changes.extend(retyped.into_iter().map(|entity| Change::PutEntity {
        domain: domain.name().to_string(),
        entity,
    }));
    Ok(Planned {
        changes,
        output: Vec::new(),
    })
}

/// The entity as stored: its definition re-read from its canonical text (so every span points
/// into what SHOW CREATE prints) and every expression type-resolved.
fn resolve_typed(
    catalog: &Catalog,
    domain: &Domain,
    entity: Entity,
) -> Result<Entity, CatalogError> {
    let text = nervix_nspl::render_statement(&entity.definition);
    let canonical = nervix_nspl::parse_statement(&text).map_err(|e| {
        CatalogError::new(
            Span::default(),
            format!(
                "broken invariant: the canonical text of {} does not parse: {e}",
                entity.key
            ),
        )
    })?;
    let mut resolved = Entity::new(entity.key, canonical);
    let (result, typed) = crate::types::collect::collecting(|| {
        validate::validate_entity(
            &DomainScope::with_overlay(catalog, domain, &resolved),
            &resolved,
        )
    });
    result?;
    resolved.typed = typed;
    Ok(resolved)
}

/// Re-checks every entity that (transitively) references `changed` in the candidate domain;
/// returns those whose typed expressions changed (a field type they read changed).
fn revalidate_dependents(
    scope: &DomainScope<'_>,
    changed: &EntityKey,
    span: Span,
) -> Result<Vec<Entity>, CatalogError> {
    let mut retyped = Vec::new();
    let mut pending = vec![changed.clone()];
    let mut checked = std::collections::BTreeSet::new();
    while let Some(key) = pending.pop() {
        for dependent in dependents(scope.domain, &key) {
            if !checked.insert(dependent.clone()) {
                continue;
            }
            let entity = &scope.domain.entities[&dependent];
            let (result, typed) =
                crate::types::collect::collecting(|| validate::validate_entity(scope, entity));
            result.map_err(|e| {
                CatalogError::new(
                    span,
                    format!("this change breaks {dependent}: {}", e.message),
                )
            })?;
            if typed != entity.typed {
                let mut updated = entity.clone();
                updated.typed = typed;
                retyped.push(updated);
            }
            pending.push(dependent);
        }
    }
    Ok(retyped)
}

/// Entities of `domain` that reference `key`, in key order.
pub fn dependents(domain: &Domain, key: &EntityKey) -> Vec<EntityKey> {
    domain
        .entities
        .values()
        .filter(|e| e.key != *key && validate::references(&e.definition).contains(key))
        .map(|e| e.key.clone())
        .collect()
}

/// Entities anywhere that reference the cluster-wide `key` (a vhost or resource).
pub fn global_dependents(catalog: &Catalog, key: &EntityKey) -> Vec<String> {
    let mut found = Vec::new();
    for domain in catalog.domains.values() {
        for entity in domain.entities.values() {
            if validate::global_references(&entity.definition).contains(key) {
                found.push(format!("{} in domain '{}'", entity.key, domain.name()));
            }
        }
    }
    for entity in catalog.global.values() {
        if entity.key != *key && validate::global_references(&entity.definition).contains(key) {
            found.push(entity.key.to_string());
        }
    }
    found
}

/// Re-checks every entity of a candidate domain (COMMIT).
pub fn validate_domain(catalog: &Catalog, domain: &Domain, span: Span) -> Result<(), CatalogError> {
    let scope = DomainScope::new(catalog, domain);
    for entity in domain.entities.values() {
        validate::validate_entity(&scope, entity)
            .map_err(|e| CatalogError::new(span, format!("{}: {}", entity.key, e.message)))?;
    }
    Ok(())
}

/// `relay 'x'` style name of a kind, for callers formatting their own messages.
pub fn describe_kind(kind: ObjectKind) -> String {
    kind_name(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(catalog: &mut Catalog, src: &str) -> Planned {
        let statement = nervix_nspl::parse_statement(src).expect("parses");
        let context = StatementContext {
            domain: Some("d"),
            span: Span::default(),
            wall_ns: 0,
        };
        let planned = plan_statement(catalog, context, &statement).expect("accepted");
        for change in &planned.changes {
            catalog.apply_change(change);
        }
        planned
    }

    #[test]
    fn stored_models_keep_their_expressions_typed() {
        let mut catalog = Catalog::default();
        run(&mut catalog, "CREATE DOMAIN d;");
        run(&mut catalog, "CREATE SCHEMA s (amount I32);");
        run(&mut catalog, "CREATE RELAY a SCHEMA s UNBRANCHED;");
        run(&mut catalog, "CREATE RELAY b SCHEMA s UNBRANCHED;");
        run(
            &mut catalog,
            "CREATE JUNCTION j FROM a FILTER WHERE input.amount > 0 UNBRANCHED \
             TO b INHERIT ALL FLUSH IMMEDIATE ON MESSAGE ERROR LOG;",
        );
        let junction = &catalog.domains["d"].entities[&EntityKey::new(ObjectKind::Junction, "j")];
        assert_eq!(junction.typed.len(), 1, "{:#?}", junction.typed);
    }
}
