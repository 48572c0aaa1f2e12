//! The node end to end: a real `nervix serve` process driven over its TCP console.

mod support;

use std::path::Path;

use support::{Answer, Client, Node, ADMIN_PASSWORD};

#[test]
fn sign_in_is_required_and_checked() {
    let node = Node::start(&support::scratch_dir("auth"));
    let mut anonymous = node.client();
    assert!(
        anonymous.greeting.contains("AUTH REQUIRED"),
        "{}",
        anonymous.greeting
    );
    let answer = anonymous.send("SHOW DOMAINS;");
    assert!(
        answer
            .message()
            .is_some_and(|m| m.starts_with("not authenticated")),
        "{answer:?}"
    );
    assert!(
        anonymous.auth("admin", "wrong").is_err(),
        "a wrong password is refused"
    );
    assert!(
        anonymous.auth("nobody", ADMIN_PASSWORD).is_err(),
        "an unknown user is refused"
    );

    let mut admin = node.admin();
    admin.ok("CREATE USER viewer WITH PASSWORD 'viewer-secret' ROLE READER;");
    admin.ok("CREATE USER ops WITH PASSWORD 'ops-secret' ROLE OPERATOR;");
    admin.ok("CREATE DOMAIN sales;");

    let mut reader = node.client();
    reader
        .auth("viewer", "viewer-secret")
        .expect("reader signs in");
    reader.ok("SHOW DOMAINS;");
    let refused = reader.send("CREATE DOMAIN other;");
    assert!(
        refused.message().is_some_and(|m| m.contains("READER")),
        "a READER may not CREATE: {refused:?}"
    );

    let mut operator = node.client();
    operator
        .auth("ops", "ops-secret")
        .expect("operator signs in");
    operator.ok("USE sales;");
    operator.ok("CREATE SCHEMA s (a STRING);");
    let refused = operator.send("CREATE USER x WITH PASSWORD 'p' ROLE READER;");
    assert!(
        refused.message().is_some_and(|m| m.contains("OPERATOR")),
        "an OPERATOR may not manage users: {refused:?}"
    );
    let users = admin.ok("SHOW USERS;");
    assert!(
        users.iter().all(|u| !u.contains("argon2")),
        "hashes never shown: {users:?}"
    );
}

#[test]
fn first_start_without_admin_password_is_refused() {
    let stderr = serve_refused("no-admin", &[], None);
    assert!(stderr.contains("NERVIX_ADMIN_PASSWORD"), "{stderr}");
}

/// Runs `nervix serve` on free loopback ports with `extra` arguments (and the admin password,
/// if given) in a fresh data dir; it must fail to start. Returns its stderr.
fn serve_refused(label: &str, extra: &[&str], admin_password: Option<&str>) -> String {
    let dir = support::scratch_dir(label);
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_nervix"));
    command.args(["serve", "--data-dir"]).arg(&dir);
    for flag in [
        "--console-addr",
        "--raft-addr",
        "--session-addr",
        "--metrics-addr",
        "--http-addr",
        "--https-addr",
    ] {
        command.args([flag, &support::free_addr().to_string()]);
    }
    command.args(["--shards", "1"]).args(extra);
    match admin_password {
        Some(password) => command.env("NERVIX_ADMIN_PASSWORD", password),
        None => command.env_remove("NERVIX_ADMIN_PASSWORD"),
    };
    let output = command.output().expect("nervix runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!output.status.success(), "{extra:?} started: {stderr}");
    stderr
}

/// `nervix serve` with `extra` arguments must fail to start, saying `expected` on stderr.
fn assert_serve_refuses(extra: &[&str], expected: &str) {
    let stderr = serve_refused("shard-settings", extra, Some(ADMIN_PASSWORD));
    assert!(stderr.contains(expected), "{extra:?}: {stderr}");
}

#[test]
fn shard_settings_out_of_bounds_are_refused_naming_the_flag() {
    assert_serve_refuses(
        &["--no-pin", "--shard-ring-depth", "100000"],
        "--shard-ring-depth",
    );
    assert_serve_refuses(
        &["--no-pin", "--shard-io-memory", "4294967296"],
        "--shard-io-memory",
    );
    assert_serve_refuses(&["--no-pin", "--shard-spin-us", "20000"], "--shard-spin-us");
    // Pinned: cpu 4000 is named whether the topology says it is offline or cannot be read.
    assert_serve_refuses(&["--shard-cpus", "4000"], "cpu 4000");
}

fn define_graph(client: &mut Client) {
    for statement in [
        "CREATE DOMAIN sales;",
        "USE sales;",
        "CREATE SCHEMA order_in (region STRING, order_id STRING, amount I64, card STRING SENSITIVE);",
        "CREATE SCHEMA region_key (region STRING);",
        "CREATE BRANCH by_region SCHEMA region_key TTL 5m;",
        "CREATE RELAY orders_by_region SCHEMA order_in BRANCHED BY by_region;",
    ] {
        client.ok(statement);
    }
}

const PRODUCER: &str = "create client producer ingestor orders_in from schema order_in \
    mode ack parallel max 4 ack timeout 30s retry policy backoff 100ms max 1s on quiesce suspend \
    timestamp now to orders_by_region inherit all branched by by_region set region = message.region \
    flush immediate on message error log on general error log;";

#[test]
fn show_create_returns_the_canonical_text_and_show_ingestors_the_spec_format() {
    let node = Node::start(&support::scratch_dir("show-create"));
    let mut admin = node.admin();
    define_graph(&mut admin);
    admin.ok(PRODUCER);
    let canonical = nervix_nspl::format_script(PRODUCER).expect("parses");
    let shown = admin.ok("SHOW CREATE INGESTOR orders_in;");
    assert_eq!(shown.join("\n") + "\n", canonical);
    let listed = admin.ok("SHOW INGESTORS;");
    assert_eq!(
        listed,
        vec!["orders_in from=CLIENT PRODUCER schema=order_in owner=node-1 status=stopped"]
    );
    let described = admin.ok("DESCRIBE INGESTOR orders_in;");
    assert!(
        described.contains(&"from: CLIENT PRODUCER SCHEMA order_in MODE ACK PARALLEL MAX 4 ACK TIMEOUT 30s RETRY POLICY BACKOFF 100ms MAX 1s ON QUIESCE SUSPEND".to_string()),
        "{described:#?}"
    );
    assert!(
        described.contains(&"  message.region : STRING".to_string()),
        "the model keeps its expressions type-resolved: {described:#?}"
    );
}

#[test]
fn kill_9_and_restart_keep_every_answered_statement() {
    let dir = support::scratch_dir("kill9");
    let mut node = Node::start(&dir);
    let mut admin = node.admin();
    define_graph(&mut admin);
    admin.ok(PRODUCER);
    let count = 50;
    for i in 0..count {
        admin.ok(&format!("CREATE SCHEMA s{i} (a STRING, b I64);"));
    }
    let before = admin.ok("SHOW CREATE INGESTOR orders_in;");
    let described = admin.ok("DESCRIBE INGESTOR orders_in;");
    drop(admin);
    node.restart();
    let mut admin = node.admin();
    admin.ok("USE sales;");
    assert_eq!(admin.ok("SHOW CREATE INGESTOR orders_in;"), before);
    assert_eq!(
        admin.ok("DESCRIBE INGESTOR orders_in;"),
        described,
        "typed expressions survive the restart with the model"
    );
    let schemas = admin.ok("SHOW SCHEMAS;");
    assert_eq!(schemas.len(), count + 2, "{schemas:?}");
    admin.ok("START;");
    let domains = admin.ok("SHOW DOMAINS;");
    assert!(
        domains[0].contains("state=started generation=1"),
        "{domains:?}"
    );
}

#[test]
fn altering_a_field_type_retypes_the_expressions_that_read_it() {
    let node = Node::start(&support::scratch_dir("retype"));
    let mut admin = node.admin();
    for statement in [
        "CREATE DOMAIN d;",
        "USE d;",
        "CREATE SCHEMA s (amount I32, label STRING OPTIONAL);",
        "CREATE RELAY a SCHEMA s UNBRANCHED;",
        "CREATE RELAY b SCHEMA s UNBRANCHED;",
        "CREATE JUNCTION j FROM a FILTER WHERE input.amount > 0 UNBRANCHED \
         TO b SET amount = input.amount + 1, label = input.label FLUSH IMMEDIATE \
         ON MESSAGE ERROR LOG;",
    ] {
        admin.ok(statement);
    }
    let before = admin.ok("DESCRIBE JUNCTION j;");
    assert!(
        before.contains(&"  input.amount > 0 : BOOL".to_string()),
        "{before:#?}"
    );
    assert!(
        before.contains(&"  input.amount + 1 : I32".to_string()),
        "{before:#?}"
    );
    admin.ok("ALTER SCHEMA s ALTER FIELD amount SET TYPE I64;");
    let after = admin.ok("DESCRIBE JUNCTION j FORMAT JSON;");
    let json: serde_json::Value = serde_json::from_str(&after[0]).expect("JSON");
    let typed: Vec<(String, String)> = json["expressions"]
        .as_array()
        .expect("expressions")
        .iter()
        .map(|e| (e["expression"].to_string(), e["type"].to_string()))
        .collect();
    assert!(
        typed.contains(&("\"input.amount + 1\"".into(), "\"I64\"".into())),
        "the junction, which reads the schema through its relays, was retyped: {typed:?}"
    );
}

#[test]
fn transactions_apply_atomically_or_not_at_all() {
    let node = Node::start(&support::scratch_dir("txn"));
    let mut admin = node.admin();
    admin.ok("CREATE DOMAIN d;");
    admin.ok("USE d;");
    admin.ok("BEGIN;");
    admin.ok("CREATE SCHEMA a (x STRING);");
    let refused = admin.send("CREATE SCHEMA a (x STRING);");
    assert_eq!(
        refused.message(),
        Some("schema 'a' already exists in domain 'd'"),
        "queued statements are validated against the transaction's candidate"
    );
    admin.ok("CREATE RELAY r SCHEMA a UNBRANCHED;");
    let mut other = node.admin();
    other.ok("USE d;");
    assert!(
        other.ok("SHOW SCHEMAS;").is_empty(),
        "nothing is visible before COMMIT"
    );
    admin.ok("COMMIT;");
    assert_eq!(other.ok("SHOW SCHEMAS;"), vec!["a"]);
    admin.ok("BEGIN;");
    admin.ok("CREATE SCHEMA b (x STRING);");
    admin.ok("REVERT;");
    assert_eq!(other.ok("SHOW SCHEMAS;"), vec!["a"], "REVERT discards");
    let answer: Answer = admin.send("COMMIT;");
    assert_eq!(answer.message(), Some("no transaction is open"));
}

/// Uploads the script's `-- resource:` versions through the console: versions are numbered
/// from 1 on upload, so earlier numbers are uploaded with the files of the next declared one.
fn upload_declared_resources(client: &mut Client, src: &str, scratch: &Path) {
    for (name, versions) in support::resources::declared_resources(src) {
        client.ok(&format!("CREATE RESOURCE {name};"));
        let last = versions.last().map_or(0, |v| v.number);
        for number in 1..=last {
            let files = &versions
                .iter()
                .find(|v| v.number >= number)
                .expect("a declared version at or after this one")
                .files;
            let dir = scratch.join(&name).join(number.to_string());
            for file in files {
                let path = dir.join(file);
                std::fs::create_dir_all(path.parent().expect("a parent")).expect("bundle dir");
                std::fs::write(&path, b"bundle").expect("bundle file");
            }
            client.ok(&format!("UPLOAD RESOURCE {name} FROM '{}';", dir.display()));
        }
    }
}

/// Runs an annotated validation script (`-- error: <message>` before a refused statement)
/// through the console; returns the mismatches.
fn run_script(client: &mut Client, path: &Path, scratch: &Path) -> Vec<String> {
    let src = std::fs::read_to_string(path).expect("script");
    upload_declared_resources(client, &src, scratch);
    let script = nervix_nspl::parse_script(&src);
    let mut problems = Vec::new();
    for spanned in &script.statements {
        let start = spanned.span.start as usize;
        let text = &src[start..spanned.span.end as usize];
        let expected = src[..start]
            .trim_end()
            .rsplit('\n')
            .next()
            .and_then(|l| l.trim().strip_prefix("-- error: "))
            .map(str::trim);
        let answer = client.send(text);
        let at = nervix_nspl::position(&src, spanned.span.start);
        match (answer.message(), expected) {
            (None, None) => {}
            (Some(m), Some(e)) if m == e => {}
            (got, want) => problems.push(format!(
                "{}:{at}: got {got:?}, expected {want:?}",
                path.display()
            )),
        }
    }
    problems
}

#[test]
fn every_validation_script_behaves_the_same_through_the_console() {
    run_scripts_under("tests/validation");
}

/// Node-level statements (users, resources, subscriptions, cluster commands) the planner-level
/// runner cannot execute.
#[test]
fn node_level_golden_statements_behave_as_annotated() {
    run_scripts_under("tests/console");
}

fn run_scripts_under(folder: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
    let mut scripts = Vec::new();
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(dir).expect("dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "nspl") {
                scripts.push(path);
            }
        }
    }
    scripts.sort();
    assert!(!scripts.is_empty(), "no scripts under {}", root.display());
    let mut problems = Vec::new();
    for (i, script) in scripts.iter().enumerate() {
        // A fresh node per script: scripts also create cluster-wide entities (vhosts), and each
        // starts, like the planner-level runner, in an empty domain named `test`.
        let name = format!("{}-{i}", folder.replace('/', "-"));
        let node = Node::start(&support::scratch_dir(&name));
        let mut client = node.admin();
        client.ok("CREATE DOMAIN test;");
        client.ok("USE test;");
        problems.extend(run_script(
            &mut client,
            script,
            &node.data_dir.join("bundles"),
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    eprintln!("{} scripts under {folder} checked", scripts.len());
}
