use super::*;

/// A tar archive of `(path, entry type, contents)` written header by header, so tests can
/// build what no well-behaved packer would (`..`, absolute paths, links, duplicates).
fn archive(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, kind, data) in entries {
        let mut header = tar::Header::new_ustar();
        header.as_mut_bytes()[..100].fill(0);
        header.as_mut_bytes()[..path.len()].copy_from_slice(path.as_bytes());
        header.set_entry_type(*kind);
        header.set_mode(0o644);
        header.set_size(data.len() as u64);
        if *kind == tar::EntryType::Symlink {
            header.set_link_name("/etc/passwd").expect("link name");
        }
        header.set_cksum();
        builder.append(&header, *data).expect("append");
    }
    builder.into_inner().expect("finish")
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nervix-bundle-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn refusal(entries: &[(&str, tar::EntryType, &[u8])]) -> String {
    let dir = scratch("refusal");
    let error = unpack_archive(&archive(entries), &dir).expect_err("refused");
    let _ = fs::remove_dir_all(&dir);
    error.to_string()
}

const FILE: tar::EntryType = tar::EntryType::Regular;

#[test]
fn nested_files_unpack_and_list_sorted() {
    let dir = scratch("nested");
    let files = unpack_archive(
        &archive(&[
            ("certs/", tar::EntryType::Directory, b""),
            ("certs/ca.pem", FILE, b"ca"),
            ("./b.txt", FILE, b"bee"),
            ("a/deep/er/x", FILE, b""),
        ]),
        &dir,
    )
    .expect("unpacks");
    assert_eq!(
        files,
        [
            ("a/deep/er/x".to_string(), 0),
            ("b.txt".to_string(), 3),
            ("certs/ca.pem".to_string(), 2),
        ]
    );
    assert_eq!(fs::read(dir.join("certs/ca.pem")).expect("file"), b"ca");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn unsafe_entries_are_refused_by_name() {
    let parent = refusal(&[("ok", FILE, b"1"), ("a/../../evil", FILE, b"x")]);
    assert_eq!(
        parent,
        "entry 'a/../../evil': holds '..': entries must stay inside the resource"
    );
    let absolute = refusal(&[("/etc/cron.d/x", FILE, b"x")]);
    assert!(
        absolute.contains("'/etc/cron.d/x': is an absolute path"),
        "{absolute}"
    );
    let link = refusal(&[("link", tar::EntryType::Symlink, b"")]);
    assert!(link.contains("'link': is a symbolic link"), "{link}");
    let hard = refusal(&[("hard", tar::EntryType::Link, b"")]);
    assert!(hard.contains("'hard': is a hard link"), "{hard}");
    let device = refusal(&[("dev", tar::EntryType::Char, b"")]);
    assert!(device.contains("'dev': is a device"), "{device}");
    let fifo = refusal(&[("pipe", tar::EntryType::Fifo, b"")]);
    assert!(fifo.contains("'pipe': is a FIFO"), "{fifo}");
    let twice = refusal(&[("a/x", FILE, b"1"), ("a//x", FILE, b"2")]);
    assert_eq!(twice, "entry 'a//x': is given twice");
    let under = refusal(&[("a", FILE, b"1"), ("a/x", FILE, b"2")]);
    assert_eq!(under, "entry 'a/x': lies under 'a', which is a file");
    let dir_then_file = refusal(&[("a/x", FILE, b"1"), ("a", FILE, b"2")]);
    assert_eq!(dir_then_file, "entry 'a': is given twice");
    assert_eq!(refusal(&[]), "the archive holds no files");
    let empty_name = refusal(&[("./", FILE, b"1")]);
    assert_eq!(empty_name, "entry './': has an empty path");
}

#[test]
fn bounds_hold() {
    let dir = scratch("bounds");
    let over = vec![0u8; MAX_RESOURCE_UPLOAD_BYTES as usize + 1];
    assert!(matches!(
        unpack_archive(&over, &dir),
        Err(BundleError::TooLarge(_))
    ));
    let names: Vec<String> = (0..=MAX_RESOURCE_FILES).map(|i| format!("f{i}")).collect();
    let entries: Vec<(&str, tar::EntryType, &[u8])> =
        names.iter().map(|n| (n.as_str(), FILE, &b""[..])).collect();
    assert!(matches!(
        unpack_archive(&archive(&entries), &dir),
        Err(BundleError::TooManyFiles)
    ));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn garbage_is_not_an_archive() {
    let dir = scratch("garbage");
    let error = unpack_archive(&[7u8; 1024], &dir).expect_err("garbage");
    assert!(matches!(error, BundleError::Malformed(_)), "{error}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn packing_round_trips_and_refuses_links() {
    let source = scratch("pack-source");
    fs::create_dir_all(source.join("x/y")).expect("dirs");
    fs::write(source.join("top.txt"), b"top").expect("file");
    let long = "n".repeat(150);
    fs::write(source.join("x/y").join(&long), b"long name").expect("file");
    let archive = pack_directory(&source).expect("packs");
    let target = scratch("pack-target");
    let files = unpack_archive(&archive, &target).expect("unpacks");
    assert_eq!(
        files,
        [("top.txt".to_string(), 3), (format!("x/y/{long}"), 9)]
    );
    assert_eq!(
        fs::read(target.join("x/y").join(&long)).expect("file"),
        b"long name"
    );
    std::os::unix::fs::symlink("/etc/passwd", source.join("x/link")).expect("symlink");
    let error = pack_directory(&source).expect_err("links are refused");
    assert_eq!(
        error.to_string(),
        "entry 'x/link': is a symbolic link: a resource holds regular files only"
    );
    let _ = fs::remove_dir_all(&source);
    let _ = fs::remove_dir_all(&target);
}

#[test]
fn a_failed_install_leaves_no_version_and_a_good_one_replaces_leftovers() {
    let dir = scratch("install");
    let failed: Result<(), BundleError> = install_version(&dir, 1, |staging| {
        fs::write(staging.join("half"), b"x").expect("write");
        Err(BundleError::Empty)
    });
    assert!(failed.is_err());
    assert_eq!(fs::read_dir(&dir).expect("dir").count(), 0);
    fs::create_dir_all(dir.join("1/stale")).expect("leftover version");
    fs::create_dir_all(dir.join(".staging-1-0-0")).expect("leftover staging");
    install_version::<_, BundleError>(&dir, 1, |staging| {
        fs::write(staging.join("fresh"), b"y").map_err(BundleError::io(staging))
    })
    .expect("installs");
    let names: Vec<String> = fs::read_dir(&dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["1"]);
    assert!(dir.join("1/fresh").is_file() && !dir.join("1/stale").exists());
    let _ = fs::remove_dir_all(&dir);
}
