//! Replicated log and state-machine plumbing for the Nervix control plane.
//!
//! This crate owns consensus: openraft over heed (LMDB) storage, snapshots and log purge,
//! generic over the state machine it replicates (the engine supplies the catalog's). It depends
//! on no other Nervix crate.
//!
//! Nothing of that exists yet: the crate holds its place in the workspace so the dependency
//! graph of DESIGN §2 is fixed from the start, and its implementation arrives with the
//! control-plane issues.
