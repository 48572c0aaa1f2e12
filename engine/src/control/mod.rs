//! The control plane: the replicated catalog (Raft over LMDB), statement execution for console
//! sessions, and the read-only views (SHOW, DESCRIBE). It runs on the control core and never
//! touches row data.

pub mod backend;
pub mod bundle;
pub mod complete;
pub mod execute;
pub mod mounts;
pub mod runtime_view;
pub mod session;
pub mod show;
pub mod state_machine;

pub use execute::ControlNode;
pub use session::ControlSession;
pub use state_machine::{ControlCommand, ControlStateMachine};
