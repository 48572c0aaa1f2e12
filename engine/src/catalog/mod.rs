//! The catalog: every domain with its entities, and the cluster-wide users, resources and
//! virtual hosts — the control plane's replicated state.
//!
//! An entity's model is its definition — the CREATE statement with every later ALTER folded
//! in, as the parser's tree — so `SHOW CREATE` renders the model and never a stored text. A
//! catalog changes only through [`Change`]s: the planner derives them from a statement against
//! a candidate copy, validation accepts the candidate, and the Raft state machine applies the
//! same changes on every node. `apply_change` is therefore the one place that mutates a
//! catalog, and it cannot fail: every refusal happens before a change exists.

pub mod error;
pub mod plan;
pub mod rebind;
pub mod scope;
pub mod start;

pub use error::CatalogError;
pub use plan::{plan_statement, Planned};
pub use scope::DomainScope;

use std::collections::BTreeMap;

use nervix_nspl::ast::catalog::Role;
use nervix_nspl::ast::session::StartAt;
use nervix_nspl::{ObjectKind, Statement};

/// Identifies an entity within its domain (or among the cluster-wide entities).
#[derive(
    Debug,
    Clone,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
pub struct EntityKey {
    pub kind: ObjectKind,
    pub name: String,
}

impl EntityKey {
    pub fn new(kind: ObjectKind, name: impl Into<String>) -> EntityKey {
        EntityKey {
            kind,
            name: name.into(),
        }
    }
}

impl std::fmt::Display for EntityKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} '{}'", kind_name(self.kind), self.name)
    }
}

/// The lower-case name of a kind for messages: `window processor`, `relay`.
pub fn kind_name(kind: ObjectKind) -> String {
    kind.keywords().join(" ").to_lowercase()
}

/// One named entity and its model.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Entity {
    pub key: EntityKey,
    /// The CREATE statement with every ALTER folded in; `IF NOT EXISTS` is never stored. Its
    /// spans point into its own canonical text (what SHOW CREATE prints).
    pub definition: Statement,
    /// Every expression of the definition, type-resolved by validation, in the order validation
    /// checks them; each tree's span locates it in the canonical text.
    pub typed: Vec<crate::types::TypedExpr>,
}

impl Entity {
    /// An entity not yet validated (no typed expressions).
    pub fn new(key: EntityKey, definition: Statement) -> Entity {
        Entity {
            key,
            definition,
            typed: Vec::new(),
        }
    }
}

/// Whether a domain's graph runs.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum RunState {
    Stopped,
    /// `generation` counts STARTs, so producers can tell one run from the next.
    Started {
        at: StartAt,
        generation: u64,
        /// The leader's wall clock (UTC ns) when the START ran: a paced domain's clock is
        /// anchored there, and a node that starts later resumes it from there
        /// (`runtime::clock::DomainPace::resume`).
        started_wall_ns: i64,
    },
}

/// What a domain is apart from its entities.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct DomainHeader {
    pub name: String,
    /// The CREATE DOMAIN statement.
    pub definition: Statement,
    pub run: RunState,
    /// How many times the domain was started (survives STOP).
    pub generation: u64,
}

/// A domain: a namespace with its own clock and graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Domain {
    pub header: DomainHeader,
    pub entities: BTreeMap<EntityKey, Entity>,
}

impl Domain {
    pub fn name(&self) -> &str {
        &self.header.name
    }
}

/// A console user; the password is kept only as an Argon2id PHC hash.
#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct User {
    pub name: String,
    pub role: Role,
    pub password_hash: String,
}

/// One uploaded version of a resource bundle.
#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ResourceVersion {
    pub number: u64,
    /// Relative file paths with their sizes in bytes, sorted by path.
    pub files: Vec<(String, u64)>,
}

/// A resource bundle and its completed versions, oldest first.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Resource {
    pub name: String,
    pub definition: Statement,
    pub versions: Vec<ResourceVersion>,
}

impl Resource {
    pub fn latest(&self) -> Option<u64> {
        self.versions.last().map(|v| v.number)
    }

    pub fn has_version(&self, number: u64) -> bool {
        self.versions.iter().any(|v| v.number == number)
    }
}

/// The whole replicated control state.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Catalog {
    pub domains: BTreeMap<String, Domain>,
    pub users: BTreeMap<String, User>,
    pub resources: BTreeMap<String, Resource>,
    /// Cluster-wide entities other than users and resources (virtual hosts).
    pub global: BTreeMap<EntityKey, Entity>,
}

/// One replicated mutation of the catalog.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum Change {
    /// Creates a domain, or updates the header of an existing one (its entities stay).
    PutDomain(DomainHeader),
    DropDomain(String),
    PutEntity {
        domain: String,
        entity: Entity,
    },
    DeleteEntity {
        domain: String,
        key: EntityKey,
    },
    PutGlobal(Entity),
    DeleteGlobal(EntityKey),
    PutUser(User),
    DropUser(String),
    PutResource(Resource),
    DropResource(String),
}

impl Catalog {
    /// Applies one change. Changes are produced only by the planner against this same state,
    /// so a change naming a missing domain is a broken invariant.
    pub fn apply_change(&mut self, change: &Change) {
        match change {
            Change::PutDomain(header) => match self.domains.get_mut(&header.name) {
                Some(domain) => domain.header = header.clone(),
                None => {
                    let domain = Domain {
                        header: header.clone(),
                        entities: BTreeMap::new(),
                    };
                    self.domains.insert(header.name.clone(), domain);
                }
            },
            Change::DropDomain(name) => {
                self.domains.remove(name);
            }
            Change::PutEntity { domain, entity } => {
                let domain = self
                    .domains
                    .get_mut(domain)
                    .expect("a change names an existing domain");
                domain.entities.insert(entity.key.clone(), entity.clone());
            }
            Change::DeleteEntity { domain, key } => {
                if let Some(domain) = self.domains.get_mut(domain) {
                    domain.entities.remove(key);
                }
            }
            Change::PutGlobal(entity) => {
                self.global.insert(entity.key.clone(), entity.clone());
            }
            Change::DeleteGlobal(key) => {
                self.global.remove(key);
            }
            Change::PutUser(user) => {
                self.users.insert(user.name.clone(), user.clone());
            }
            Change::DropUser(name) => {
                self.users.remove(name);
            }
            Change::PutResource(resource) => {
                self.resources
                    .insert(resource.name.clone(), resource.clone());
            }
            Change::DropResource(name) => {
                self.resources.remove(name);
            }
        }
    }
}
