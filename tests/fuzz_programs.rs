//! The fuzz targets' decoders (`fuzz/programs.rs`) on the stable toolchain: random byte
//! strings through proptest, and every input of the checked-in corpus (`fuzz/corpus/<target>/`,
//! minimised from coverage-guided runs, crashes found there included as regressions).

#[path = "../fuzz/programs.rs"]
mod programs;

use proptest::prelude::*;
use std::path::Path;

fn corpus(target: &str, run: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = e.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let r = std::panic::catch_unwind(|| run(&data));
        assert!(r.is_ok(), "corpus input {} fails", path.display());
        n += 1;
    }
    n
}

#[test]
fn alloc_trace_corpus() {
    assert!(corpus("alloc_trace", programs::alloc_trace) > 0);
}

#[test]
fn shape_program_corpus() {
    assert!(corpus("shape_program", programs::shape_program) > 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn alloc_trace_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        programs::alloc_trace(&data);
    }

    #[test]
    fn shape_program_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        // `EDDY_FUZZ_SLOW=prefix` saves inputs slower than 300 ms (a kernel looping over a
        // zero-sized tensor's huge dims was one) as `prefix-<ms>`, to add to the corpus.
        let t0 = std::time::Instant::now();
        programs::shape_program(&data);
        if let Ok(p) = std::env::var("EDDY_FUZZ_SLOW") {
            let ms = t0.elapsed().as_millis();
            if ms > 300 {
                std::fs::write(format!("{p}-{ms}"), &data).unwrap();
            }
        }
    }
}
