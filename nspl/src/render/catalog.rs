//! Rendering of catalog statements.
//!
//! CREATE statements put the head (and a VHOST's hosts) on the first line and each clause on
//! its own line below; schema field lists and CONFIG maps hold one entry per line, as the spec
//! writes them. Commands (UPLOAD, REBIND, cluster commands) are one line. Wire type names are
//! lower-case, as DESIGN §7 writes them.

use super::{fmt_duration, fmt_expr, fmt_float, fmt_type, fmt_version, quote, Writer};
use crate::ast::catalog::{
    AvroType, CatalogStmt, ClientOperation, CodecSource, CreateClient, CreateCodec, CreateDomain,
    CreateRelay, CreateSchema, CreateWireSchema, DocType, Mount, Pacing, SchemaField,
    SchemaOperation, UserOperation, WireDefinition, WireField, WireMode,
};
use crate::ast::{ConfigMap, ConfigValue, Statement};
use crate::render::route::fmt_branching;

/// The canonical text of `statement` with secrets masked (see [`CatalogStmt::redacted`]):
/// what logs and audit trails should print. Non-catalog statements render unchanged.
pub fn render_redacted(statement: &Statement) -> String {
    match statement {
        Statement::Catalog(s) => super::render_statement(&Statement::Catalog(s.redacted())),
        other => super::render_statement(other),
    }
}

/// Whether a wire field name is written bare: a lower-case identifier the lexer reads as one
/// word. Any other name is quoted.
pub fn is_bare_wire_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'_'))
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'))
}

/// Whether a host is written bare: every label a word the lexer reads back as one token.
pub fn is_bare_host(host: &str) -> bool {
    host.split('.').all(|label| {
        let mut bytes = label.bytes();
        matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic())
            && bytes.all(|b| b.is_ascii_alphanumeric())
    })
}

fn create(if_not_exists: bool) -> &'static str {
    if if_not_exists {
        "CREATE IF NOT EXISTS"
    } else {
        "CREATE"
    }
}

pub fn render(w: &mut Writer, s: &CatalogStmt) {
    match s {
        CatalogStmt::CreateDomain(d) => domain(w, d),
        CatalogStmt::CreateSchema(s) => schema(w, s),
        CatalogStmt::AlterSchema(a) => {
            w.line(0, format!("ALTER SCHEMA {}", a.name));
            let ops: Vec<String> = a.operations.iter().map(fmt_schema_operation).collect();
            operation_lines(w, ops);
        }
        CatalogStmt::CreateWireSchema(s) => wire_schema(w, s),
        CatalogStmt::CreateCodec(c) => codec(w, c),
        CatalogStmt::CreateBranch(b) => {
            w.line(0, format!("{} BRANCH {}", create(b.if_not_exists), b.name));
            w.line(
                1,
                format!("SCHEMA {} TTL {}", b.schema, fmt_duration(b.ttl)),
            );
            if let Some(n) = b.max_instances {
                w.line(1, format!("MAX INSTANCES {n} EVICT LRU"));
            }
        }
        CatalogStmt::CreateRelay(r) => relay(w, r),
        CatalogStmt::CreateClient(c) => client(w, c),
        CatalogStmt::AlterClient(a) => {
            w.line(0, format!("ALTER CLIENT {}", a.name));
            for (i, op) in a.operations.iter().enumerate() {
                match op {
                    ClientOperation::SetMount(mounts) => {
                        w.line(1, format!("SET MOUNT {}", fmt_mounts(mounts)))
                    }
                    ClientOperation::SetPoolSize(n) => w.line(1, format!("SET POOL SIZE {n}")),
                    ClientOperation::SetConfig(config) => write_config(w, "SET CONFIG", config),
                }
                if i + 1 < a.operations.len() {
                    w.append(",");
                }
            }
        }
        CatalogStmt::CreateVhost(v) => {
            let hosts: Vec<String> = v.hosts.iter().map(|h| fmt_host(h)).collect();
            w.line(
                0,
                format!(
                    "{} VHOST {} {}",
                    create(v.if_not_exists),
                    v.name,
                    hosts.join(", ")
                ),
            );
            if let Some(tls) = &v.tls {
                w.line(1, format!("WITH TLS {}", fmt_mount(tls)));
            }
        }
        CatalogStmt::CreateEndpoint(e) => {
            w.line(
                0,
                format!("{} ENDPOINT {}", create(e.if_not_exists), e.name),
            );
            w.line(1, format!("ON {} PATH {}", e.vhost, quote(&e.path)));
            w.line(1, format!("TYPE {}", e.endpoint_type.keyword()));
            if let Some(protocol) = &e.signaling_protocol {
                w.line(1, format!("WITH SIGNALING PROTOCOL {protocol}"));
            }
        }
        CatalogStmt::CreateResource(r) => {
            w.line(
                0,
                format!("{} RESOURCE {}", create(r.if_not_exists), r.name),
            );
        }
        CatalogStmt::UploadResource { resource, path } => {
            w.line(
                0,
                format!("UPLOAD RESOURCE {resource} FROM {}", quote(path)),
            );
        }
        CatalogStmt::RebindResource(r) => {
            let mut text = format!(
                "REBIND RESOURCE {} TO {}",
                r.resource,
                fmt_version(r.version)
            );
            if !r.vhosts.is_empty() {
                let vhosts: Vec<&str> = r.vhosts.iter().map(|v| v.name.as_str()).collect();
                text.push_str(&format!(" FOR VHOST {}", vhosts.join(", ")));
            }
            w.line(0, text);
        }
        CatalogStmt::CreateUser(u) => {
            w.line(0, format!("{} USER {}", create(u.if_not_exists), u.name));
            w.line(1, format!("WITH PASSWORD {}", quote(&u.password)));
            w.line(1, format!("ROLE {}", u.role.keyword()));
        }
        CatalogStmt::AlterUser(a) => {
            w.line(0, format!("ALTER USER {}", a.name));
            let ops: Vec<String> = a
                .operations
                .iter()
                .map(|op| match op {
                    UserOperation::SetPassword(password) => {
                        format!("SET PASSWORD {}", quote(password))
                    }
                    UserOperation::SetRole(role) => format!("SET ROLE {}", role.keyword()),
                })
                .collect();
            operation_lines(w, ops);
        }
        CatalogStmt::CreateSubscription(s) => {
            w.line(
                0,
                format!("{} SUBSCRIPTION {}", create(s.if_not_exists), s.name),
            );
            match &s.filter {
                Some(filter) => w.line(1, format!("TO {} WHERE {}", s.relay, fmt_expr(filter))),
                None => w.line(1, format!("TO {}", s.relay)),
            }
            if let Some(rate) = s.sample_rate {
                w.line(1, format!("BATCH SAMPLE RATE {}", fmt_float(rate)));
            }
        }
        CatalogStmt::ShowClusterStatus => w.line(0, "SHOW CLUSTER STATUS"),
        CatalogStmt::Node { command, node } => {
            w.line(0, format!("{} NODE {node}", command.keyword()));
        }
        CatalogStmt::Relocate(r) => {
            let targets: Vec<String> = r
                .targets
                .iter()
                .map(|(kind, name)| format!("{} {name}", kind.keywords().join(" ")))
                .collect();
            let preferences = if r.follow_preferences {
                "FOLLOW"
            } else {
                "IGNORE"
            };
            w.line(
                0,
                format!(
                    "RELOCATE {} ONTO NODE {} {preferences} PREFERENCES",
                    targets.join(", "),
                    r.node
                ),
            );
        }
    }
}

/// One operation per line at indent 1, separated by commas.
fn operation_lines(w: &mut Writer, ops: Vec<String>) {
    let count = ops.len();
    for (i, op) in ops.into_iter().enumerate() {
        let sep = if i + 1 < count { "," } else { "" };
        w.line(1, format!("{op}{sep}"));
    }
}

/// `(` / one item per line / `)`, the opening parenthesis ending the head line.
fn item_block(w: &mut Writer, head: String, items: Vec<String>) {
    w.line(0, format!("{head} ("));
    operation_lines(w, items);
    w.line(0, ")");
}

fn domain(w: &mut Writer, d: &CreateDomain) {
    match &d.pacing {
        Pacing::Unpaced => w.line(0, format!("{} DOMAIN {}", create(d.if_not_exists), d.name)),
        Pacing::Paced { period, skew } => {
            w.line(
                0,
                format!("{} PACED DOMAIN {}", create(d.if_not_exists), d.name),
            );
            w.line(
                1,
                format!(
                    "WITH PERIOD {} SKEW {}",
                    fmt_duration(*period),
                    fmt_duration(*skew)
                ),
            );
        }
    }
}

fn fmt_schema_field(f: &SchemaField) -> String {
    let mut text = format!("{} {}", f.name, fmt_type(&f.ty));
    if f.sensitive {
        text.push_str(" SENSITIVE");
    }
    if f.optional {
        text.push_str(" OPTIONAL");
    }
    text
}

fn schema(w: &mut Writer, s: &CreateSchema) {
    let head = format!("{} SCHEMA {}", create(s.if_not_exists), s.name);
    item_block(w, head, s.fields.iter().map(fmt_schema_field).collect());
}

fn fmt_schema_operation(op: &SchemaOperation) -> String {
    match op {
        SchemaOperation::AddField(f) => format!("ADD FIELD {}", fmt_schema_field(f)),
        SchemaOperation::DropField(f) => format!("DROP FIELD {f}"),
        SchemaOperation::RenameField { from, to } => format!("RENAME FIELD {from} TO {to}"),
        SchemaOperation::SetType { field, ty } => {
            format!("ALTER FIELD {field} SET TYPE {}", fmt_type(ty))
        }
        SchemaOperation::SetOptional(f) => format!("ALTER FIELD {f} SET OPTIONAL"),
        SchemaOperation::DropOptional(f) => format!("ALTER FIELD {f} DROP OPTIONAL"),
    }
}

fn fmt_wire_name(name: &str) -> String {
    if is_bare_wire_name(name) {
        name.to_string()
    } else {
        quote(name)
    }
}

fn fmt_wire_field<T>(f: &WireField<T>, ty: impl Fn(&T) -> String) -> String {
    let optional = if f.optional { " OPTIONAL" } else { "" };
    format!("{} {}{optional}", fmt_wire_name(&f.name), ty(&f.ty))
}

fn fmt_doc_type(t: &DocType) -> String {
    t.word().to_string()
}

fn fmt_avro_type(t: &AvroType) -> String {
    match t {
        AvroType::Null => "null".into(),
        AvroType::Boolean => "boolean".into(),
        AvroType::Int => "int".into(),
        AvroType::Long => "long".into(),
        AvroType::Float => "float".into(),
        AvroType::Double => "double".into(),
        AvroType::Bytes => "bytes".into(),
        AvroType::String => "string".into(),
        AvroType::Record(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|f| fmt_wire_field(f, fmt_avro_type))
                .collect();
            format!("record({})", fields.join(", "))
        }
        AvroType::Enum(symbols) => {
            let symbols: Vec<String> = symbols.iter().map(|s| quote(s)).collect();
            format!("enum({})", symbols.join(", "))
        }
        AvroType::Array(element) => format!("array<{}>", fmt_avro_type(element)),
        AvroType::Map(element) => format!("map<{}>", fmt_avro_type(element)),
        AvroType::Fixed(size) => format!("fixed({size})"),
    }
}

fn wire_schema(w: &mut Writer, s: &CreateWireSchema) {
    let format = s.definition.format().keyword();
    let mut head = format!(
        "{} WIRE {format} SCHEMA {}",
        create(s.if_not_exists),
        s.name
    );
    let fields = match &s.definition {
        WireDefinition::Json { mode, fields } | WireDefinition::Cbor { mode, fields } => {
            let mode = match mode {
                WireMode::Strict => "STRICT",
                WireMode::Loose => "LOOSE",
            };
            head.push_str(&format!(" MODE {mode}"));
            fields
                .iter()
                .map(|f| fmt_wire_field(f, fmt_doc_type))
                .collect()
        }
        WireDefinition::Avro { fields } => fields
            .iter()
            .map(|f| fmt_wire_field(f, fmt_avro_type))
            .collect(),
    };
    item_block(w, head, fields);
}

fn codec(w: &mut Writer, c: &CreateCodec) {
    w.line(0, format!("{} CODEC {}", create(c.if_not_exists), c.name));
    match &c.source {
        CodecSource::Wire {
            format,
            wire_schema,
            encodings,
        } => {
            w.line(
                1,
                format!("FROM WIRE {} SCHEMA {wire_schema}", format.keyword()),
            );
            w.line(1, format!("TO SCHEMA {}", c.schema));
            let items: Vec<String> = encodings
                .iter()
                .map(|e| format!("{} AS RFC3339", e.field))
                .collect();
            w.list_lines(1, "ENCODE", &items);
        }
        CodecSource::Jaq {
            format,
            on_ingestion,
            on_emitting,
        } => {
            w.line(1, format!("FROM {}", format.keyword()));
            w.line(1, format!("TO SCHEMA {}", c.schema));
            w.line(1, "WITH JAQ TRANSFORMATIONS");
            if let Some(program) = on_ingestion {
                w.line(2, format!("ON INGESTION {}", quote(program)));
            }
            if let Some(program) = on_emitting {
                w.line(2, format!("ON EMITTING {}", quote(program)));
            }
        }
    }
}

fn relay(w: &mut Writer, r: &CreateRelay) {
    w.line(0, format!("{} RELAY {}", create(r.if_not_exists), r.name));
    w.line(
        1,
        format!("SCHEMA {} {}", r.schema, fmt_branching(&r.branching)),
    );
    if let Some(capacity) = r.capacity {
        w.line(1, format!("CAPACITY {capacity}"));
    }
    if r.materialized {
        w.line(1, "WITH MATERIALIZED STATE LAST BY TIMESTAMP");
    }
}

fn fmt_mount(m: &Mount) -> String {
    format!("{} {}", m.resource, fmt_version(m.version))
}

fn fmt_mounts(mounts: &[Mount]) -> String {
    let mounts: Vec<String> = mounts.iter().map(fmt_mount).collect();
    mounts.join(", ")
}

fn fmt_host(host: &str) -> String {
    if is_bare_host(host) {
        host.to_string()
    } else {
        quote(host)
    }
}

fn fmt_config_value(v: &ConfigValue) -> String {
    match v {
        ConfigValue::String(s) => quote(s),
        ConfigValue::Integer(i) => i.to_string(),
        ConfigValue::Decimal(f) => fmt_float(*f),
        ConfigValue::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_string(),
    }
}

/// `<keyword> {` / one `'key' = value` per line / `}` at indent 1; `<keyword> {}` when empty.
fn write_config(w: &mut Writer, keyword: &str, config: &ConfigMap) {
    if config.entries.is_empty() {
        w.line(1, format!("{keyword} {{}}"));
        return;
    }
    w.line(1, format!("{keyword} {{"));
    let count = config.entries.len();
    for (i, (key, value)) in config.entries.iter().enumerate() {
        let sep = if i + 1 < count { "," } else { "" };
        w.line(
            2,
            format!("{} = {}{sep}", quote(key), fmt_config_value(value)),
        );
    }
    w.line(1, "}");
}

fn client(w: &mut Writer, c: &CreateClient) {
    w.line(0, format!("{} CLIENT {}", create(c.if_not_exists), c.name));
    w.line(1, format!("TYPE {}", c.client_type.keyword()));
    if let Some(protocol) = &c.signaling_protocol {
        w.line(1, format!("WITH SIGNALING PROTOCOL {protocol}"));
    }
    if !c.mounts.is_empty() {
        w.line(1, format!("MOUNT {}", fmt_mounts(&c.mounts)));
    }
    if let Some(n) = c.pool_size {
        w.line(1, format!("POOL SIZE {n}"));
    }
    write_config(w, "CONFIG", &c.config);
}

#[cfg(test)]
mod tests {
    use super::render_redacted;
    use crate::{parse_statement, render_statement};

    fn redacted(src: &str) -> String {
        let statement = parse_statement(src).expect("statement parses");
        render_redacted(&statement)
    }

    #[test]
    fn passwords_are_masked_in_redacted_text_only() {
        let src = "CREATE USER ops WITH PASSWORD 'hunter2' ROLE ADMIN;";
        let statement = parse_statement(src).expect("statement parses");
        assert!(render_statement(&statement).contains("'hunter2'"));
        let masked = redacted(src);
        assert!(!masked.contains("hunter2"), "{masked}");
        assert!(masked.contains("WITH PASSWORD '<masked>'"), "{masked}");
        // The masked text is still a statement.
        assert!(parse_statement(&masked).is_ok());

        let masked = redacted("ALTER USER ops SET ROLE READER, SET PASSWORD 'hunter2';");
        assert!(!masked.contains("hunter2"), "{masked}");
        assert!(masked.contains("SET ROLE READER"), "{masked}");
    }

    #[test]
    fn secret_config_values_are_masked() {
        let masked = redacted(
            "CREATE CLIENT k TYPE KAFKA CONFIG {'bootstrap.servers' = 'b:9092', \
             'sasl.password' = 'pw1', 'SSL.Key.Password' = 'pw2', 'api_token' = 't'};",
        );
        assert!(masked.contains("'b:9092'"), "{masked}");
        for secret in ["pw1", "pw2", "'t'"] {
            assert!(!masked.contains(secret), "{secret} leaked: {masked}");
        }
        let masked = redacted("ALTER CLIENT k SET CONFIG {'client_secret' = 'abc'};");
        assert!(!masked.contains("abc"), "{masked}");
    }

    #[test]
    fn other_statements_render_unchanged() {
        let src = "CREATE RELAY orders SCHEMA order_in UNBRANCHED;";
        let statement = parse_statement(src).expect("statement parses");
        assert_eq!(render_redacted(&statement), render_statement(&statement));
    }
}
