//! Node work on whole batches: the working-message model of a route ([`route`]) and the error
//! records of `ON MESSAGE ERROR SEND TO` ([`error_record`]).

pub mod error_record;
pub mod route;
