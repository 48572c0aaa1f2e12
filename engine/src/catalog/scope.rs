//! Look-ups validation makes while checking one entity: other entities of its domain and the
//! cluster-wide ones, each returned typed, or refused with a message naming what is missing.

use nervix_nspl::ast::catalog::{
    CatalogStmt, CreateBranch, CreateClient, CreateCodec, CreateEndpoint, CreateRelay,
    CreateSchema, CreateVhost, CreateWireSchema,
};
use nervix_nspl::ast::ingestor::{CreateSignalingProtocol, IngestorStmt};
use nervix_nspl::ast::Ident;
use nervix_nspl::{ObjectKind, Statement};

use super::{kind_name, Catalog, CatalogError, Domain, Entity, EntityKey, Resource};

/// The domain an entity lives in, with the catalog around it. A candidate change of one entity
/// is an overlay over the committed domain, so validating it never copies the domain.
#[derive(Clone, Copy)]
pub struct DomainScope<'a> {
    pub catalog: &'a Catalog,
    pub domain: &'a Domain,
    /// The entity as the candidate has it (created or altered), shadowing the domain's.
    pub overlay: Option<&'a Entity>,
}

impl<'a> DomainScope<'a> {
    pub fn new(catalog: &'a Catalog, domain: &'a Domain) -> DomainScope<'a> {
        DomainScope {
            catalog,
            domain,
            overlay: None,
        }
    }

    /// The domain with `entity` created or replaced.
    pub fn with_overlay(
        catalog: &'a Catalog,
        domain: &'a Domain,
        entity: &'a Entity,
    ) -> DomainScope<'a> {
        DomainScope {
            catalog,
            domain,
            overlay: Some(entity),
        }
    }

    pub fn get(&self, kind: ObjectKind, name: &str) -> Option<&'a Entity> {
        if let Some(overlay) = self.overlay {
            if overlay.key.kind == kind && overlay.key.name == name {
                return Some(overlay);
            }
        }
        self.domain.entities.get(&EntityKey::new(kind, name))
    }

    /// The entity `name` of `kind`, or `relay 'orders' does not exist in domain 'sales'`.
    pub fn require(&self, kind: ObjectKind, name: &Ident) -> Result<&'a Entity, CatalogError> {
        self.get(kind, &name.name).ok_or_else(|| {
            CatalogError::new(
                name.span,
                format!(
                    "{} '{}' does not exist in domain '{}'",
                    kind_name(kind),
                    name.name,
                    self.domain.name()
                ),
            )
        })
    }

    pub fn schema(&self, name: &Ident) -> Result<&'a CreateSchema, CatalogError> {
        match &self.require(ObjectKind::Schema, name)?.definition {
            Statement::Catalog(CatalogStmt::CreateSchema(s)) => Ok(s),
            _ => unreachable!("a schema entity holds a CREATE SCHEMA"),
        }
    }

    pub fn wire_schema(&self, name: &Ident) -> Result<&'a CreateWireSchema, CatalogError> {
        match &self.require(ObjectKind::WireSchema, name)?.definition {
            Statement::Catalog(CatalogStmt::CreateWireSchema(s)) => Ok(s),
            _ => unreachable!("a wire schema entity holds a CREATE WIRE SCHEMA"),
        }
    }

    pub fn codec(&self, name: &Ident) -> Result<&'a CreateCodec, CatalogError> {
        match &self.require(ObjectKind::Codec, name)?.definition {
            Statement::Catalog(CatalogStmt::CreateCodec(s)) => Ok(s),
            _ => unreachable!("a codec entity holds a CREATE CODEC"),
        }
    }

    pub fn branch(&self, name: &Ident) -> Result<&'a CreateBranch, CatalogError> {
        match &self.require(ObjectKind::Branch, name)?.definition {
            Statement::Catalog(CatalogStmt::CreateBranch(s)) => Ok(s),
            _ => unreachable!("a branch entity holds a CREATE BRANCH"),
        }
    }

    pub fn relay(&self, name: &Ident) -> Result<&'a CreateRelay, CatalogError> {
        match &self.require(ObjectKind::Relay, name)?.definition {
            Statement::Catalog(CatalogStmt::CreateRelay(s)) => Ok(s),
            _ => unreachable!("a relay entity holds a CREATE RELAY"),
        }
    }

    pub fn client(&self, name: &Ident) -> Result<&'a CreateClient, CatalogError> {
        match &self.require(ObjectKind::Client, name)?.definition {
            Statement::Catalog(CatalogStmt::CreateClient(s)) => Ok(s),
            _ => unreachable!("a client entity holds a CREATE CLIENT"),
        }
    }

    pub fn endpoint(&self, name: &Ident) -> Result<&'a CreateEndpoint, CatalogError> {
        match &self.require(ObjectKind::Endpoint, name)?.definition {
            Statement::Catalog(CatalogStmt::CreateEndpoint(s)) => Ok(s),
            _ => unreachable!("an endpoint entity holds a CREATE ENDPOINT"),
        }
    }

    pub fn signaling_protocol(
        &self,
        name: &Ident,
    ) -> Result<&'a CreateSignalingProtocol, CatalogError> {
        match &self
            .require(ObjectKind::SignalingProtocol, name)?
            .definition
        {
            Statement::Ingestor(IngestorStmt::CreateSignalingProtocol(s)) => Ok(s),
            _ => unreachable!("a signaling protocol entity holds a CREATE SIGNALING PROTOCOL"),
        }
    }

    /// A cluster-wide virtual host.
    pub fn vhost(&self, name: &Ident) -> Result<&'a CreateVhost, CatalogError> {
        let entity = self
            .catalog
            .global
            .get(&EntityKey::new(ObjectKind::Vhost, name.name.as_str()))
            .ok_or_else(|| {
                CatalogError::new(name.span, format!("vhost '{}' does not exist", name.name))
            })?;
        match &entity.definition {
            Statement::Catalog(CatalogStmt::CreateVhost(s)) => Ok(s),
            _ => unreachable!("a vhost entity holds a CREATE VHOST"),
        }
    }

    /// A cluster-wide resource bundle.
    pub fn resource(&self, name: &Ident) -> Result<&'a Resource, CatalogError> {
        self.catalog.resources.get(&name.name).ok_or_else(|| {
            CatalogError::new(
                name.span,
                format!("resource '{}' does not exist", name.name),
            )
        })
    }
}
