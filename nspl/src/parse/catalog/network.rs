//! Clients, vhosts, endpoints and resources: the catalog entries that reach outside Nervix.

use super::{choice, new_name, non_empty_string, positive_integer, refuse_repeat};
use crate::ast::catalog::{
    AlterClient, CatalogStmt, ClientOperation, ClientType, CreateClient, CreateEndpoint,
    CreateResource, CreateVhost, EndpointType, Mount, RebindResource,
};
use crate::ast::{ConfigMap, Ident, ObjectKind};
use crate::error::{Expected, NameKind, ParseError};
use crate::lexer::{Punct, TokenKind};
use crate::parse::{PResult, Parser};
use crate::span::Span;

/// The longest DNS name and label (RFC 1035).
const MAX_HOST_LEN: usize = 253;
const MAX_LABEL_LEN: usize = 63;

// ----- clients -----

/// `CREATE CLIENT c TYPE T …` after `CLIENT`.
pub fn create_client(p: &mut Parser, if_not_exists: bool) -> PResult<CatalogStmt> {
    let name = new_name(p)?;
    p.expect_keyword("TYPE")?;
    let choices = ClientType::ALL.map(|t| (t.keyword(), t));
    let client_type = choice(p, Some("a client type"), &choices)?;
    let signaling_protocol = if client_type == ClientType::Websockets {
        if p.eat_keyword("WITH") {
            p.expect_keywords(&["SIGNALING", "PROTOCOL"])?;
            Some(p.ident(NameKind::Existing(ObjectKind::SignalingProtocol))?)
        } else {
            None
        }
    } else {
        if p.is_keyword_at(0, "WITH") {
            return Err(p.error_at(
                p.span(),
                format!(
                    "WITH SIGNALING PROTOCOL is only for TYPE WEBSOCKETS clients, not TYPE {}",
                    client_type.keyword()
                ),
            ));
        }
        None
    };
    let mounts = if p.eat_keyword("MOUNT") {
        mounts(p)?
    } else {
        Vec::new()
    };
    let pool_size = if client_type.has_pool() {
        if p.eat_keyword("POOL") {
            Some(pool_size(p)?)
        } else {
            None
        }
    } else {
        refuse_pool(p, client_type)?;
        None
    };
    p.expect_keyword("CONFIG")?;
    let config = config(p)?;
    Ok(CatalogStmt::CreateClient(CreateClient {
        if_not_exists,
        name,
        client_type,
        signaling_protocol,
        mounts,
        pool_size,
        config,
    }))
}

/// `SIZE n` after `POOL`.
fn pool_size(p: &mut Parser) -> PResult<u64> {
    p.expect_keyword("SIZE")?;
    positive_integer(p, "POOL SIZE")
}

fn refuse_pool(p: &mut Parser, client_type: ClientType) -> PResult<()> {
    if p.is_keyword_at(0, "POOL") {
        return Err(p.error_at(
            p.span(),
            format!(
                "POOL SIZE is only for TYPE REDIS and TYPE POSTGRES clients, not TYPE {}",
                client_type.keyword()
            ),
        ));
    }
    Ok(())
}

/// `r VERSION v, …` after `MOUNT`; a comma followed by `SET <clause>` ends the list (ALTER).
fn mounts(p: &mut Parser) -> PResult<Vec<Mount>> {
    let mut seen = Vec::new();
    let mut list = Vec::new();
    loop {
        let mount = mount(p)?;
        refuse_repeat(&mut seen, &mount.resource.name, mount.resource.span, || {
            format!("resource `{}` is mounted twice", mount.resource)
        })?;
        list.push(mount);
        if at_client_operation_after_comma(p) || !p.eat_punct(Punct::Comma) {
            return Ok(list);
        }
    }
}

fn mount(p: &mut Parser) -> PResult<Mount> {
    let resource = p.ident(NameKind::Existing(ObjectKind::Resource))?;
    let version = p.resource_version()?;
    Ok(Mount { resource, version })
}

/// `{…}` after `CONFIG`, with no key set twice.
fn config(p: &mut Parser) -> PResult<ConfigMap> {
    let start = p.span();
    let map = p.config_map()?;
    let span = start.to(p.prev_span());
    let mut seen = Vec::new();
    for (key, _) in &map.entries {
        refuse_repeat(&mut seen, key, span, || {
            format!("CONFIG key '{key}' is set twice")
        })?;
    }
    Ok(map)
}

fn at_client_operation_after_comma(p: &Parser) -> bool {
    p.peek().kind == TokenKind::Punct(Punct::Comma)
        && p.is_keyword_at(1, "SET")
        && ["MOUNT", "POOL", "CONFIG"]
            .iter()
            .any(|kw| p.is_keyword_at(2, kw))
}

/// `ALTER CLIENT c SET MOUNT … | SET POOL SIZE n | SET CONFIG {…}, …` after `CLIENT`.
pub fn alter_client(p: &mut Parser) -> PResult<CatalogStmt> {
    let name = p.ident(NameKind::Existing(ObjectKind::Client))?;
    let mut operations = Vec::new();
    let mut seen = Vec::new();
    loop {
        let start = p.span();
        p.expect_keyword("SET")?;
        let (operation, what) = match p.expect_one_of(&["MOUNT", "POOL", "CONFIG"])? {
            "MOUNT" => (ClientOperation::SetMount(mounts(p)?), "SET MOUNT"),
            "POOL" => (ClientOperation::SetPoolSize(pool_size(p)?), "SET POOL SIZE"),
            _ => (ClientOperation::SetConfig(config(p)?), "SET CONFIG"),
        };
        refuse_repeat(&mut seen, what, start, || {
            format!("{what} is given twice in one ALTER CLIENT")
        })?;
        operations.push(operation);
        if !p.eat_punct(Punct::Comma) {
            break;
        }
    }
    Ok(CatalogStmt::AlterClient(AlterClient { name, operations }))
}

// ----- vhosts -----

/// `CREATE VHOST v host, … [WITH TLS r VERSION v]` after `VHOST`.
pub fn create_vhost(p: &mut Parser, if_not_exists: bool) -> PResult<CatalogStmt> {
    let name = new_name(p)?;
    let mut seen = Vec::new();
    let hosts = p.comma_list(|p| {
        let span = p.span();
        let host = host(p)?;
        let lower = host.to_ascii_lowercase();
        // DNS names compare case-insensitively.
        refuse_repeat(&mut seen, &lower, span, || {
            format!("host {host} is listed twice")
        })?;
        Ok(host)
    })?;
    let tls = if p.eat_keyword("WITH") {
        p.expect_keyword("TLS")?;
        Some(mount(p)?)
    } else {
        None
    };
    Ok(CatalogStmt::CreateVhost(CreateVhost {
        if_not_exists,
        name,
        hosts,
        tls,
    }))
}

/// A host name: words joined by `.` with no spaces (`api.example.com`, `localhost`), or a
/// string for any other DNS name (`'my-api.example.com'`).
fn host(p: &mut Parser) -> PResult<String> {
    let start = p.span();
    if p.at_string() {
        let host = p.string()?;
        check_host(&host, start)?;
        return Ok(host);
    }
    p.note(Expected::Thing("a host name"));
    if p.peek().kind != TokenKind::Word {
        return Err(p.unexpected());
    }
    let first = p.advance();
    let mut host = p.text(&first).to_string();
    let mut end = first.span.end;
    loop {
        let next = p.peek().clone();
        if next.span.start != end {
            break;
        }
        let label = p.peek_at(1).clone();
        let joined = next.kind == TokenKind::Punct(Punct::Dot)
            && label.kind == TokenKind::Word
            && label.span.start == next.span.end;
        if joined {
            host.push('.');
            host.push_str(p.text(&label));
            end = label.span.end;
            p.advance();
            p.advance();
            continue;
        }
        if next.kind == TokenKind::Punct(Punct::Dot) && label.kind == TokenKind::Word {
            return Err(p.error_at(
                label.span,
                "a host name is written without spaces around `.`",
            ));
        }
        // Anything else glued to the name (`-`, a digit, a trailing `.`) needs the quoted form.
        if !matches!(
            next.kind,
            TokenKind::Punct(Punct::Comma | Punct::Semicolon) | TokenKind::Eof
        ) {
            // Show the whole glued text quoted, as the user should write it.
            let mut written = host.clone();
            let mut i = 0;
            let mut at = end;
            loop {
                let token = p.peek_at(i);
                let stop = matches!(
                    token.kind,
                    TokenKind::Punct(Punct::Comma | Punct::Semicolon) | TokenKind::Eof
                );
                if stop || token.span.start != at {
                    break;
                }
                written.push_str(p.text(token));
                at = token.span.end;
                i += 1;
            }
            return Err(p.error_at(
                next.span,
                format!(
                    "a bare host name is words joined by `.`; quote any other host name: {}",
                    crate::render::quote(&written)
                ),
            ));
        }
        break;
    }
    if p.peek().kind == TokenKind::Punct(Punct::Dot) {
        return Err(p.error_at(p.span(), "a host name is written without spaces around `.`"));
    }
    check_host(&host, start.to(p.prev_span()))?;
    Ok(host)
}

/// Refuses a host that is not a DNS name: labels of letters, digits and `-` (not first or
/// last), at most 63 characters each and 253 in all.
fn check_host(host: &str, span: Span) -> PResult<()> {
    let bad = |why: &str| {
        Err(ParseError::new(
            span,
            format!("'{host}' is not a host name: {why}"),
        ))
    };
    if host.is_empty() {
        return bad("it is empty");
    }
    if host.len() > MAX_HOST_LEN {
        return bad("it is longer than 253 characters");
    }
    for label in host.split('.') {
        if label.is_empty() {
            return bad("it has an empty label");
        }
        if label.len() > MAX_LABEL_LEN {
            return bad("a label is longer than 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return bad("labels hold only letters, digits and `-`");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return bad("a label cannot start or end with `-`");
        }
    }
    Ok(())
}

// ----- endpoints -----

/// `CREATE ENDPOINT e ON v PATH '/p' TYPE HTTP|WEBSOCKETS [WITH SIGNALING PROTOCOL p]`.
pub fn create_endpoint(p: &mut Parser, if_not_exists: bool) -> PResult<CatalogStmt> {
    let name = new_name(p)?;
    p.expect_keyword("ON")?;
    let vhost = p.ident(NameKind::Existing(ObjectKind::Vhost))?;
    p.expect_keyword("PATH")?;
    let span = p.span();
    let path = p.string()?;
    if !path.starts_with('/') {
        return Err(p.error_at(span, format!("PATH must start with `/`, such as '/{path}'")));
    }
    p.expect_keyword("TYPE")?;
    let endpoint_type = choice(
        p,
        None,
        &[
            ("HTTP", EndpointType::Http),
            ("WEBSOCKETS", EndpointType::Websockets),
        ],
    )?;
    let signaling_protocol = match endpoint_type {
        EndpointType::Websockets if p.eat_keyword("WITH") => {
            p.expect_keywords(&["SIGNALING", "PROTOCOL"])?;
            Some(p.ident(NameKind::Existing(ObjectKind::SignalingProtocol))?)
        }
        EndpointType::Http if p.is_keyword_at(0, "WITH") => {
            return Err(p.error_at(
                p.span(),
                "WITH SIGNALING PROTOCOL is only for TYPE WEBSOCKETS endpoints, not TYPE HTTP",
            ));
        }
        _ => None,
    };
    Ok(CatalogStmt::CreateEndpoint(CreateEndpoint {
        if_not_exists,
        name,
        vhost,
        path,
        endpoint_type,
        signaling_protocol,
    }))
}

// ----- resources -----

/// `CREATE RESOURCE r` after `RESOURCE`.
pub fn create_resource(p: &mut Parser, if_not_exists: bool) -> PResult<CatalogStmt> {
    let name = new_name(p)?;
    Ok(CatalogStmt::CreateResource(CreateResource {
        if_not_exists,
        name,
    }))
}

fn resource_name(p: &mut Parser) -> PResult<Ident> {
    p.expect_keyword("RESOURCE")?;
    p.ident(NameKind::Existing(ObjectKind::Resource))
}

/// `RESOURCE r FROM '<dir>'` after `UPLOAD`.
pub fn upload_resource(p: &mut Parser) -> PResult<CatalogStmt> {
    let resource = resource_name(p)?;
    p.expect_keyword("FROM")?;
    let path = non_empty_string(p, "the upload directory")?;
    Ok(CatalogStmt::UploadResource { resource, path })
}

/// `RESOURCE r TO VERSION n|LATEST [FOR VHOST v, …]` after `REBIND`.
pub fn rebind_resource(p: &mut Parser) -> PResult<CatalogStmt> {
    let resource = resource_name(p)?;
    p.expect_keyword("TO")?;
    let version = p.resource_version()?;
    let mut vhosts = Vec::new();
    if p.eat_keyword("FOR") {
        p.expect_keyword("VHOST")?;
        let mut seen = Vec::new();
        vhosts = p.comma_list(|p| {
            let vhost = p.ident(NameKind::Existing(ObjectKind::Vhost))?;
            refuse_repeat(&mut seen, &vhost.name, vhost.span, || {
                format!("vhost `{vhost}` is listed twice")
            })?;
            Ok(vhost)
        })?;
    }
    Ok(CatalogStmt::RebindResource(RebindResource {
        resource,
        version,
        vhosts,
    }))
}
