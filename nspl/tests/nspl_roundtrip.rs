//! Statements generated from the AST render to text that parses back to an equal tree, and
//! rendering that text again gives the same text.

mod common;

use common::{expr, tree};
use nervix_nspl::ast::ingestor::{
    CreateIngestor, IngestorStmt, KafkaOffset, SourceBody, TimestampSource,
};
use nervix_nspl::ast::processor::{CreateProcessor, ProcessorDef, ProcessorStmt, RelayFeed};
use nervix_nspl::ast::session::{DescribeFormat, StartAt};
use nervix_nspl::ast::{
    Assignment, Attachment, Branching, ByteSize, Collect, DeliveryMode, Duration, ExprKind, Flush,
    GeneralErrorPolicy, Ident, Inherit, InheritFields, Input, Literal, MessageErrorPolicy,
    ObjectKind, QuiesceMode, RetryPolicy, Route, RouteBranching, SessionStmt, StateDependency,
    StatePolicy, Statement,
};
use proptest::prelude::*;

/// Names that cannot collide with keywords, so every generated tree is unambiguous text.
fn name() -> impl Strategy<Value = Ident> {
    "n_[a-z0-9_]{0,8}".prop_map(Ident::new)
}

fn duration() -> impl Strategy<Value = Duration> {
    (
        1u64..10_000,
        prop::sample::select(vec![1, 1_000, 1_000_000, 1_000_000_000, 60_000_000_000]),
    )
        .prop_map(|(n, unit)| Duration { nanos: n * unit })
}

fn size() -> impl Strategy<Value = ByteSize> {
    (
        1u64..10_000,
        prop::sample::select(vec![1, 1_000, 1 << 10, 1 << 20]),
    )
        .prop_map(|(n, unit)| ByteSize { bytes: n * unit })
}

fn assignments() -> impl Strategy<Value = Vec<Assignment>> {
    prop::collection::vec(
        (name(), tree()).prop_map(|(target, value)| Assignment { target, value }),
        1..4,
    )
}

fn constants() -> impl Strategy<Value = Vec<Assignment>> {
    prop::collection::vec(
        (name(), any::<i32>()).prop_map(|(target, v)| Assignment {
            target,
            value: expr(ExprKind::Literal(Literal::Integer(v.unsigned_abs().into()))),
        }),
        1..3,
    )
}

fn flush() -> impl Strategy<Value = Flush> {
    prop_oneof![
        Just(Flush::Immediate),
        (duration(), size()).prop_map(|(interval, max_batch_size)| Flush::Each {
            interval,
            max_batch_size
        }),
    ]
}

fn message_error() -> impl Strategy<Value = MessageErrorPolicy> {
    prop_oneof![
        Just(MessageErrorPolicy::Ignore),
        Just(MessageErrorPolicy::Log),
        (name(), prop::option::of(assignments())).prop_map(|(relay, set)| {
            MessageErrorPolicy::SendTo {
                relay,
                set: set.unwrap_or_default(),
            }
        }),
    ]
}

fn inherit() -> impl Strategy<Value = Inherit> {
    let fields = prop_oneof![
        prop::collection::vec(name(), 0..3).prop_map(|except| InheritFields::All { except }),
        prop::collection::vec(name(), 1..3).prop_map(InheritFields::Only),
    ];
    (fields, any::<bool>()).prop_map(|(fields, leak_sensitive)| Inherit {
        fields,
        leak_sensitive,
    })
}

/// A route; `branched` says whether the node's routes construct branches (ingestors).
fn route(branched: bool) -> impl Strategy<Value = Route> {
    let branching = prop_oneof![
        Just(RouteBranching::Unbranched),
        (name(), prop::option::of(assignments())).prop_map(|(branch, set)| {
            RouteBranching::BranchedBy {
                branch,
                set: set.unwrap_or_default(),
            }
        }),
    ];
    (
        name(),
        prop::option::of(inherit()),
        prop::option::of(assignments()),
        prop::option::of(tree()),
        branching,
        flush(),
        message_error(),
    )
        .prop_map(
            move |(target, inherit, set, filter, branching, flush, on_error)| Route {
                target,
                inherit,
                set: set.unwrap_or_default(),
                filter,
                branching: branched.then_some(branching),
                flush: Some(flush),
                on_error,
            },
        )
}

fn inputs() -> impl Strategy<Value = Vec<Input>> {
    prop::collection::vec(
        (name(), prop::option::of(tree())).prop_map(|(relay, filter)| Input { relay, filter }),
        1..3,
    )
}

fn collect() -> impl Strategy<Value = Collect> {
    (duration(), prop::option::of(size())).prop_map(|(interval, max_batch_size)| Collect {
        interval,
        max_batch_size,
    })
}

fn state() -> impl Strategy<Value = Vec<StateDependency>> {
    let policy = prop_oneof![
        Just(StatePolicy::RequiredSkip),
        Just(StatePolicy::RequiredWait),
        constants().prop_map(StatePolicy::Default),
    ];
    prop::collection::vec(
        (name(), policy).prop_map(|(relay, policy)| StateDependency { relay, policy }),
        0..3,
    )
    .prop_filter("dependencies are unique", |deps| {
        let mut names: Vec<_> = deps.iter().map(|d| &d.relay.name).collect();
        names.sort();
        names.windows(2).all(|w| w[0] != w[1])
    })
}

fn junction() -> impl Strategy<Value = Statement> {
    (
        any::<bool>(),
        prop::option::of(prop_oneof![
            Just(Attachment::Attached),
            Just(Attachment::Detached)
        ]),
        name(),
        (
            inputs(),
            prop::option::of(collect()),
            prop::option::of(tree()),
        ),
        prop_oneof![
            name().prop_map(Branching::BranchedBy),
            Just(Branching::Unbranched)
        ],
        state(),
        prop::collection::vec(route(false), 1..3),
    )
        .prop_filter(
            "inputs are distinct relays",
            |(.., (inputs, _, _), _, _, _)| inputs.len() < 2 || inputs[0].relay != inputs[1].relay,
        )
        .prop_map(
            |(
                if_not_exists,
                attachment,
                name,
                (inputs, collect, filter),
                branching,
                state,
                routes,
            )| {
                Statement::Processor(ProcessorStmt::Create(Box::new(CreateProcessor {
                    if_not_exists,
                    attachment,
                    name,
                    def: ProcessorDef::Junction {
                        feed: RelayFeed {
                            inputs,
                            collect,
                            filter,
                        },
                    },
                    branching: Some(branching),
                    state,
                    routes,
                })))
            },
        )
}

fn retry() -> impl Strategy<Value = RetryPolicy> {
    (duration(), duration()).prop_map(|(a, b)| RetryPolicy {
        backoff: a.min(b),
        max: a.max(b),
    })
}

fn kafka_mode() -> impl Strategy<Value = DeliveryMode> {
    prop_oneof![
        Just(DeliveryMode::NoAck),
        (duration(), retry())
            .prop_map(|(ack_timeout, retry)| DeliveryMode::AckSequential { ack_timeout, retry }),
        (1u64..64, duration(), duration(), retry()).prop_map(|(max, batch, ack_timeout, retry)| {
            DeliveryMode::AckParallel {
                max,
                batch_timeout: Some(batch),
                ack_timeout,
                retry,
            }
        }),
    ]
}

fn ingestor() -> impl Strategy<Value = Statement> {
    let kafka = (
        name(),
        "[ -~]{1,12}",
        prop::option::of("[ -~]{1,12}"),
        prop::option::of(1u64..8),
        kafka_mode(),
    )
        .prop_map(|(client, topic, group, instances, mode)| {
            let offset = match group {
                Some(group) => KafkaOffset::ConsumerGroup(group),
                None => KafkaOffset::Domain,
            };
            SourceBody::KafkaTopic {
                client,
                topic,
                offset,
                instances,
                mode,
                quiesce: QuiesceMode::Suspend,
            }
        });
    (
        any::<bool>(),
        name(),
        kafka,
        name(),
        prop::option::of(prop_oneof![
            Just(TimestampSource::Now),
            name().prop_map(TimestampSource::At)
        ]),
        prop::option::of(tree()),
        prop::collection::vec(route(true), 1..3),
        prop_oneof![
            Just(GeneralErrorPolicy::Ignore),
            Just(GeneralErrorPolicy::Log)
        ],
    )
        .prop_map(
            |(if_not_exists, name, source, codec, timestamp, filter, routes, on_general_error)| {
                Statement::Ingestor(IngestorStmt::Create(Box::new(CreateIngestor {
                    if_not_exists,
                    name,
                    source,
                    decode: Some(codec),
                    timestamp,
                    filter,
                    routes,
                    on_general_error,
                })))
            },
        )
}

fn session() -> impl Strategy<Value = Statement> {
    let kind = prop::sample::select(ObjectKind::ALL.to_vec());
    prop_oneof![
        name().prop_map(SessionStmt::Use),
        Just(SessionStmt::Start(StartAt::Default)),
        prop::option::of(1u32..1000).prop_map(|r| SessionStmt::Start(StartAt::Now {
            time_rate: r.map(|r| f64::from(r) / 8.0)
        })),
        Just(SessionStmt::Stop),
        Just(SessionStmt::Begin),
        Just(SessionStmt::Commit),
        Just(SessionStmt::Revert),
        kind.clone().prop_map(SessionStmt::ShowAll),
        (kind.clone(), name()).prop_map(|(kind, name)| SessionStmt::ShowCreate { kind, name }),
        (kind.clone(), name(), any::<bool>()).prop_map(|(kind, name, json)| {
            SessionStmt::Describe {
                kind,
                name,
                format: if json {
                    DescribeFormat::Json
                } else {
                    DescribeFormat::Text
                },
            }
        }),
        (kind, any::<bool>(), name()).prop_map(|(kind, if_exists, name)| SessionStmt::Drop {
            kind,
            if_exists,
            name
        }),
    ]
    .prop_map(Statement::Session)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn generated_statements_round_trip(statement in prop_oneof![session(), junction(), ingestor()]) {
        let text = nervix_nspl::render_statement(&statement);
        let parsed = nervix_nspl::parse_statement(&text)
            .map_err(|e| TestCaseError::fail(format!("{text}\n{e}")))?;
        prop_assert_eq!(&parsed, &statement, "text:\n{}", text);
        prop_assert_eq!(nervix_nspl::render_statement(&parsed), text);
    }
}
