//! Micro-benchmarks of the sanitizer on the texts a tool returns: a short answer, 4 KiB of
//! ASCII prose, 4 KiB of text in other scripts (accents, CJK, typographic quotes, emoji), and
//! prose with a credential in it. `clean` and `redact` are measured apart; both return the
//! text borrowed when it needs no work, which is what the first three measure.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use toolwire_sanitize::{Redactor, text};

fn texts() -> Vec<(&'static str, String)> {
    let prose = "The build finished in 42 s; 3 warnings, 0 errors. See the log for details.\n";
    let world = "Café « crème » — 東京の天気は晴れ ✓ “quoted” résumé 👍 Ünïcödé, naïve façade.\n";
    vec![
        ("short", "The sum is 5.".to_owned()),
        ("ascii 4k", prose.repeat(4096 / prose.len())),
        ("non-ascii 4k", world.repeat(4096 / world.len())),
        (
            "secret 4k",
            format!(
                "{}token ghp_0123456789abcdefghijklmnopqrstuvwxyz\n{}",
                prose.repeat(24),
                prose.repeat(24)
            ),
        ),
    ]
}

fn sanitize(c: &mut Criterion) {
    let redactor = Redactor::defaults().unwrap();
    let mut group = c.benchmark_group("sanitize");
    for (name, text) in texts() {
        group.bench_function(format!("clean {name}"), |b| {
            b.iter(|| text::clean(black_box(&text)).1)
        });
        group.bench_function(format!("redact {name}"), |b| {
            b.iter(|| redactor.redact(black_box(&text)).1)
        });
    }
    group.finish();
}

criterion_group!(benches, sanitize);
criterion_main!(benches);
