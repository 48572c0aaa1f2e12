//! Catalog statements of DESIGN §7: domains, schemas, wire schemas, codecs, branches, relays,
//! clients, vhosts, endpoints, resources, users, subscriptions and cluster commands.

#[derive(Debug, Clone, PartialEq)]
pub enum CatalogStmt {}
