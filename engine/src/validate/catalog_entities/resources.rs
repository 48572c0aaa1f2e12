//! Resource versions: resolving `<resource> VERSION n | LATEST` and binding LATEST.
//!
//! The spec binds `VERSION LATEST` once, when the statement is applied: "VERSION LATEST binds
//! the highest completed version of the bundle when the statement is applied", the entity
//! "stores one concrete version and keeps presenting that certificate after later uploads",
//! and SHOW CREATE "renders the number it bound" (VHOST; the same words for inferencer, WASM
//! and PROTOBUF signaling resources). [`bind_latest`] is that rewrite: the planner calls it on
//! the incoming statement before planning, so the stored model — and everything rendered from
//! it — holds the number. Validation itself accepts `LATEST` whenever the resource has at
//! least one version, so a definition that was never bound stays valid as written.

use nervix_nspl::ast::catalog::{CatalogStmt, ClientOperation, Mount};
use nervix_nspl::ast::ingestor::{IngestorStmt, SignalingFormat};
use nervix_nspl::ast::processor::{AlterOp, ProcessorDef, ProcessorStmt};
use nervix_nspl::ast::{Ident, ResourceVersion};
use nervix_nspl::Statement;

use crate::catalog::{Catalog, CatalogError, Resource};

/// The resource `resource` names and the version number `version` binds: the number itself
/// when the resource has it, or the highest completed version for `LATEST`.
pub fn resolve_version<'a>(
    catalog: &'a Catalog,
    resource: &Ident,
    version: ResourceVersion,
) -> Result<(&'a Resource, u64), CatalogError> {
    let found = catalog.resources.get(&resource.name).ok_or_else(|| {
        CatalogError::new(
            resource.span,
            format!("resource '{}' does not exist", resource.name),
        )
    })?;
    match version {
        ResourceVersion::Number(n) if found.has_version(n) => Ok((found, n)),
        ResourceVersion::Number(n) => Err(CatalogError::new(
            resource.span,
            format!("resource '{}' has no version {n}", resource.name),
        )),
        ResourceVersion::Latest => found
            .versions
            .iter()
            .map(|v| v.number)
            .max()
            .map(|n| (found, n))
            .ok_or_else(|| {
                CatalogError::new(
                    resource.span,
                    format!(
                        "resource '{}' has no version yet: VERSION LATEST binds the highest \
                         uploaded version, so upload one first",
                        resource.name
                    ),
                )
            }),
    }
}

/// Rewrites `VERSION LATEST` of `resource` to the number it binds now.
pub fn bind_version(
    catalog: &Catalog,
    resource: &Ident,
    version: &mut ResourceVersion,
) -> Result<(), CatalogError> {
    if *version == ResourceVersion::Latest {
        let (_, number) = resolve_version(catalog, resource, *version)?;
        *version = ResourceVersion::Number(number);
    }
    Ok(())
}

fn bind_mounts(catalog: &Catalog, mounts: &mut [Mount]) -> Result<(), CatalogError> {
    mounts
        .iter_mut()
        .try_for_each(|m| bind_version(catalog, &m.resource, &mut m.version))
}

/// Rewrites every `VERSION LATEST` in `statement` to the highest completed version of its
/// resource, as the spec binds it when the statement is applied: client MOUNTs (CREATE and
/// ALTER CLIENT … SET MOUNT), `CREATE VHOST … WITH TLS`, `REBIND RESOURCE … TO VERSION`,
/// inferencer and WASM `USING RESOURCE` (CREATE and ALTER … SET RESOURCE) and PROTOBUF
/// signaling protocols. Refuses a resource that does not exist or has no version; statements
/// without resource versions are left untouched.
pub fn bind_latest(catalog: &Catalog, statement: &mut Statement) -> Result<(), CatalogError> {
    match statement {
        Statement::Catalog(catalog_stmt) => match catalog_stmt {
            CatalogStmt::CreateClient(client) => bind_mounts(catalog, &mut client.mounts),
            CatalogStmt::AlterClient(alter) => {
                for operation in &mut alter.operations {
                    if let ClientOperation::SetMount(mounts) = operation {
                        bind_mounts(catalog, mounts)?;
                    }
                }
                Ok(())
            }
            CatalogStmt::CreateVhost(vhost) => match &mut vhost.tls {
                Some(mount) => bind_version(catalog, &mount.resource, &mut mount.version),
                None => Ok(()),
            },
            CatalogStmt::RebindResource(rebind) => {
                bind_version(catalog, &rebind.resource, &mut rebind.version)
            }
            _ => Ok(()),
        },
        Statement::Processor(ProcessorStmt::Create(create)) => match &mut create.def {
            ProcessorDef::Inferencer { model: file, .. }
            | ProcessorDef::Wasm { module: file, .. } => {
                bind_version(catalog, &file.resource, &mut file.version)
            }
            _ => Ok(()),
        },
        Statement::Processor(ProcessorStmt::Alter(alter)) => {
            for operation in &mut alter.ops {
                if let AlterOp::SetResource {
                    resource, version, ..
                } = operation
                {
                    bind_version(catalog, resource, version)?;
                }
            }
            Ok(())
        }
        Statement::Ingestor(IngestorStmt::CreateSignalingProtocol(protocol)) => {
            match &mut protocol.format {
                SignalingFormat::Protobuf(protobuf) => {
                    bind_version(catalog, &protobuf.resource, &mut protobuf.version)
                }
                _ => Ok(()),
            }
        }
        _ => Ok(()),
    }
}
