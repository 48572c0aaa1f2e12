//! The node resolver: how every outbound connector of the node turns a host name into
//! addresses (the WebSocket connect in [`crate::websocket`] and the reqwest client of
//! [`crate::http`]). One [`NodeResolver`] per process, built lazily by [`node_resolver`] and
//! shared as an `Arc`, so the answer cache is shared too and no constructor elsewhere gains a
//! resolver argument.
//!
//! Configuration: the system's, read once (`/etc/resolv.conf` — nameservers, search list,
//! `ndots`, `timeout`, `attempts` — and `/etc/hosts`, both through hickory's `system-config`).
//! When the system configuration cannot be read the resolver falls back to hickory's public
//! default nameservers, still honouring `/etc/hosts`, and says so once in the log.
//!
//! Bounds: each query to one nameserver waits at most [`DNS_QUERY_TIMEOUT_MAX_MS`] and is
//! retried at most [`DNS_ATTEMPTS_MAX`] times (the system's values when smaller), and a whole
//! lookup — whatever the search list and the number of nameservers multiply that into — ends
//! within [`RESOLVE_BUDGET_MS`]. So a host with no reachable nameserver fails as a transient
//! "could not resolve host" within 10 s, leaving at least 20 s of a connector's 30 s connect
//! budget (DNS, TCP, TLS and upgrade share it) for the rest.
//!
//! Why it is correct without DNS: an IP literal (`127.0.0.1`, `::1`, `[::1]`) is answered
//! here without touching hickory; `localhost` is answered by hickory from `/etc/hosts` and,
//! failing that, by its RFC 6761 special-use rule (loopback); names under `.invalid` are
//! refused locally by the same rule. None of these send a packet.
//!
//! Why one runtime of its own: hickory keeps nameserver connections whose background tasks
//! are spawned on the runtime of the lookup that opened them. A process-wide resolver used
//! from several tokio runtimes (several nodes or tests in one process, each with its own
//! connector runtime) would keep connections whose tasks died with their runtime. Lookups
//! therefore run on one small runtime owned by the resolver ([`RESOLVER_THREADS`] thread);
//! callers on any runtime await the result, and a caller that gives up (its connect budget
//! ran out) aborts its lookup.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use hickory_resolver::config::{ResolverConfig, ResolverOpts, GOOGLE};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::TokioResolver;

use crate::ConnectorError;

/// The longest one query to one nameserver waits for its answer.
pub const DNS_QUERY_TIMEOUT_MAX_MS: u64 = 2_000;
/// The most retries of a failed query (hickory's `attempts`).
pub const DNS_ATTEMPTS_MAX: usize = 2;
/// The longest a whole lookup takes, answered or not.
pub const RESOLVE_BUDGET_MS: u64 = 10_000;
/// Worker threads of the resolver's runtime: lookups wait on the network, not the CPU.
pub const RESOLVER_THREADS: usize = 1;

// One nameserver's tries fit the lookup budget, and the lookup leaves most of a connect budget.
const _: () =
    assert!(DNS_QUERY_TIMEOUT_MAX_MS * (DNS_ATTEMPTS_MAX as u64 + 1) <= RESOLVE_BUDGET_MS);
const _: () = assert!(RESOLVE_BUDGET_MS * 2 < crate::websocket::CONNECT_BUDGET_MS);

/// A host that could not be resolved, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not resolve host '{host}': {cause}")]
pub struct ResolveError {
    pub host: String,
    pub cause: String,
}

impl From<ResolveError> for ConnectorError {
    /// Resolution failures may pass (a nameserver comes back, a record is added): transient.
    fn from(error: ResolveError) -> ConnectorError {
        ConnectorError::transient(error.to_string())
    }
}

/// The runtime lookups run on; the last handle shuts it down in the background, so it may be
/// dropped from inside another runtime.
struct Owned(Option<tokio::runtime::Runtime>);

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// The node's resolver (see the module docs). Cheap to clone: clones share the cache and the
/// runtime.
#[derive(Clone)]
pub struct NodeResolver {
    resolver: TokioResolver,
    /// `None` only when the resolver's runtime could not be started: lookups then run on the
    /// caller's runtime (logged once when that happens).
    runtime: Option<Arc<Owned>>,
    budget: Duration,
}

static NODE_RESOLVER: OnceLock<Arc<NodeResolver>> = OnceLock::new();

/// The process-wide resolver, built from the system configuration on first use.
pub fn node_resolver() -> Arc<NodeResolver> {
    NODE_RESOLVER
        .get_or_init(|| Arc::new(NodeResolver::from_system()))
        .clone()
}

impl NodeResolver {
    /// A resolver on the system configuration, or on hickory's defaults when that cannot be
    /// read (logged).
    pub fn from_system() -> NodeResolver {
        let (config, options) = match hickory_resolver::system_conf::read_system_conf() {
            Ok(system) => system,
            Err(error) => {
                tracing::warn!(
                    "the system DNS configuration cannot be read ({error}); resolving through \
                     public nameservers, /etc/hosts still honoured"
                );
                (
                    ResolverConfig::udp_and_tcp(&GOOGLE),
                    ResolverOpts::default(),
                )
            }
        };
        NodeResolver::with_config(config, options, Duration::from_millis(RESOLVE_BUDGET_MS))
    }

    /// A resolver on `config`, its per-query bounds clamped (module docs), every lookup
    /// ending within `budget`.
    fn with_config(
        config: ResolverConfig,
        mut options: ResolverOpts,
        budget: Duration,
    ) -> NodeResolver {
        options.timeout = options
            .timeout
            .min(Duration::from_millis(DNS_QUERY_TIMEOUT_MAX_MS));
        options.attempts = options.attempts.min(DNS_ATTEMPTS_MAX);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RESOLVER_THREADS)
            .thread_name("nervix-resolver")
            .enable_all()
            .build();
        let runtime = match runtime {
            Ok(runtime) => Some(Arc::new(Owned(Some(runtime)))),
            Err(error) => {
                tracing::warn!(
                    "the resolver's runtime cannot start ({error}); lookups run on the \
                     connector's runtime"
                );
                None
            }
        };
        let _entered = runtime
            .as_ref()
            .and_then(|owned| owned.0.as_ref())
            .map(|runtime| runtime.enter());
        let mut builder =
            TokioResolver::builder_with_config(config, TokioRuntimeProvider::default());
        *builder.options_mut() = options;
        // Building fails only on a DNS-over-TLS setup, which the features chosen here (no
        // `tls-*`) cannot produce.
        let resolver = builder
            .build()
            .expect("a resolver without DNS-over-TLS builds");
        NodeResolver {
            resolver,
            runtime,
            budget,
        }
    }

    /// The addresses of `host` (a name or an IP literal, bracketed or not), in the resolver's
    /// preference order, within the lookup budget.
    pub async fn lookup(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        let literal = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = literal.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        let failed = |cause: String| ResolveError {
            host: host.to_string(),
            cause,
        };
        let resolver = self.resolver.clone();
        let name = host.to_string();
        let budget = self.budget;
        let work = async move {
            match tokio::time::timeout(budget, resolver.lookup_ip(name)).await {
                Ok(Ok(found)) => Ok(found.iter().collect::<Vec<IpAddr>>()),
                Ok(Err(error)) => Err(error.to_string()),
                Err(_) => Err(format!("no answer within {} ms", budget.as_millis())),
            }
        };
        let outcome = match self.runtime.as_ref().and_then(|owned| owned.0.as_ref()) {
            Some(runtime) => AbortOnDrop(runtime.spawn(work))
                .await
                .unwrap_or_else(|error| Err(format!("the lookup ended early: {error}"))),
            None => work.await,
        };
        let addresses = outcome.map_err(failed)?;
        if addresses.is_empty() {
            return Err(failed("no address".to_string()));
        }
        Ok(addresses)
    }

    /// [`NodeResolver::lookup`] with `port` on every address; a failure is a transient
    /// [`ConnectorError`] naming the host.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, ConnectorError> {
        let addresses = self.lookup(host).await?;
        Ok(addresses
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }
}

/// reqwest resolves through the node resolver (`ClientBuilder::dns_resolver`). reqwest puts
/// the URL's port (or the scheme's) on the port-0 addresses returned here.
impl reqwest::dns::Resolve for NodeResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let resolver = self.clone();
        Box::pin(async move {
            let addresses = resolver.lookup(name.as_str()).await?;
            let addrs: reqwest::dns::Addrs = Box::new(
                addresses
                    .into_iter()
                    .map(|ip| SocketAddr::new(ip, 0))
                    .collect::<Vec<_>>()
                    .into_iter(),
            );
            Ok(addrs)
        })
    }
}

/// A task whose caller may give up: dropping this aborts the task.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_resolver::config::{ConnectionConfig, NameServerConfig};
    use std::time::Instant;

    #[tokio::test]
    async fn ip_literals_resolve_without_dns() {
        let resolver = node_resolver();
        assert_eq!(
            resolver.resolve("127.0.0.1", 80).await.unwrap(),
            vec!["127.0.0.1:80".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(
            resolver.resolve("::1", 443).await.unwrap(),
            vec!["[::1]:443".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(
            resolver.lookup("[::1]").await.unwrap(),
            vec!["::1".parse::<IpAddr>().unwrap()]
        );
    }

    #[tokio::test]
    async fn localhost_resolves_to_loopback() {
        let addresses = node_resolver().resolve("localhost", 9000).await.unwrap();
        assert!(!addresses.is_empty());
        for address in addresses {
            assert!(address.ip().is_loopback(), "{address}");
            assert_eq!(address.port(), 9000);
        }
    }

    #[tokio::test]
    async fn an_invalid_name_fails_quickly_as_a_transient_error_naming_the_host() {
        let started = Instant::now();
        let error = node_resolver()
            .resolve("nervix-test.invalid", 80)
            .await
            .unwrap_err();
        assert!(error.retryable(), "{error}");
        assert!(
            error
                .to_string()
                .contains("could not resolve host 'nervix-test.invalid'"),
            "{error}"
        );
        assert!(started.elapsed() < Duration::from_millis(RESOLVE_BUDGET_MS));
    }

    /// A nameserver that never answers: the lookup ends within the budget, with the error.
    #[tokio::test]
    async fn an_unreachable_nameserver_fails_within_the_budget() {
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut udp = ConnectionConfig::udp();
        udp.port = silent.local_addr().unwrap().port();
        let server = NameServerConfig::new(silent.local_addr().unwrap().ip(), true, vec![udp]);
        let config = ResolverConfig::from_parts(None, vec![], vec![server]);
        let budget = Duration::from_millis(300);
        let resolver = NodeResolver::with_config(config, ResolverOpts::default(), budget);
        let started = Instant::now();
        let error = resolver.resolve("example.com", 80).await.unwrap_err();
        let took = started.elapsed();
        assert!(took < budget + Duration::from_secs(2), "{took:?}");
        assert!(error.retryable(), "{error}");
        assert!(
            error
                .to_string()
                .contains("could not resolve host 'example.com'"),
            "{error}"
        );
        // Shared through reqwest too: the same error, innermost.
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(resolver))
            .no_proxy()
            .build()
            .unwrap();
        let error = client.get("http://example.com/").send().await.unwrap_err();
        let mut innermost = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(inner) = source {
            innermost = inner.to_string();
            source = inner.source();
        }
        assert!(
            innermost.contains("could not resolve host 'example.com'"),
            "{innermost}"
        );
    }
}
