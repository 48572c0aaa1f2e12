//! Names for completion, read from the catalog: after an ingestor's FROM only clients of its
//! connector (or endpoints of its TYPE) are offered.

use nervix_nspl::ast::catalog::{CatalogStmt, ClientType, EndpointType};
use nervix_nspl::{NameKind, ObjectKind, Statement};

use crate::catalog::Catalog;

pub struct CatalogNames<'a> {
    pub catalog: &'a Catalog,
    pub domain: Option<&'a str>,
}

impl nervix_nspl::Catalog for CatalogNames<'_> {
    fn names(&self, kind: NameKind) -> Vec<String> {
        let domain = self.domain.and_then(|d| self.catalog.domains.get(d));
        let in_domain = |kind: ObjectKind| -> Vec<String> {
            domain
                .map(|d| {
                    d.entities
                        .values()
                        .filter(|e| e.key.kind == kind)
                        .map(|e| e.key.name.clone())
                        .collect()
                })
                .unwrap_or_default()
        };
        match kind {
            NameKind::Existing(ObjectKind::Domain) => {
                self.catalog.domains.keys().cloned().collect()
            }
            NameKind::Existing(ObjectKind::User) => self.catalog.users.keys().cloned().collect(),
            NameKind::Existing(ObjectKind::Resource) => {
                self.catalog.resources.keys().cloned().collect()
            }
            NameKind::Existing(ObjectKind::Vhost) => self
                .catalog
                .global
                .keys()
                .filter(|k| k.kind == ObjectKind::Vhost)
                .map(|k| k.name.clone())
                .collect(),
            NameKind::Existing(kind) => in_domain(kind),
            NameKind::ClientOf(connector) => domain
                .map(|d| {
                    d.entities
                        .values()
                        .filter_map(|e| match &e.definition {
                            Statement::Catalog(CatalogStmt::CreateClient(c))
                                if client_type_keyword(c.client_type) == connector =>
                            {
                                Some(e.key.name.clone())
                            }
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            NameKind::EndpointOf(endpoint_type) => domain
                .map(|d| {
                    d.entities
                        .values()
                        .filter_map(|e| match &e.definition {
                            Statement::Catalog(CatalogStmt::CreateEndpoint(ep))
                                if endpoint_type_keyword(ep.endpoint_type) == endpoint_type =>
                            {
                                Some(e.key.name.clone())
                            }
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            NameKind::New | NameKind::Field => Vec::new(),
        }
    }
}

fn client_type_keyword(t: ClientType) -> &'static str {
    t.keyword()
}

fn endpoint_type_keyword(t: EndpointType) -> &'static str {
    match t {
        EndpointType::Http => "HTTP",
        EndpointType::Websockets => "WEBSOCKETS",
    }
}
