//! How a running domain adopts a model change: hot (dynamic) or through an entity pause
//! (spec "Junction", "Deduplicator", "Reorderer": their ALTER classification).
//!
//! The spec classifies ALTER operations; this module classifies the change they leave in the
//! catalog, comparing the domain's deployed model with the new one, so a change made by any
//! path (several ALTERs between two reconciles, a DROP and CREATE) is judged by what actually
//! differs. A change is dynamic when the run state and every entity are unchanged except
//! junctions, deduplicators and reorderers whose differences are all dynamic aspects:
//! node-wide FILTER WHERE, per-input WHERE, COLLECT FOR values, route construction (INHERIT,
//! SET, route WHERE), route FLUSH, a message-error policy that keeps its target (IGNORE / LOG,
//! or SEND TO the same relay with another SET) and MAX TIME. Anything else — inputs, routes
//! added, dropped or retargeted, branching, attachment, dependencies, error-route targets,
//! DEDUPLICATE ON, BY, every other entity kind — is an entity pause.
//!
//! Why this is safe: a dynamic change keeps every relay, branch, node and route in place (the
//! comparison proves the rendered structure equal), so the running graph's buffers, collectors
//! and processor state stay valid under the new plan; the shard still checks the shapes before
//! adopting and falls back to a pause if they differ. Comparison renders statements to
//! canonical text, because expression spans shift with the text around them.

use nervix_nspl::ast::processor::{CreateProcessor, ProcessorDef, RelayFeed};
use nervix_nspl::ast::{MessageErrorPolicy, ProcessorStmt, Route};
use nervix_nspl::{render_statement, Statement};

use crate::catalog::Domain;

/// How the shards adopt a changed model of a running domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelChange {
    /// Hot: the new plan replaces the old in place; buffered route output, collectors and
    /// processor state stay, and admission never pauses.
    Dynamic,
    /// The domain's admission is held, its buffers force-flushed and drained, then the new
    /// graph is installed (processor state carried through a snapshot).
    EntityPause,
}

/// Classifies the change from the deployed model `old` to `new` (same domain).
pub fn classify(old: &Domain, new: &Domain) -> ModelChange {
    if old.header.run != new.header.run
        || old.header.definition != new.header.definition
        || old.entities.len() != new.entities.len()
    {
        return ModelChange::EntityPause;
    }
    for (key, before) in &old.entities {
        let Some(after) = new.entities.get(key) else {
            return ModelChange::EntityPause;
        };
        if before.definition == after.definition {
            continue;
        }
        let (
            Statement::Processor(ProcessorStmt::Create(before)),
            Statement::Processor(ProcessorStmt::Create(after)),
        ) = (&before.definition, &after.definition)
        else {
            return ModelChange::EntityPause;
        };
        if !only_dynamic_differences(before, after) {
            return ModelChange::EntityPause;
        }
    }
    ModelChange::Dynamic
}

/// Whether `before` becomes `after` by dynamic aspects alone: `before` with every dynamic
/// aspect taken from `after` renders exactly as `after`.
fn only_dynamic_differences(before: &CreateProcessor, after: &CreateProcessor) -> bool {
    let mut adjusted = before.clone();
    let dynamic_kind = match (&mut adjusted.def, &after.def) {
        (ProcessorDef::Junction { feed }, ProcessorDef::Junction { feed: new }) => {
            take_feed(feed, new);
            true
        }
        (
            ProcessorDef::Deduplicator { feed, max_time, .. },
            ProcessorDef::Deduplicator {
                feed: new,
                max_time: new_max_time,
                ..
            },
        )
        | (
            ProcessorDef::Reorderer { feed, max_time, .. },
            ProcessorDef::Reorderer {
                feed: new,
                max_time: new_max_time,
                ..
            },
        ) => {
            take_feed(feed, new);
            *max_time = *new_max_time;
            true
        }
        _ => false,
    };
    if !dynamic_kind || adjusted.routes.len() != after.routes.len() {
        return false;
    }
    for (route, new) in adjusted.routes.iter_mut().zip(&after.routes) {
        take_route(route, new);
    }
    render(adjusted) == render(after.clone())
}

fn render(create: CreateProcessor) -> String {
    render_statement(&Statement::Processor(ProcessorStmt::Create(Box::new(
        create,
    ))))
}

/// Takes the feed's dynamic aspects: FILTER WHERE, per-input WHERE (same inputs), and
/// COLLECT FOR values (a collection added or removed is structural).
fn take_feed(feed: &mut RelayFeed, new: &RelayFeed) {
    feed.filter.clone_from(&new.filter);
    if feed.inputs.len() == new.inputs.len() {
        for (input, new) in feed.inputs.iter_mut().zip(&new.inputs) {
            input.filter.clone_from(&new.filter);
        }
    }
    if feed.collect.is_some() && new.collect.is_some() {
        feed.collect.clone_from(&new.collect);
    }
}

/// Takes a route's dynamic aspects: construction, WHERE, FLUSH and a message-error policy
/// that keeps its target.
fn take_route(route: &mut Route, new: &Route) {
    route.inherit.clone_from(&new.inherit);
    route.set.clone_from(&new.set);
    route.filter.clone_from(&new.filter);
    route.flush.clone_from(&new.flush);
    let same_target = match (&route.on_error, &new.on_error) {
        (
            MessageErrorPolicy::SendTo { relay: old, .. },
            MessageErrorPolicy::SendTo { relay, .. },
        ) => old == relay,
        (MessageErrorPolicy::SendTo { .. }, _) | (_, MessageErrorPolicy::SendTo { .. }) => false,
        _ => true,
    };
    if same_target {
        route.on_error.clone_from(&new.on_error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::plan::{plan_statement, StatementContext};
    use crate::catalog::Catalog;

    /// The cases of `engine/tests/data/model_changes.txt`: a base script, then per case the
    /// expected class and one ALTER.
    const CASES: &str = include_str!("../../tests/data/model_changes.txt");

    fn run(catalog: &mut Catalog, src: &str) {
        let statement = nervix_nspl::parse_statement(src)
            .unwrap_or_else(|e| panic!("{src}: does not parse: {e:?}"));
        let context = StatementContext {
            domain: Some("d"),
            span: nervix_nspl::Span::default(),
            wall_ns: 0,
        };
        let planned = plan_statement(catalog, context, &statement)
            .unwrap_or_else(|e| panic!("{src}: refused: {e}"));
        for change in &planned.changes {
            catalog.apply_change(change);
        }
    }

    fn statements(block: &str) -> Vec<String> {
        let text: Vec<&str> = block
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .collect();
        text.join("\n")
            .split_inclusive(';')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }

    #[test]
    fn every_alter_of_the_case_file_is_classified_as_written() {
        let mut sections = CASES.split("== ").skip(1);
        let base = sections.next().expect("a base section");
        let base = base.strip_prefix("base").expect("the base comes first");
        let mut catalog = Catalog::default();
        for statement in statements(base) {
            run(&mut catalog, &statement);
        }
        let mut cases = 0;
        for section in sections {
            let (class, body) = section.split_once('\n').expect("a class line");
            let expected = match class.trim() {
                "dynamic" => ModelChange::Dynamic,
                "pause" => ModelChange::EntityPause,
                other => panic!("unknown class {other:?}"),
            };
            let mut altered = catalog.clone();
            for statement in statements(body) {
                run(&mut altered, &statement);
            }
            let got = classify(&catalog.domains["d"], &altered.domains["d"]);
            assert_eq!(got, expected, "{}", body.trim());
            cases += 1;
        }
        assert!(cases >= 19, "only {cases} cases read");
    }

    #[test]
    fn an_unchanged_model_is_dynamic_and_a_new_entity_pauses() {
        let base = CASES.split("== ").nth(1).expect("a base section");
        let mut catalog = Catalog::default();
        for statement in statements(base.strip_prefix("base").expect("the base comes first")) {
            run(&mut catalog, &statement);
        }
        let domain = &catalog.domains["d"];
        assert_eq!(classify(domain, domain), ModelChange::Dynamic);
        let mut grown = catalog.clone();
        run(&mut grown, "CREATE RELAY d2 SCHEMA s UNBRANCHED;");
        assert_eq!(
            classify(domain, &grown.domains["d"]),
            ModelChange::EntityPause
        );
    }
}
