//! [`JaqCodecPlan`]: a JAQ codec resolved once — its format, its compiled programs and the
//! target schema's fields — and shared (`Arc`) by every shard's decoder and by the extension
//! workers that unfold payloads for them.
//!
//! Building refuses a codec that is not a JAQ codec, has no program, whose programs do not
//! compile, or whose schema repeats a field or holds an ARRAY Arrow cannot represent. A
//! compiled program holds no interior mutability (runs keep their state in their own
//! [`super::program`] guard), so one plan serves any number of threads at once.

use std::collections::HashMap;

use arrow_schema::SchemaRef;
use nervix_nspl::ast::catalog::{CodecSource, CreateCodec, JaqFormat};

use crate::codec::json::columns::Column;
use crate::runtime::plan::arrow_schema;
use crate::types::DataType;
use crate::validate::route::Field;

use super::error::CodecError;
use super::program::{compile, Filter};

/// One schema field a record is converted into.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub name: String,
    pub ty: DataType,
    pub nullable: bool,
}

/// An immutable JAQ decoding and emitting plan.
pub struct JaqCodecPlan {
    pub(crate) format: JaqFormat,
    schema: SchemaRef,
    pub(crate) fields: Vec<Target>,
    /// Field name → index into `fields`.
    pub(crate) by_name: HashMap<Box<[u8]>, usize>,
    pub(crate) ingestion: Option<Filter>,
    pub(crate) emitting: Option<Filter>,
}

impl std::fmt::Debug for JaqCodecPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JaqCodecPlan")
            .field("format", &self.format)
            .field("schema", &self.schema)
            .field("ingestion", &self.ingestion.is_some())
            .field("emitting", &self.emitting.is_some())
            .finish()
    }
}

impl JaqCodecPlan {
    /// Compiles `codec`'s programs and resolves `target`, the fields of its `TO SCHEMA` in
    /// order.
    pub fn build(codec: &CreateCodec, target: &[Field]) -> Result<JaqCodecPlan, CodecError> {
        let name = || codec.name.name.clone();
        let CodecSource::Jaq {
            format,
            on_ingestion,
            on_emitting,
        } = &codec.source
        else {
            return Err(CodecError::NotJaq { codec: name() });
        };
        if on_ingestion.is_none() && on_emitting.is_none() {
            return Err(CodecError::NoProgram { codec: name() });
        }
        let program = |clause: &'static str, code: &Option<String>| {
            code.as_deref()
                .map(|code| {
                    compile(code).map_err(|message| CodecError::Compile {
                        codec: name(),
                        clause,
                        message,
                    })
                })
                .transpose()
        };
        let ingestion = program("ON INGESTION", on_ingestion)?;
        let emitting = program("ON EMITTING", on_emitting)?;
        let mut by_name = HashMap::with_capacity(target.len());
        let mut fields = Vec::with_capacity(target.len());
        for (i, field) in target.iter().enumerate() {
            if by_name
                .insert(field.name.as_bytes().to_vec().into_boxed_slice(), i)
                .is_some()
            {
                return Err(CodecError::DuplicateField {
                    field: field.name.clone(),
                });
            }
            if !representable(&field.ty.data_type) {
                return Err(CodecError::Undecodable {
                    field: field.name.clone(),
                    ty: field.ty.data_type.clone(),
                });
            }
            fields.push(Target {
                name: field.name.clone(),
                ty: field.ty.data_type.clone(),
                nullable: field.ty.nullable,
            });
        }
        Ok(JaqCodecPlan {
            format: *format,
            schema: arrow_schema(target),
            fields,
            by_name,
            ingestion,
            emitting,
        })
    }

    /// The Arrow schema of decoded batches: `runtime::plan::arrow_schema(target)`.
    pub fn schema(&self) -> SchemaRef {
        SchemaRef::clone(&self.schema)
    }

    pub fn format(&self) -> JaqFormat {
        self.format
    }

    pub fn has_ingestion(&self) -> bool {
        self.ingestion.is_some()
    }

    pub fn has_emitting(&self) -> bool {
        self.emitting.is_some()
    }

    /// Empty builders, one per field.
    pub(crate) fn columns(&self) -> Vec<Column> {
        self.fields.iter().map(|f| Column::new(&f.ty)).collect()
    }
}

/// Whether Arrow can hold `ty`: every ARRAY has dimensions, each fitting an `i32`.
fn representable(ty: &DataType) -> bool {
    match ty {
        DataType::Vec(e) | DataType::List(e) => representable(e),
        DataType::Array(e, dims) => {
            !dims.is_empty() && dims.iter().all(|&d| i32::try_from(d).is_ok()) && representable(e)
        }
        _ => true,
    }
}
