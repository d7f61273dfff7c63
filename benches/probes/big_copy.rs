//! Times large copies and fills (64 MiB outputs): `full`, `contiguous` of a column slice, `to_dtype` f32 → i32, and a `cat` of two halves. Best and median of 15 rounds.
#[global_allocator]
static GLOBAL: eddy::Malloc = eddy::Malloc;
use eddy::tensor::{DType, Tensor};
use std::time::Instant;

fn time(what: &str, mut f: impl FnMut() -> Tensor) {
    let mut v = Vec::new();
    f().sync().unwrap();
    for _ in 0..15 {
        let t = Instant::now();
        let mut last = None;
        for _ in 0..5 {
            last = Some(f());
        }
        last.unwrap().sync().unwrap();
        v.push(t.elapsed().as_secs_f64() * 1e3 / 5.0);
    }
    v.sort_by(|a, b| a.total_cmp(b));
    println!("{what:28} median {:.2} ms  best {:.2} ms", v[7], v[0]);
}

fn main() {
    let n = 16 << 20;
    let a = Tensor::randn([n + 16], 0.0, 1.0, DType::F32).unwrap();
    let view = a.narrow(0, 16, n).unwrap().reshape([4096, 4096]).unwrap();
    let cols = view.narrow(1, 1, 4095).unwrap();
    let half = a.narrow(0, 0, n / 2).unwrap();
    for _ in 0..2 {
        time("full 16 Mi f32", || {
            Tensor::full([n], 3.0, DType::F32).unwrap()
        });
        time("contiguous of [:, 1:]", || cols.contiguous().unwrap());
        time("to_dtype f32 -> i32", || view.to_dtype(DType::I32).unwrap());
        time("cat of two 8 Mi halves", || {
            Tensor::cat(&[&half, &half], 0).unwrap()
        });
    }
}
