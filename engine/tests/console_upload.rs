//! UPLOAD RESOURCE end to end: a real `nervix serve`, the real `nervix console -c` packing a
//! directory on the client into `\upload`, and raw protocol sessions sending archives no
//! well-behaved client would.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use nervix::control::bundle::MAX_RESOURCE_UPLOAD_BYTES;
use support::{Node, ADMIN_PASSWORD};

/// What `nervix console` printed and how it exited.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn console(node: &Node, user: &str, password: &str, script: &str) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_nervix"))
        .args([
            "console",
            "--addr",
            &node.console.to_string(),
            "--user",
            user,
        ])
        .args(["-c", script])
        .env("NERVIX_PASSWORD", password)
        .output()
        .expect("nervix console runs");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn upload_statement(resource: &str, dir: &Path) -> String {
    format!("UPLOAD RESOURCE {resource} FROM '{}';", dir.display())
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("dirs");
    std::fs::write(path, bytes).expect("file");
}

/// Every regular file under `dir`, relative, with its bytes, sorted.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).expect("readable dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir).expect("under dir");
                let bytes = std::fs::read(&path).expect("readable file");
                files.push((relative.to_string_lossy().into_owned(), bytes));
            }
        }
    }
    files.sort();
    files
}

/// The names in `<data dir>/resources/<resource>`, sorted (none when it does not exist).
fn stored_versions(node: &Node, resource: &str) -> Vec<String> {
    let dir = node.data_dir.join("resources").join(resource);
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A console connection speaking the protocol byte for byte, as `nc` would.
struct Raw {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Raw {
    fn signed_in(node: &Node, user: &str, password: &str) -> Raw {
        let stream = TcpStream::connect(node.console).expect("console accepts");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let writer = stream.try_clone().expect("clone");
        let mut raw = Raw {
            reader: BufReader::new(stream),
            writer,
        };
        raw.line();
        raw.send(format!("\\auth {user} {password}\n").as_bytes());
        assert_eq!(raw.answer().last().map(String::as_str), Some("OK"));
        raw
    }

    fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("send");
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).expect("a line");
        assert!(n > 0, "the console closed the connection");
        line.trim_end().to_owned()
    }

    /// Lines up to and including the status line.
    fn answer(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            let line = self.line();
            let done = line == "OK" || line.starts_with("ERROR");
            lines.push(line);
            if done {
                return lines;
            }
        }
    }

    /// `\upload <resource> <len>` and the archive; the status line.
    fn upload(&mut self, resource: &str, archive: &[u8]) -> String {
        let mut bytes = format!("\\upload {resource} {}\n", archive.len()).into_bytes();
        bytes.extend_from_slice(archive);
        self.send(&bytes);
        self.answer().pop().expect("a status line")
    }
}

/// A tar archive of one entry with a raw `name` and `kind`, as a hostile client would write.
fn hostile_archive(name: &str, kind: tar::EntryType) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_ustar();
    header.as_mut_bytes()[..name.len()].copy_from_slice(name.as_bytes());
    header.set_entry_type(kind);
    header.set_mode(0o644);
    header.set_size(4);
    if kind == tar::EntryType::Symlink {
        header.set_size(0);
        header.set_link_name("/etc/shadow").expect("link name");
    }
    header.set_cksum();
    let data: &[u8] = if kind == tar::EntryType::Symlink {
        b""
    } else {
        b"evil"
    };
    builder.append(&header, data).expect("append");
    builder.into_inner().expect("archive")
}

#[test]
fn client_directories_upload_as_numbered_versions_byte_for_byte() {
    let node = Node::start(&support::scratch_dir("upload-node"));
    let sources = support::scratch_dir("upload-sources");
    let mut admin = node.admin();
    admin.ok("CREATE RESOURCE tls_bundle;");
    admin.ok("CREATE USER ops WITH PASSWORD 'ops-secret' ROLE OPERATOR;");

    let v1 = sources.join("v1");
    write(&v1.join("ca.pem"), b"-----BEGIN CERTIFICATE-----\nv1\n");
    write(
        &v1.join("keys/server/key.pem"),
        &(0..=255u8).collect::<Vec<u8>>(),
    );
    write(&v1.join("keys/empty"), b"");
    let run = console(
        &node,
        "admin",
        ADMIN_PASSWORD,
        &upload_statement("tls_bundle", &v1),
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(
        run.stdout.trim(),
        "resource 'tls_bundle' version 1: 3 file(s)"
    );

    // Version 2, by an OPERATOR, from a script whose other statements still run as text.
    let v2 = sources.join("v2");
    write(&v2.join("ca.pem"), b"-----BEGIN CERTIFICATE-----\nv2\n");
    write(&v2.join("deep/er/still/chain.pem"), &vec![b'x'; 200_000]);
    let script = format!(
        "SHOW RESOURCES;\n{}\nSHOW RESOURCES;",
        upload_statement("tls_bundle", &v2)
    );
    let run = console(&node, "ops", "ops-secret", &script);
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(
        run.stdout.lines().collect::<Vec<_>>(),
        [
            "tls_bundle versions=1 latest=1",
            "resource 'tls_bundle' version 2: 2 file(s)",
            "tls_bundle versions=1,2 latest=2",
        ]
    );

    assert_eq!(
        admin.ok("DESCRIBE RESOURCE tls_bundle;"),
        [
            "name: tls_bundle".to_string(),
            "version 1: ca.pem (31 B), keys/empty (0 B), keys/server/key.pem (256 B)".into(),
            "version 2: ca.pem (31 B), deep/er/still/chain.pem (200000 B)".into(),
        ]
    );
    let stored = node.data_dir.join("resources").join("tls_bundle");
    assert_eq!(tree(&stored.join("1")), tree(&v1));
    assert_eq!(tree(&stored.join("2")), tree(&v2));
    assert_eq!(stored_versions(&node, "tls_bundle"), ["1", "2"]);

    // A raw session's statement still names a directory on the node.
    admin.ok(&upload_statement("tls_bundle", &v1));
    assert_eq!(tree(&stored.join("3")), tree(&v1));
    let _ = std::fs::remove_dir_all(&sources);
}

#[test]
fn bad_uploads_are_refused_clearly_and_leave_no_version() {
    let node = Node::start(&support::scratch_dir("refusal-node"));
    let sources = support::scratch_dir("refusal-sources");
    let mut admin = node.admin();
    admin.ok("CREATE RESOURCE bundle;");
    admin.ok("CREATE USER viewer WITH PASSWORD 'viewer-secret' ROLE READER;");

    // A symbolic link in the directory: refused by the client, naming it, at the statement.
    let linked = sources.join("linked");
    write(&linked.join("ok.pem"), b"fine");
    std::os::unix::fs::symlink("/etc/passwd", linked.join("passwd")).expect("symlink");
    let script = format!("SHOW RESOURCES;\n  {}", upload_statement("bundle", &linked));
    let run = console(&node, "admin", ADMIN_PASSWORD, &script);
    assert_eq!(run.code, Some(2));
    assert_eq!(
        run.stderr.trim(),
        format!(
            "ERROR 2:3 cannot upload '{}': entry 'passwd': is a symbolic link: a resource holds regular files only",
            linked.display()
        )
    );

    // A path that is a file, not a directory.
    let file = sources.join("ca.pem");
    write(&file, b"pem");
    let run = console(
        &node,
        "admin",
        ADMIN_PASSWORD,
        &upload_statement("bundle", &file),
    );
    assert_eq!(run.code, Some(2));
    assert_eq!(
        run.stderr.trim(),
        format!(
            "ERROR 1:1 cannot upload '{}': it is not a directory on this machine",
            file.display()
        )
    );

    // An archive over the bound: the client refuses before sending, the node on the header.
    let big = sources.join("big");
    write(
        &big.join("blob"),
        &vec![0u8; MAX_RESOURCE_UPLOAD_BYTES as usize],
    );
    let run = console(
        &node,
        "admin",
        ADMIN_PASSWORD,
        &upload_statement("bundle", &big),
    );
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr
            .contains("an upload holds at most 33554432 bytes of archive"),
        "{}",
        run.stderr
    );
    let mut raw = Raw::signed_in(&node, "admin", ADMIN_PASSWORD);
    raw.send(format!("\\upload bundle {}\n", MAX_RESOURCE_UPLOAD_BYTES + 1).as_bytes());
    assert_eq!(
        raw.answer(),
        [format!(
            "ERROR 1:1 an upload holds at most 33554432 bytes of archive; this one announces {}: its bytes are skipped",
            MAX_RESOURCE_UPLOAD_BYTES + 1
        )]
    );

    // Hostile archives, straight over the protocol.
    let mut raw = Raw::signed_in(&node, "admin", ADMIN_PASSWORD);
    assert_eq!(
        raw.upload("bundle", &hostile_archive("a/../../escape", tar::EntryType::Regular)),
        "ERROR 1:1 cannot upload to resource 'bundle': entry 'a/../../escape': holds '..': entries must stay inside the resource"
    );
    assert_eq!(
        raw.upload("bundle", &hostile_archive("link", tar::EntryType::Symlink)),
        "ERROR 1:1 cannot upload to resource 'bundle': entry 'link': is a symbolic link: a resource holds regular files only"
    );
    assert_eq!(
        raw.upload("bundle", &hostile_archive("/etc/x", tar::EntryType::Regular)),
        "ERROR 1:1 cannot upload to resource 'bundle': entry '/etc/x': is an absolute path: entries must be relative"
    );
    assert_eq!(
        raw.upload("bundle", b"not a tar archive at all"),
        "ERROR 1:1 cannot upload to resource 'bundle': the archive is not a valid tar archive: failed to read entire block"
    );
    assert_eq!(
        raw.upload("nothing", &hostile_archive("ok", tar::EntryType::Regular)),
        "ERROR 1:1 resource 'nothing' does not exist: CREATE RESOURCE nothing first"
    );
    // The connection is still in step.
    raw.send(b"SHOW RESOURCES;\n");
    assert_eq!(raw.answer(), ["  bundle versions=none latest=none", "OK"]);

    // A READER may not upload: refused before a byte of the archive is kept.
    let ok = sources.join("ok");
    write(&ok.join("ca.pem"), b"pem");
    let run = console(
        &node,
        "viewer",
        "viewer-secret",
        &upload_statement("bundle", &ok),
    );
    assert_eq!(run.code, Some(2));
    assert_eq!(
        run.stderr.trim(),
        "ERROR 1:1 role READER may only run SHOW, DESCRIBE and USE"
    );
    let mut reader = Raw::signed_in(&node, "viewer", "viewer-secret");
    assert_eq!(
        reader.upload("bundle", &hostile_archive("ok", tar::EntryType::Regular)),
        "ERROR 1:1 role READER may only run SHOW, DESCRIBE and USE"
    );
    reader.send(b"SHOW RESOURCES;\n");
    assert_eq!(
        reader.answer(),
        ["  bundle versions=none latest=none", "OK"]
    );

    assert_eq!(
        admin.ok("DESCRIBE RESOURCE bundle;"),
        ["name: bundle".to_string()]
    );
    assert!(
        stored_versions(&node, "bundle").is_empty(),
        "{:?}",
        stored_versions(&node, "bundle")
    );

    // And a good upload afterwards is version 1.
    let run = console(
        &node,
        "admin",
        ADMIN_PASSWORD,
        &upload_statement("bundle", &ok),
    );
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(run.stdout.trim(), "resource 'bundle' version 1: 1 file(s)");
    assert_eq!(stored_versions(&node, "bundle"), ["1"]);
    let _ = std::fs::remove_dir_all(&sources);
}
