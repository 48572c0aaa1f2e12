//! Folding ALTER statements into stored definitions: each operation rewrites the CREATE
//! statement it alters, in written order, so the model stays one CREATE statement that
//! `SHOW CREATE` renders. Refusals that need only the stored definition (a head that does not
//! match, an ambiguous route target, a last route dropped) happen here; rules that need the
//! rest of the graph are validation's.

pub mod catalog;
pub mod emitter;
pub mod ingestor;
pub mod processor;

use nervix_nspl::ast::catalog::CatalogStmt;
use nervix_nspl::ast::emitter::EmitterStmt;
use nervix_nspl::ast::ingestor::IngestorStmt;
use nervix_nspl::ast::processor::ProcessorStmt;
use nervix_nspl::Statement;

use crate::catalog::{CatalogError, Entity};

/// The definition `alteration` makes of `stored`.
pub fn fold(stored: &Entity, alteration: &Statement) -> Result<Statement, CatalogError> {
    match alteration {
        Statement::Catalog(CatalogStmt::AlterSchema(a)) => catalog::fold_schema(stored, a),
        Statement::Catalog(CatalogStmt::AlterClient(a)) => catalog::fold_client(stored, a),
        Statement::Ingestor(IngestorStmt::Alter(a)) => ingestor::fold(stored, a),
        Statement::Processor(ProcessorStmt::Alter(a)) => processor::fold(stored, a),
        Statement::Emitter(EmitterStmt::Alter(a)) => emitter::fold(stored, a),
        other => unreachable!("the planner folds only ALTER statements, not {other:?}"),
    }
}
