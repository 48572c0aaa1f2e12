//! Validation: the leader-side rules every entity must satisfy against the candidate graph of
//! its domain, with the spec's own messages where it gives them.
//!
//! One module per family; each exposes `validate` for its definitions and `references` (the
//! domain entities a definition names), which the planner uses to find dependents.

pub mod catalog_entities;
pub mod emitter;
pub mod ingestor;
pub mod processor;
pub mod route;

use nervix_nspl::ast::emitter::EmitterStmt;
use nervix_nspl::ast::ingestor::IngestorStmt;
use nervix_nspl::ast::processor::ProcessorStmt;
use nervix_nspl::Statement;

use crate::catalog::{Catalog, CatalogError, DomainScope, Entity, EntityKey};

/// Checks one domain entity against the candidate domain in `scope`.
pub fn validate_entity(scope: &DomainScope<'_>, entity: &Entity) -> Result<(), CatalogError> {
    match &entity.definition {
        Statement::Catalog(definition) => catalog_entities::validate(scope, definition),
        Statement::Ingestor(IngestorStmt::Create(definition)) => {
            ingestor::validate(scope, definition)
        }
        Statement::Ingestor(IngestorStmt::CreateSignalingProtocol(definition)) => {
            ingestor::validate_signaling(scope, definition)
        }
        Statement::Processor(ProcessorStmt::Create(definition)) => {
            processor::validate(scope, definition)
        }
        Statement::Emitter(EmitterStmt::Create(definition)) => emitter::validate(scope, definition),
        other => unreachable!("an entity holds a CREATE statement, not {other:?}"),
    }
}

/// Checks a cluster-wide entity (a virtual host) against the catalog.
pub fn validate_global(catalog: &Catalog, entity: &Entity) -> Result<(), CatalogError> {
    match &entity.definition {
        Statement::Catalog(definition) => catalog_entities::validate_global(catalog, definition),
        other => unreachable!("a global entity holds a CREATE statement, not {other:?}"),
    }
}

/// The domain entities a definition names.
pub fn references(definition: &Statement) -> Vec<EntityKey> {
    match definition {
        Statement::Catalog(definition) => catalog_entities::references(definition),
        Statement::Ingestor(IngestorStmt::Create(definition)) => ingestor::references(definition),
        Statement::Ingestor(IngestorStmt::CreateSignalingProtocol(_)) => Vec::new(),
        Statement::Processor(ProcessorStmt::Create(definition)) => {
            processor::references(definition)
        }
        Statement::Emitter(EmitterStmt::Create(definition)) => emitter::references(definition),
        _ => Vec::new(),
    }
}

/// The cluster-wide entities (virtual hosts, resources) a definition names.
pub fn global_references(definition: &Statement) -> Vec<EntityKey> {
    match definition {
        Statement::Catalog(definition) => catalog_entities::global_references(definition),
        Statement::Processor(ProcessorStmt::Create(definition)) => {
            processor::global_references(definition)
        }
        Statement::Ingestor(IngestorStmt::CreateSignalingProtocol(definition)) => {
            ingestor::signaling_global_references(definition)
        }
        _ => Vec::new(),
    }
}
