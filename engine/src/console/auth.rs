//! Console credentials and roles: Argon2id password hashes, their verification, and which
//! statements each role may run.
//!
//! Hashing follows `spec/capacity-planning.md`: the credentials budget is 19 MiB, exactly what
//! one Argon2id computation with m = 19,456 KiB works in, so the process computes one hash at a
//! time. [`hash_password`] and [`verify_password`] pass a process-wide gate (a one-permit
//! semaphore whose permit travels into the blocking job, so a caller that gives up cannot let a
//! second hash start early); a burst of logins waits there, at most
//! [`MAX_CREDENTIAL_JOBS_WAITING`] of them, and touches no other class. A stored hash whose
//! parameters need more memory than the budget, or more passes than [`MAX_ARGON2_T_COST`],
//! never verifies. An unknown user is verified against a fixed dummy hash with the current
//! parameters, so the time an answer takes does not tell which users exist.
//!
//! Passwords and hashes never appear in an error, a log line or a `Debug` output here.

use std::sync::atomic::{AtomicUsize, Ordering};

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use nervix_nspl::ast::catalog::CatalogStmt;
use nervix_nspl::ast::session::SessionStmt;
use nervix_nspl::{ObjectKind, Statement};
use tokio::sync::Semaphore;

use super::backend::Role;

/// The credentials budget of `spec/capacity-planning.md`, in KiB: one Argon2id computation.
pub const CREDENTIALS_BUDGET_KIB: u32 = 19 * 1024;

/// Argon2id memory cost of new hashes, in KiB: the whole credentials budget.
pub const ARGON2_MEMORY_KIB: u32 = CREDENTIALS_BUDGET_KIB;

/// Argon2id passes over memory for new hashes.
pub const ARGON2_T_COST: u32 = 2;

/// Argon2id lanes for new hashes.
pub const ARGON2_P_COST: u32 = 1;

/// The most passes a stored hash may ask for and still verify: bounds the time one login holds
/// the gate.
pub const MAX_ARGON2_T_COST: u32 = 8;

/// Hashing or verification jobs that may wait for the gate; one more is refused (the spec's
/// per-class queue bound).
pub const MAX_CREDENTIAL_JOBS_WAITING: usize = 1024;

/// A hash of a random, discarded password with the current parameters: verifying an unknown
/// user against it costs what verifying a real user costs. Not a secret.
const DUMMY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$nv8glcyUz+yZJE49CmzHMQ$6w33pnyedKyf5KlCaThOfXAfCI4iuPQIWUj13XckToQ";

/// The one-at-a-time gate of the credentials class.
static GATE: Semaphore = Semaphore::const_new(1);

/// Jobs currently waiting for [`GATE`].
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// Why a password could not be checked or hashed. Messages never carry the password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Unknown user or wrong password: deliberately one answer for both.
    #[error("authentication failed")]
    InvalidCredentials,
    /// The credentials class is full: [`MAX_CREDENTIAL_JOBS_WAITING`] jobs already wait.
    #[error("too many credential checks waiting ({MAX_CREDENTIAL_JOBS_WAITING}): try again later")]
    Busy,
    /// Hashing failed or the node cannot check credentials now.
    #[error("{0}")]
    Unavailable(String),
}

/// Hashes `password` into a PHC string (`$argon2id$v=19$m=19456,t=2,p=1$…`) with a random
/// salt, through the credentials gate.
pub async fn hash_password(password: &str) -> Result<String, AuthError> {
    let password = password.to_owned();
    gated(move || hash_blocking(&password)).await?
}

/// Whether `password` matches `stored`, a PHC string; `None` (an unknown user) checks against
/// a dummy hash and answers `false`, in the same time. Runs through the credentials gate.
pub async fn verify_password(password: &str, stored: Option<&str>) -> Result<bool, AuthError> {
    let password = password.to_owned();
    let stored = stored.map(str::to_owned);
    gated(move || verify_blocking(&password, stored.as_deref())).await
}

/// Runs `job` on the blocking pool while holding the gate's only permit.
async fn gated<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<T, AuthError> {
    let permit = {
        let waiting = Waiting::enter()?;
        let permit = GATE
            .acquire()
            .await
            .map_err(|_| AuthError::Unavailable("the credentials gate is closed".into()))?;
        drop(waiting);
        permit
    };
    tokio::task::spawn_blocking(move || {
        let result = job();
        drop(permit);
        result
    })
    .await
    .map_err(|_| AuthError::Unavailable("the credentials job did not finish".into()))
}

/// One place in the gate's wait queue, given back when dropped (also on cancellation).
struct Waiting;

impl Waiting {
    fn enter() -> Result<Waiting, AuthError> {
        if WAITING.fetch_add(1, Ordering::AcqRel) >= MAX_CREDENTIAL_JOBS_WAITING {
            WAITING.fetch_sub(1, Ordering::AcqRel);
            return Err(AuthError::Busy);
        }
        Ok(Waiting)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        WAITING.fetch_sub(1, Ordering::AcqRel);
    }
}

fn hasher() -> Result<Argon2<'static>, AuthError> {
    let params = Params::new(ARGON2_MEMORY_KIB, ARGON2_T_COST, ARGON2_P_COST, None)
        .map_err(|error| AuthError::Unavailable(format!("Argon2id parameters: {error}")))?;
    Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
}

fn hash_blocking(password: &str) -> Result<String, AuthError> {
    let salt = SaltString::generate(&mut OsRng);
    hasher()?
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|error| AuthError::Unavailable(format!("cannot hash the password: {error}")))
}

/// Verifies against `stored` when it is an acceptable Argon2id hash, and otherwise against the
/// dummy hash (answering `false`), so every path costs one verification.
fn verify_blocking(password: &str, stored: Option<&str>) -> bool {
    let acceptable = stored
        .and_then(|stored| PasswordHash::new(stored).ok())
        .filter(acceptable_hash);
    let (hash, real) = match acceptable {
        Some(hash) => (hash, true),
        None => match PasswordHash::new(DUMMY_HASH) {
            Ok(hash) => (hash, false),
            Err(_) => return false,
        },
    };
    let Ok(argon2) = hasher() else {
        return false;
    };
    let matches = argon2.verify_password(password.as_bytes(), &hash).is_ok();
    real && matches
}

/// Argon2id within the credentials budget and the pass bound.
fn acceptable_hash(hash: &PasswordHash<'_>) -> bool {
    if hash.algorithm != argon2::ARGON2ID_IDENT {
        return false;
    }
    Params::try_from(hash).is_ok_and(|params| {
        params.m_cost() <= CREDENTIALS_BUDGET_KIB && params.t_cost() <= MAX_ARGON2_T_COST
    })
}

/// Whether a session of `role` may run `statement`; the refusal names the role and what it may
/// do. READER runs SHOW, DESCRIBE and USE (USE only selects the session's domain, which
/// reading needs); OPERATOR runs everything but user management; ADMIN runs everything.
pub fn authorize(role: Role, statement: &Statement) -> Result<(), String> {
    match role {
        Role::Admin => Ok(()),
        Role::Operator if manages_users(statement) => Err(
            "role OPERATOR may run everything except user management: CREATE USER, ALTER USER \
             and DROP USER need role ADMIN"
                .into(),
        ),
        Role::Operator => Ok(()),
        Role::Reader if only_reads(statement) => Ok(()),
        Role::Reader => Err("role READER may only run SHOW, DESCRIBE and USE".into()),
    }
}

fn manages_users(statement: &Statement) -> bool {
    matches!(
        statement,
        Statement::Catalog(CatalogStmt::CreateUser(_) | CatalogStmt::AlterUser(_))
            | Statement::Session(SessionStmt::Drop {
                kind: ObjectKind::User,
                ..
            })
    )
}

fn only_reads(statement: &Statement) -> bool {
    match statement {
        Statement::Session(session) => match session {
            SessionStmt::Use(_)
            | SessionStmt::ShowAll(_)
            | SessionStmt::ShowRoles
            | SessionStmt::ShowCreate { .. }
            | SessionStmt::Describe { .. } => true,
            SessionStmt::Start(_)
            | SessionStmt::Stop
            | SessionStmt::Begin
            | SessionStmt::Commit
            | SessionStmt::Revert
            | SessionStmt::Drop { .. } => false,
        },
        Statement::Catalog(CatalogStmt::ShowClusterStatus) => true,
        Statement::Catalog(_)
        | Statement::Ingestor(_)
        | Statement::Processor(_)
        | Statement::Emitter(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement(text: &str) -> Statement {
        nervix_nspl::parse_statement(text).expect("test statements parse")
    }

    #[test]
    fn dummy_hash_has_the_current_parameters() {
        let hash = PasswordHash::new(DUMMY_HASH).expect("the dummy hash parses");
        assert!(acceptable_hash(&hash));
        let params = Params::try_from(&hash).expect("parameters");
        assert_eq!(
            (params.m_cost(), params.t_cost(), params.p_cost()),
            (ARGON2_MEMORY_KIB, ARGON2_T_COST, ARGON2_P_COST)
        );
    }

    #[tokio::test]
    async fn hashes_verify_and_wrong_passwords_do_not() {
        let hash = hash_password("s3cret pass").await.expect("hash");
        assert!(
            hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{hash}"
        );
        assert_eq!(verify_password("s3cret pass", Some(&hash)).await, Ok(true));
        assert_eq!(verify_password("s3cret", Some(&hash)).await, Ok(false));
        assert_eq!(verify_password("s3cret pass", None).await, Ok(false));
        assert_eq!(verify_password("x", Some("not a hash")).await, Ok(false));
    }

    #[test]
    fn hashes_beyond_the_budget_never_verify() {
        // m = 19,457 KiB: one KiB over the credentials budget.
        let over = Params::new(CREDENTIALS_BUDGET_KIB + 1, 1, 1, None).expect("params");
        let argon2 = Argon2::new(Algorithm::Argon2id, Version::V0x13, over);
        let salt = SaltString::generate(&mut OsRng);
        let hash = argon2
            .hash_password(b"pw", &salt)
            .expect("hash")
            .to_string();
        assert!(!verify_blocking("pw", Some(&hash)));
        // Argon2i is not accepted either.
        let small = Params::new(64, 1, 1, None).expect("params");
        let argon2i = Argon2::new(Algorithm::Argon2i, Version::V0x13, small);
        let hash = argon2i
            .hash_password(b"pw", &salt)
            .expect("hash")
            .to_string();
        assert!(!verify_blocking("pw", Some(&hash)));
    }

    #[test]
    fn roles_allow_what_they_say() {
        let create = statement("CREATE DOMAIN sales;");
        let show = statement("SHOW DOMAINS;");
        let describe = statement("DESCRIBE DOMAIN sales;");
        let use_domain = statement("USE sales;");
        let user = statement("CREATE USER ops WITH PASSWORD 'x' ROLE READER;");
        let drop_user = statement("DROP USER ops;");
        let drop_domain = statement("DROP DOMAIN sales;");
        for s in [&create, &show, &user, &drop_user] {
            assert_eq!(authorize(Role::Admin, s), Ok(()));
        }
        for s in [&create, &show, &describe, &use_domain, &drop_domain] {
            assert_eq!(authorize(Role::Operator, s), Ok(()));
        }
        for s in [&user, &drop_user] {
            let refusal = authorize(Role::Operator, s).expect_err("operators manage no users");
            assert!(refusal.starts_with("role OPERATOR may"), "{refusal}");
        }
        for s in [&show, &describe, &use_domain] {
            assert_eq!(authorize(Role::Reader, s), Ok(()));
        }
        for s in [&create, &user, &drop_domain] {
            assert_eq!(
                authorize(Role::Reader, s),
                Err("role READER may only run SHOW, DESCRIBE and USE".into())
            );
        }
    }
}
