//! NSPL front-end throughput: parse, and format, a script of at least 1 MB built from every
//! golden statement that parses (so every family and expression form is in the mix).
//!
//! `cargo bench -p nervix-bench --bench nspl_parse`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nervix::nspl;
use std::path::Path;

const SCRIPT_BYTES_AT_LEAST: usize = 1 << 20;

fn golden_statements(dir: &Path, out: &mut String) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("golden directory is readable")
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            golden_statements(&path, out);
        } else if path.extension().is_some_and(|e| e == "nspl") {
            let text = std::fs::read_to_string(&path).expect("golden input is UTF-8");
            if nspl::parse_script(&text).errors.is_empty() {
                out.push_str(&text);
                out.push('\n');
            }
        }
    }
}

fn one_megabyte_script() -> String {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../nspl/tests/golden");
    let mut unit = String::new();
    golden_statements(&golden, &mut unit);
    assert!(
        !unit.is_empty(),
        "no golden statements under {}",
        golden.display()
    );
    let mut script = String::with_capacity(SCRIPT_BYTES_AT_LEAST + unit.len());
    while script.len() < SCRIPT_BYTES_AT_LEAST {
        script.push_str(&unit);
    }
    script
}

fn parse(c: &mut Criterion) {
    let script = one_megabyte_script();
    let statements = nspl::parse_script(&script).statements.len();
    let mut group = c.benchmark_group("nspl");
    group.throughput(Throughput::Bytes(script.len() as u64));
    group.sample_size(20);
    group.bench_function(
        format!(
            "parse_script {} bytes, {statements} statements",
            script.len()
        ),
        |b| b.iter(|| nspl::parse_script(std::hint::black_box(&script))),
    );
    group.bench_function(format!("format_script {} bytes", script.len()), |b| {
        b.iter(|| nspl::format_script(std::hint::black_box(&script)))
    });
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
