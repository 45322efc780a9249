//! Tests of the store: host slugs as Python parses hosts, atomic symlink-refusing writes, the cap.

use std::os::unix::fs::symlink;

use super::*;

fn sha10(url: &str) -> String {
    hex::encode(Sha256::digest(url.as_bytes()))[..10].to_owned()
}

#[test]
fn host_slug_follows_python_hostname_parsing() {
    let cases: &[(&str, &str, &str)] = &[
        ("a plain host", "https://example.com/a?b#c", "example.com"),
        (
            "hosts are lowercased",
            "https://WWW.Example.COM/",
            "www.example.com",
        ),
        ("the port is dropped", "http://e.com:8080/x", "e.com"),
        ("userinfo is dropped", "https://user:pw@e.com/", "e.com"),
        ("the last @ splits userinfo", "https://a@b@e.com/", "e.com"),
        (
            "an ipv6 literal keeps its colons as _",
            "http://[::1]:8080/",
            "__1",
        ),
        (
            "an ipv6 scope id keeps its case",
            "http://[fe80::1%25Eth0]/",
            "fe80__1-25Eth0",
        ),
        (
            "no scheme and no // has no host",
            "example.com/path",
            "page",
        ),
        (
            "a scheme-relative url has a host",
            "//cdn.example/x",
            "cdn.example",
        ),
        ("an empty host is page", "https:///path", "page"),
        ("a file url has no host", "file:///etc/passwd", "page"),
        (
            "non-ascii becomes dashes",
            "https://bücher.de/",
            "b-cher.de",
        ),
        (
            "leading and trailing dashes are trimmed",
            "https://-a-/",
            "a",
        ),
        (
            "underscores and dots survive",
            "https://a_b.c-d/",
            "a_b.c-d",
        ),
        (
            "tabs and newlines are removed first",
            "ht\ttps://e\n.com/",
            "e.com",
        ),
        (
            "leading control characters are stripped",
            "\u{1} https://e.com/",
            "e.com",
        ),
        ("a bad scheme char leaves no host", "ht*tp://e.com/", "page"),
        (
            "a query right after the host ends it",
            "https://e.com?q=1",
            "e.com",
        ),
        (
            "a fragment right after the host ends it",
            "https://e.com#frag",
            "e.com",
        ),
        (
            "the host is cut to 60 characters",
            "https://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com/",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ),
        (
            "a cut ending in dashes is trimmed",
            "https://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa---b.com/",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ),
        ("an ipvfuture literal passes", "http://[v1.fe]/", "v1.fe"),
    ];
    for (name, url, want) in cases {
        assert_eq!(host_slug(url), *want, "{name}: {url}");
    }
}

#[test]
fn urls_python_refuses_to_parse_fail_the_store() {
    let cases: &[(&str, &str)] = &[
        ("an unclosed bracket", "http://[::1/"),
        ("a stray closing bracket", "http://e.com]/"),
        ("an ipv4 address in brackets", "http://[127.0.0.1]/"),
        ("a bracketed name", "http://[example.com]/"),
        ("a bad ipvfuture", "http://[vz.x]/"),
        ("an empty scope id", "http://[fe80::1%]/"),
    ];
    for (name, url) in cases {
        assert!(
            matches!(try_host_slug(url), Err(StoreError::InvalidUrl { .. })),
            "{name} must not yield a file name"
        );
        assert_eq!(
            host_slug(url),
            "page",
            "{name}: the infallible form must fall back to page"
        );
    }
}

#[test]
fn seed_9_names_the_file_by_slug_and_ten_hex_of_the_url() {
    let url = "https://Docs.Example.com/guide?x=1";
    let name = Store::file_name(url).expect("a normal url must have a file name");
    assert_eq!(
        name,
        format!("docs.example.com-{}.md", sha10(url)),
        "the name must be slug-sha10.md"
    );
    // The digest covers the url exactly as given, not the lowercased host.
    assert_ne!(
        name,
        Store::file_name("https://docs.example.com/guide?x=1").expect("valid"),
        "digest input"
    );
}

#[test]
fn a_write_creates_the_store_directory_and_the_file() {
    let root = tempfile::tempdir().expect("a temp dir must be creatable");
    let store = Store::new(root.path(), None);
    let path = store
        .write("https://e.com/a", "full text\n")
        .expect("the write must succeed");
    assert_eq!(
        path,
        root.path()
            .join("store")
            .join(format!("e.com-{}.md", sha10("https://e.com/a"))),
        "path"
    );
    assert_eq!(
        fs::read_to_string(&path).expect("readable"),
        "full text\n",
        "the content must be exact"
    );
    let leftovers: Vec<_> = fs::read_dir(store.dir()).expect("listable").collect();
    assert_eq!(leftovers.len(), 1, "no temporary file may be left behind");
}

#[test]
fn a_second_write_replaces_the_first() {
    let root = tempfile::tempdir().expect("a temp dir must be creatable");
    let store = Store::new(root.path(), None);
    store
        .write("https://e.com/a", "old old old")
        .expect("first write");
    let path = store.write("https://e.com/a", "new").expect("second write");
    assert_eq!(
        fs::read_to_string(path).expect("readable"),
        "new",
        "the newer copy must win"
    );
}

#[test]
fn the_footer_path_is_mapped_to_the_agent_visible_root() {
    let root = tempfile::tempdir().expect("a temp dir must be creatable");
    let store = Store::new(root.path(), Some(Path::new("/opt/data/cache/fleetgate")));
    let path = store
        .write("https://e.com/a", "x")
        .expect("the write must succeed");
    let want = format!(
        "/opt/data/cache/fleetgate/store/e.com-{}.md",
        sha10("https://e.com/a")
    );
    assert_eq!(
        path,
        PathBuf::from(want),
        "the returned path must be the agent's view"
    );
    let host_copy = root
        .path()
        .join("store")
        .join(path.file_name().expect("a file name"));
    assert!(
        host_copy.is_file(),
        "the file itself must be under the gate's root"
    );
}

#[test]
fn a_symlink_at_the_target_is_replaced_and_its_target_untouched() {
    let root = tempfile::tempdir().expect("a temp dir must be creatable");
    let victim = root.path().join("victim.txt");
    fs::write(&victim, "precious").expect("the victim must be writable");
    let store = Store::new(root.path(), None);
    fs::create_dir_all(store.dir()).expect("the store dir must be creatable");
    let name = Store::file_name("https://e.com/a").expect("a file name");
    symlink(&victim, store.dir().join(&name)).expect("the planted link must be creatable");

    let path = store
        .write("https://e.com/a", "page text")
        .expect("the write must succeed");
    assert_eq!(
        fs::read_to_string(&victim).expect("readable"),
        "precious",
        "the link target must be untouched"
    );
    let meta = fs::symlink_metadata(&path).expect("the stored file must exist");
    assert!(
        meta.file_type().is_file(),
        "the link must have been replaced by a regular file"
    );
    assert_eq!(
        fs::read_to_string(&path).expect("readable"),
        "page text",
        "the new content must be there"
    );
}

#[test]
fn a_symlinked_store_directory_is_refused() {
    let root = tempfile::tempdir().expect("a temp dir must be creatable");
    let elsewhere = tempfile::tempdir().expect("a second temp dir must be creatable");
    symlink(elsewhere.path(), root.path().join("store"))
        .expect("the planted link must be creatable");
    let store = Store::new(root.path(), None);
    let err = store
        .write("https://e.com/a", "x")
        .expect_err("a symlinked store dir must be refused");
    assert!(
        matches!(err, StoreError::NotADirectory { .. }),
        "the error must say why: {err}"
    );
    assert_eq!(
        fs::read_dir(elsewhere.path()).expect("listable").count(),
        0,
        "nothing may land behind the link"
    );
}

#[test]
fn a_directory_at_the_target_fails_the_write_and_leaves_no_temp_file() {
    let root = tempfile::tempdir().expect("a temp dir must be creatable");
    let store = Store::new(root.path(), None);
    let name = Store::file_name("https://e.com/a").expect("a file name");
    fs::create_dir_all(store.dir().join(&name)).expect("the blocking dir must be creatable");
    let err = store
        .write("https://e.com/a", "x")
        .expect_err("a directory must not be overwritten");
    assert!(
        matches!(err, StoreError::Rename { .. }),
        "the rename must be what fails: {err}"
    );
    assert!(
        err.to_string().starts_with("failed to "),
        "messages must start with 'failed to'"
    );
    assert_eq!(
        fs::read_dir(store.dir()).expect("listable").count(),
        1,
        "the temp file must be removed"
    );
}

#[test]
fn content_over_two_million_characters_is_capped_with_the_note() {
    let root = tempfile::tempdir().expect("a temp dir must be creatable");
    let store = Store::new(root.path(), None);
    // Multibyte characters: the cap counts characters, not bytes.
    let content = "é".repeat(MAX_STORED_CHARS + 1_234);
    let path = store
        .write("https://e.com/big", &content)
        .expect("the write must succeed");
    let stored = fs::read_to_string(path).expect("readable");
    let note = "\n\n[... stored copy truncated at 2,000,000 chars of 2,001,234; re-extract a more specific URL for the rest ...]";
    assert!(stored.ends_with(note), "the cap note must be Hermes' text");
    assert_eq!(
        stored.chars().count(),
        MAX_STORED_CHARS + note.chars().count(),
        "exactly the cap must be kept"
    );
}

#[test]
fn content_at_exactly_two_million_characters_is_not_capped() {
    let root = tempfile::tempdir().expect("a temp dir must be creatable");
    let store = Store::new(root.path(), None);
    let content = "ü".repeat(MAX_STORED_CHARS);
    let path = store
        .write("https://e.com/edge", &content)
        .expect("the write must succeed");
    assert_eq!(
        fs::read_to_string(path).expect("readable"),
        content,
        "the page must be stored whole"
    );
}

#[test]
fn an_identical_stored_copy_is_left_in_place_and_a_changed_one_is_replaced() {
    use std::os::unix::fs::MetadataExt;
    let root = tempfile::tempdir().expect("temp dir");
    let store = Store::new(root.path(), None);
    let url = "https://docs.example/page";
    let path = store
        .write(url, "same text")
        .expect("first write must succeed");
    let first = std::fs::metadata(&path).expect("stored file").ino();
    store
        .write(url, "same text")
        .expect("second write must succeed");
    assert_eq!(
        std::fs::metadata(&path).expect("stored file").ino(),
        first,
        "an identical copy must not be rewritten"
    );
    store
        .write(url, "new text")
        .expect("third write must succeed");
    assert_ne!(
        std::fs::metadata(&path).expect("stored file").ino(),
        first,
        "a change is a new file"
    );
    assert_eq!(
        std::fs::read_to_string(&path).expect("readable"),
        "new text"
    );
}

/// A time by which every file a test just wrote has settled.
fn later() -> SystemTime {
    SystemTime::now() + Duration::from_secs(60)
}

fn remembered(store: &Store) -> usize {
    store
        .verified
        .inner
        .lock()
        .expect("unpoisoned")
        .copies
        .len()
}

#[test]
fn a_verified_copy_is_remembered_and_a_repeat_does_not_read_the_file() {
    let root = tempfile::tempdir().expect("temp dir");
    let store = Store::new(root.path(), None);
    let url = "https://docs.example/page";
    let path = store
        .write_at(url, "same text", later())
        .expect("first write");
    assert_eq!(remembered(&store), 0, "a write is not a verification");
    store
        .write_at(url, "same text", later())
        .expect("second write");
    assert_eq!(
        remembered(&store),
        1,
        "a settled, verified copy is remembered"
    );
    // Swap the remembered text for another of the same length: a repeat that trusts the memo
    // leaves the file alone; one that read the file would find it differs and rewrite it.
    {
        let mut inner = store.verified.inner.lock().expect("unpoisoned");
        let (_, text, _) = inner
            .copies
            .get_mut(
                &root
                    .path()
                    .join("store")
                    .join(path.file_name().expect("name")),
            )
            .expect("the copy under the gate's path");
        *text = Arc::from("SAME TEXT");
    }
    store
        .write_at(url, "SAME TEXT", later())
        .expect("third write");
    assert_eq!(
        fs::read_to_string(&path).expect("readable"),
        "same text",
        "a remembered copy still in place must not be read or rewritten"
    );
}

#[test]
fn a_fresh_copy_is_not_remembered() {
    let root = tempfile::tempdir().expect("temp dir");
    let store = Store::new(root.path(), None);
    let url = "https://docs.example/page";
    store.write(url, "same text").expect("first write");
    store.write(url, "same text").expect("second write");
    assert_eq!(
        remembered(&store),
        0,
        "a copy changed within the last second may change again unseen (racily clean)"
    );
}

#[test]
fn a_remembered_copy_replaced_changed_or_removed_on_the_volume_is_written_again() {
    use std::os::unix::fs::MetadataExt;
    let root = tempfile::tempdir().expect("temp dir");
    let store = Store::new(root.path(), None);
    let url = "https://docs.example/page";
    let verify = |why: &str| {
        store.write_at(url, "page text", later()).expect("a write");
        store.write_at(url, "page text", later()).expect("a repeat");
        assert_eq!(remembered(&store), 1, "{why}: verified and remembered");
    };
    verify("first");
    let path = store.write_at(url, "page text", later()).expect("a hit");

    // Another pod renames its own copy (same length, other text) over the file.
    let other = root.path().join("other.md");
    fs::write(&other, "PAGE TEXT").expect("writable");
    fs::rename(&other, &path).expect("renamable");
    store
        .write_at(url, "page text", later())
        .expect("after a replace");
    assert_eq!(
        fs::read_to_string(&path).expect("readable"),
        "page text",
        "replaced"
    );

    // Someone rewrites the file in place, same length, mtime put back.
    verify("second");
    let before = fs::metadata(&path).expect("stat");
    std::thread::sleep(Duration::from_millis(20));
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut f| f.write_all(b"PAGE TEXT"))
        .expect("rewritable in place");
    File::options()
        .write(true)
        .open(&path)
        .and_then(|f| f.set_modified(before.modified().expect("mtime")))
        .expect("mtime restorable");
    let after = fs::metadata(&path).expect("stat");
    assert_eq!(
        (after.ino(), after.len(), after.mtime()),
        (before.ino(), before.len(), before.mtime())
    );
    store
        .write_at(url, "page text", later())
        .expect("after a rewrite");
    assert_eq!(
        fs::read_to_string(&path).expect("readable"),
        "page text",
        "rewritten in place"
    );

    // The file is removed.
    verify("third");
    fs::remove_file(&path).expect("removable");
    store
        .write_at(url, "page text", later())
        .expect("after a removal");
    assert_eq!(
        fs::read_to_string(&path).expect("readable"),
        "page text",
        "removed"
    );
}

#[test]
fn a_remembered_copy_does_not_hide_a_symlinked_store_directory() {
    let root = tempfile::tempdir().expect("temp dir");
    let store = Store::new(root.path(), None);
    let url = "https://docs.example/page";
    store
        .write_at(url, "page text", later())
        .expect("first write");
    store.write_at(url, "page text", later()).expect("a repeat");
    assert_eq!(remembered(&store), 1);
    // The folder is swapped for a link to a copy holding the very same file.
    let elsewhere = root.path().join("elsewhere");
    fs::rename(store.dir(), &elsewhere).expect("movable");
    symlink(&elsewhere, store.dir()).expect("the planted link must be creatable");
    let err = store
        .write_at(url, "page text", later())
        .expect_err("a symlinked store dir must be refused");
    assert!(matches!(err, StoreError::NotADirectory { .. }), "{err}");
}

#[test]
fn remembered_copies_stay_within_their_byte_bound() {
    let root = tempfile::tempdir().expect("temp dir");
    let store = Store::new(root.path(), None);
    let page = "x".repeat(VERIFIED_MAX_ENTRY_BYTES);
    for i in 0..10 {
        let url = format!("https://docs.example/{i}");
        store.write_at(&url, &page, later()).expect("write");
        store.write_at(&url, &page, later()).expect("repeat");
    }
    let inner = store.verified.inner.lock().expect("unpoisoned");
    assert!(
        inner.bytes <= VERIFIED_MAX_BYTES,
        "{} bytes held",
        inner.bytes
    );
    assert_eq!(
        inner.copies.len(),
        VERIFIED_MAX_BYTES / VERIFIED_MAX_ENTRY_BYTES
    );
    let newest = Store::file_name("https://docs.example/9").expect("name");
    assert!(
        inner.copies.keys().any(|p| p.ends_with(&newest)),
        "the newest copy is kept"
    );
    drop(inner);
    let big = "y".repeat(VERIFIED_MAX_ENTRY_BYTES + 1);
    let big_name = Store::file_name("https://docs.example/big").expect("name");
    store
        .write_at("https://docs.example/big", &big, later())
        .expect("write");
    store
        .write_at("https://docs.example/big", &big, later())
        .expect("repeat");
    let inner = store.verified.inner.lock().expect("unpoisoned");
    assert!(
        !inner.copies.keys().any(|p| p.ends_with(&big_name)),
        "a copy over the entry bound is not kept"
    );
}
