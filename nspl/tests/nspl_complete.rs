//! Completion through the public `complete` API, with a catalog like the engine's.

use nervix_nspl::{complete, Catalog, NameKind, ObjectKind};

struct TestCatalog;

impl Catalog for TestCatalog {
    fn names(&self, kind: NameKind) -> Vec<String> {
        let names: &[&str] = match kind {
            NameKind::ClientOf("KAFKA") => &["kafka_main", "kafka_tls"],
            NameKind::ClientOf("REDIS") => &["cache"],
            NameKind::EndpointOf("HTTP") => &["ingress"],
            NameKind::EndpointOf("WEBSOCKETS") => &["stream"],
            NameKind::Existing(ObjectKind::Relay) => &["orders", "notifications"],
            NameKind::Existing(ObjectKind::Domain) => &["sales", "replay"],
            NameKind::Existing(ObjectKind::Schema) => &["order_in"],
            _ => &[],
        };
        names.iter().map(|s| s.to_string()).collect()
    }
}

fn candidates(text: &str) -> Vec<String> {
    complete(text, text.len(), &TestCatalog)
        .into_iter()
        .map(|c| c.text)
        .collect()
}

#[test]
fn statement_start_offers_verbs() {
    let c = candidates("");
    for verb in [
        "CREATE", "ALTER", "DROP", "SHOW", "DESCRIBE", "USE", "START", "STOP", "BEGIN",
    ] {
        assert!(c.contains(&verb.to_string()), "{verb} missing from {c:?}");
    }
    assert_eq!(candidates("SH"), vec!["SHOW"]);
    assert_eq!(candidates("use sales; de"), vec!["DESCRIBE"]);
}

#[test]
fn heads_are_offered_as_one_item() {
    let c = candidates("CREATE ");
    assert!(c.contains(&"KAFKA TOPIC INGESTOR".to_string()), "{c:?}");
    assert!(c.contains(&"CLIENT PRODUCER INGESTOR".to_string()), "{c:?}");
    assert!(c.contains(&"KAFKA TOPIC EMITTER".to_string()), "{c:?}");
    assert!(!c.contains(&"KAFKA".to_string()), "{c:?}");
    assert_eq!(
        candidates("CREATE KAF"),
        vec!["KAFKA TOPIC EMITTER", "KAFKA TOPIC INGESTOR"]
    );
    assert_eq!(
        candidates("CREATE KAFKA TOPIC IN"),
        vec!["KAFKA TOPIC INGESTOR"]
    );
    let c = complete("CREATE KAFKA TOPIC IN", 21, &TestCatalog);
    assert_eq!(c[0].replace_from, 7, "the whole phrase is replaced");
}

#[test]
fn ingestor_from_offers_only_matching_clients_and_endpoints() {
    assert_eq!(
        candidates("CREATE KAFKA TOPIC INGESTOR k FROM "),
        vec!["kafka_main", "kafka_tls"]
    );
    assert_eq!(
        candidates("CREATE KAFKA TOPIC INGESTOR k FROM kafka_t"),
        vec!["kafka_tls"]
    );
    assert_eq!(
        candidates("CREATE HTTP ENDPOINT INGESTOR h FROM "),
        vec!["ingress"]
    );
    assert_eq!(
        candidates("CREATE WEBSOCKETS ENDPOINT INGESTOR w FROM "),
        vec!["stream"]
    );
    assert_eq!(
        candidates("CREATE REDIS PUBSUB INGESTOR r FROM "),
        vec!["cache"]
    );
}

#[test]
fn keywords_valid_at_the_cursor() {
    let mut offsets =
        candidates("CREATE KAFKA TOPIC INGESTOR k FROM kafka_main TOPIC 'orders' OFFSET BY ");
    offsets.sort();
    assert_eq!(offsets, vec!["CONSUMER", "DOMAIN"]);
    assert_eq!(candidates("USE "), vec!["sales", "replay"]);
    assert_eq!(candidates("DROP RELAY IF EXISTS o"), vec!["orders"]);
}

#[test]
fn nothing_is_offered_after_an_error_or_inside_a_string() {
    assert!(candidates("CREATE FOO ").is_empty());
    assert!(candidates("USE 'unterminated ").is_empty());
}
