//! Processors (`spec/processors.md`): junction, deduplicator, reorderer, window processor,
//! inferencer, WASM processor, correlator, reingestor and generator, their ALTER operations,
//! and RESET WASM PROCESSOR.

#[derive(Debug, Clone, PartialEq)]
pub enum ProcessorStmt {}
