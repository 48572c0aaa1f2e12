//! The control state machine: the catalog as Raft replicates it.
//!
//! A command is a batch of [`Change`]s planned and validated on the leader; applying it is
//! mechanical (no validation, no clock), so every replica reaches the same catalog. Each change
//! is written to the replicated `state` database in the same transaction that records the
//! applied log index, under a key that names the entity, so a restart rebuilds the catalog from
//! disk without replaying the log.
//!
//! Keys: `d\0<domain>` domain header; `e\0<domain>\0<kind>\0<name>` domain entity;
//! `g\0<kind>\0<name>` cluster-wide entity; `u\0<name>` user; `r\0<name>` resource. Values are
//! rkyv archives, validated when read back.

use nervix_raft::{StateMachine, StateReadTxn, StateTxn};
use rkyv::rancor;

use crate::catalog::{Catalog, Change, DomainHeader, Entity, EntityKey, Resource, User};

/// A command: the changes one statement or one transaction makes, applied atomically.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ControlCommand {
    pub changes: Vec<Change>,
}

impl ControlCommand {
    pub fn encode(&self) -> Vec<u8> {
        rkyv::to_bytes::<rancor::Error>(self)
            .expect("serialising plain data cannot fail")
            .into_vec()
    }

    pub fn decode(bytes: &[u8]) -> Result<ControlCommand, String> {
        decode(bytes)
    }
}

/// Deserialises an archive after validating it (copied to aligned memory first).
fn decode<T>(bytes: &[u8]) -> Result<T, String>
where
    T: rkyv::Archive,
    T::Archived: for<'a> rkyv::bytecheck::CheckBytes<rkyv::api::high::HighValidator<'a, rancor::Error>>
        + rkyv::Deserialize<T, rkyv::api::high::HighDeserializer<rancor::Error>>,
{
    let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len());
    aligned.extend_from_slice(bytes);
    rkyv::from_bytes::<T, rancor::Error>(&aligned).map_err(|e| e.to_string())
}

fn encode<T>(value: &T) -> Vec<u8>
where
    T: for<'a> rkyv::Serialize<
        rkyv::api::high::HighSerializer<
            rkyv::util::AlignedVec,
            rkyv::ser::allocator::ArenaHandle<'a>,
            rancor::Error,
        >,
    >,
{
    rkyv::to_bytes::<rancor::Error>(value)
        .expect("serialising plain data cannot fail")
        .into_vec()
}

const SEPARATOR: u8 = 0;

fn key(parts: &[&[u8]]) -> Vec<u8> {
    let mut key = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            key.push(SEPARATOR);
        }
        key.extend_from_slice(part);
    }
    key
}

fn kind_tag(entity: &EntityKey) -> Vec<u8> {
    // The kind's keywords are stable text; rkyv's enum layout is not a key format.
    entity.kind.keywords().join("_").into_bytes()
}

fn domain_key(domain: &str) -> Vec<u8> {
    key(&[b"d", domain.as_bytes()])
}

fn domain_entities_prefix(domain: &str) -> Vec<u8> {
    let mut prefix = key(&[b"e", domain.as_bytes()]);
    prefix.push(SEPARATOR);
    prefix
}

fn entity_key(domain: &str, entity: &EntityKey) -> Vec<u8> {
    key(&[
        b"e",
        domain.as_bytes(),
        &kind_tag(entity),
        entity.name.as_bytes(),
    ])
}

fn global_key(entity: &EntityKey) -> Vec<u8> {
    key(&[b"g", &kind_tag(entity), entity.name.as_bytes()])
}

/// The replicated catalog and its persistence.
#[derive(Debug, Default)]
pub struct ControlStateMachine {
    pub catalog: Catalog,
}

/// What `apply` answers: empty on success, else the reason the command could not be stored.
pub const APPLIED: &[u8] = b"";

impl ControlStateMachine {
    fn persist(txn: &mut StateTxn<'_>, change: &Change) -> Result<(), String> {
        let result = match change {
            Change::PutDomain(header) => txn.put(&domain_key(&header.name), &encode(header)),
            Change::DropDomain(name) => txn
                .delete_prefix(&domain_entities_prefix(name))
                .and_then(|_| txn.delete(&domain_key(name)).map(|_| ())),
            Change::PutEntity { domain, entity } => {
                txn.put(&entity_key(domain, &entity.key), &encode(entity))
            }
            Change::DeleteEntity { domain, key } => {
                txn.delete(&entity_key(domain, key)).map(|_| ())
            }
            Change::PutGlobal(entity) => txn.put(&global_key(&entity.key), &encode(entity)),
            Change::DeleteGlobal(key) => txn.delete(&global_key(key)).map(|_| ()),
            Change::PutUser(user) => txn.put(&key(&[b"u", user.name.as_bytes()]), &encode(user)),
            Change::DropUser(name) => txn.delete(&key(&[b"u", name.as_bytes()])).map(|_| ()),
            Change::PutResource(resource) => {
                txn.put(&key(&[b"r", resource.name.as_bytes()]), &encode(resource))
            }
            Change::DropResource(name) => txn.delete(&key(&[b"r", name.as_bytes()])).map(|_| ()),
        };
        result.map_err(|e| e.to_string())
    }
}

impl StateMachine for ControlStateMachine {
    fn apply(&mut self, txn: &mut StateTxn<'_>, command: &[u8]) -> Vec<u8> {
        let command = match ControlCommand::decode(command) {
            Ok(command) => command,
            Err(reason) => return format!("undecodable control command: {reason}").into_bytes(),
        };
        for change in &command.changes {
            if let Err(reason) = Self::persist(txn, change) {
                return format!("cannot store a catalog change: {reason}").into_bytes();
            }
            self.catalog.apply_change(change);
        }
        APPLIED.to_vec()
    }

    fn load(&mut self, txn: &StateReadTxn<'_>) -> Result<(), String> {
        let mut catalog = Catalog::default();
        let read = |prefix: &[u8]| -> Result<Vec<Vec<u8>>, String> {
            txn.prefix(prefix)
                .map_err(|e| e.to_string())?
                .map(|item| item.map(|(_, v)| v.to_vec()).map_err(|e| e.to_string()))
                .collect()
        };
        for value in read(b"d\0")? {
            catalog.apply_change(&Change::PutDomain(decode::<DomainHeader>(&value)?));
        }
        for domain in catalog.domains.keys().cloned().collect::<Vec<_>>() {
            for value in read(&domain_entities_prefix(&domain))? {
                let entity = decode::<Entity>(&value)?;
                catalog.apply_change(&Change::PutEntity {
                    domain: domain.clone(),
                    entity,
                });
            }
        }
        for value in read(b"g\0")? {
            catalog.apply_change(&Change::PutGlobal(decode::<Entity>(&value)?));
        }
        for value in read(b"u\0")? {
            catalog.apply_change(&Change::PutUser(decode::<User>(&value)?));
        }
        for value in read(b"r\0")? {
            catalog.apply_change(&Change::PutResource(decode::<Resource>(&value)?));
        }
        self.catalog = catalog;
        Ok(())
    }
}
