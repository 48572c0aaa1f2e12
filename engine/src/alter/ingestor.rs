//! Folding ALTER statements of the ingestor family (spec "Altering Ingestors").
//!
//! The ALTER's head must be the stored ingestor's, so an alteration never changes what an
//! ingestor reads. Operations rewrite the stored CREATE in written order: SET FROM replaces the
//! whole source body, SET QUIESCE only its quiesce mode (refused here when the source does not
//! honor it, since SET QUIESCE parses every body), ADD ROUTE appends, REPLACE ROUTE keeps the
//! route's position, DROP ROUTE removes it. DROP and REPLACE name a relay, so they need exactly
//! one route to that relay; the last route cannot be dropped. Dropping a TIMESTAMP or FILTER
//! that is not there is accepted as a no-op (the result is what the operation asks for).
//!
//! The folded definition carries the ALTER's name (same name, the ALTER's span), so refusals
//! validation gives about the ingestor as a whole point into the statement being applied.

use nervix_nspl::ast::ingestor::{
    AlterIngestor, AlterIngestorOp, CreateIngestor, IngestorHead, IngestorStmt,
};
use nervix_nspl::ast::{Ident, Route};
use nervix_nspl::Statement;

use crate::catalog::{CatalogError, Entity};
use crate::validate::ingestor::check_quiesce;

pub fn fold(stored: &Entity, alteration: &AlterIngestor) -> Result<Statement, CatalogError> {
    let Statement::Ingestor(IngestorStmt::Create(create)) = &stored.definition else {
        unreachable!("an ingestor entity holds a CREATE … INGESTOR")
    };
    let mut definition: CreateIngestor = (**create).clone();
    let stored_head = definition.source.head();
    if stored_head != alteration.head {
        return Err(CatalogError::new(
            alteration.name.span,
            format!(
                "the stored ingestor reads {}, so ALTER {} INGESTOR cannot alter it",
                stored_head.phrase(),
                alteration.head.phrase()
            ),
        ));
    }
    definition.name = alteration.name.clone();
    for operation in &alteration.operations {
        apply(&mut definition, operation, &alteration.name)?;
    }
    Ok(Statement::Ingestor(IngestorStmt::Create(Box::new(
        definition,
    ))))
}

fn node(name: &Ident) -> String {
    format!("ingestor '{}'", name.name)
}

fn apply(
    definition: &mut CreateIngestor,
    operation: &AlterIngestorOp,
    name: &Ident,
) -> Result<(), CatalogError> {
    match operation {
        AlterIngestorOp::SetFrom(body) => definition.source = body.clone(),
        AlterIngestorOp::SetQuiesce(quiesce) => {
            check_quiesce(&definition.source, quiesce, name.span)?;
            *definition.source.quiesce_mut() = quiesce.clone();
        }
        AlterIngestorOp::SetDecode(codec) => {
            if definition.source.head() == IngestorHead::ClientProducer {
                return Err(CatalogError::new(
                    codec.span,
                    "CLIENT PRODUCER ingestors decode nothing and take no DECODE USING: a \
                     submitted batch already carries the input schema",
                ));
            }
            definition.decode = Some(codec.clone());
        }
        AlterIngestorOp::SetTimestamp(timestamp) => definition.timestamp = Some(timestamp.clone()),
        AlterIngestorOp::DropTimestamp => definition.timestamp = None,
        AlterIngestorOp::SetFilter(filter) => definition.filter = Some(filter.clone()),
        AlterIngestorOp::DropFilter => definition.filter = None,
        AlterIngestorOp::AddRoute(route) => definition.routes.push(route.clone()),
        AlterIngestorOp::DropRoute(relay) => {
            let index = route_index(&definition.routes, relay, "DROP", &node(name))?;
            if definition.routes.len() == 1 {
                return Err(CatalogError::new(
                    relay.span,
                    "an ingestor must retain at least one route",
                ));
            }
            definition.routes.remove(index);
        }
        AlterIngestorOp::ReplaceRoute(route) => {
            let index = route_index(&definition.routes, &route.target, "REPLACE", &node(name))?;
            definition.routes[index] = route.clone();
        }
        AlterIngestorOp::SetGeneralError(policy) => definition.on_general_error = *policy,
    }
    Ok(())
}

/// The one route to `relay`, which `verb` (`DROP`, `REPLACE`) of `node` (`ingestor 'x'`)
/// names.
pub(crate) fn route_index(
    routes: &[Route],
    relay: &Ident,
    verb: &str,
    node: &str,
) -> Result<usize, CatalogError> {
    let matching: Vec<usize> = routes
        .iter()
        .enumerate()
        .filter(|(_, r)| r.target.name == relay.name)
        .map(|(i, _)| i)
        .collect();
    match matching.as_slice() {
        [index] => Ok(*index),
        [] => Err(CatalogError::new(
            relay.span,
            format!(
                "{node} has no route to relay '{}' to {}",
                relay.name,
                verb.to_lowercase()
            ),
        )),
        several => Err(CatalogError::new(
            relay.span,
            format!(
                "{verb} ROUTE TO {} is ambiguous: {node} has {} routes to relay '{}'",
                relay.name,
                several.len(),
                relay.name
            ),
        )),
    }
}
