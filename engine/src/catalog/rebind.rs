//! REBIND RESOURCE: moving virtual hosts to another version of their TLS bundle, which
//! refreshes the HTTPS listener without pausing ingestion (spec "Resources").

use nervix_nspl::ast::catalog::{CatalogStmt, RebindResource};
use nervix_nspl::{ObjectKind, Statement};

use super::{Catalog, CatalogError, Change, Entity, EntityKey};
use crate::validate::catalog_entities::resolve_version;

/// The vhost changes REBIND RESOURCE makes: every named vhost (or, with no list, every vhost
/// serving the resource) moves to the version, which must exist.
pub fn rebind(catalog: &Catalog, rebind: &RebindResource) -> Result<Vec<Change>, CatalogError> {
    let (_, number) = resolve_version(catalog, &rebind.resource, rebind.version)?;
    let version = nervix_nspl::ast::ResourceVersion::Number(number);
    let mut changes = Vec::new();
    let targets: Vec<&Entity> = if rebind.vhosts.is_empty() {
        catalog
            .global
            .values()
            .filter(|e| e.key.kind == ObjectKind::Vhost)
            .collect()
    } else {
        let mut named = Vec::new();
        for vhost in &rebind.vhosts {
            let key = EntityKey::new(ObjectKind::Vhost, vhost.name.as_str());
            let entity = catalog.global.get(&key).ok_or_else(|| {
                CatalogError::new(vhost.span, format!("vhost '{}' does not exist", vhost.name))
            })?;
            named.push(entity);
        }
        named
    };
    for entity in targets {
        let mut updated = entity.clone();
        let Statement::Catalog(CatalogStmt::CreateVhost(vhost)) = &mut updated.definition else {
            continue;
        };
        match &mut vhost.tls {
            Some(tls) if tls.resource.name == rebind.resource.name => tls.version = version,
            _ if rebind.vhosts.is_empty() => continue,
            _ => {
                return Err(CatalogError::new(
                    rebind.resource.span,
                    format!(
                        "vhost '{}' does not serve TLS from resource '{}'",
                        entity.key.name, rebind.resource.name
                    ),
                ))
            }
        }
        changes.push(Change::PutGlobal(updated));
    }
    if changes.is_empty() {
        return Err(CatalogError::new(
            rebind.resource.span,
            format!(
                "no vhost serves TLS from resource '{}'",
                rebind.resource.name
            ),
        ));
    }
    Ok(changes)
}
