//! The processes of a job as one world (`global::world`, `World::all_reduce`,
//! `World::all_gather`). Run alone this is a world of one; `.ci/run` also runs it under
//! `mpirun -np 2` and `-np 3` with the `mpi` feature, where every process checks the values
//! every other process contributed, and the default build under `mpirun -np 2`, where
//! `world` refuses.

use eddy::tensor::global::{ReduceKind, World, world};
use eddy::{DType, Error, Tensor};

type R = Result<(), Error>;

/// Whether a launcher started several processes.
fn launched() -> bool {
    std::env::var("OMPI_COMM_WORLD_SIZE").is_ok_and(|n| n != "1")
}

#[test]
fn every_process_gets_the_same_reductions_and_gathers() -> R {
    if cfg!(not(feature = "mpi")) && launched() {
        // Each process would run alone, unaware of the others: refused instead.
        let e = world().unwrap_err();
        assert!(
            matches!(e, Error::DeviceUnavailable { op: "world", .. }),
            "{e}"
        );
        assert!(e.to_string().contains("--features mpi"), "{e}");
        return Ok(());
    }
    let w = world()?;
    assert!(w.rank < w.size);
    let (r, n) = (w.rank as f32, w.size as f32);
    // Sums, maxima and minima of values that differ by rank, in f32, f64, i32 and i64.
    let x = Tensor::from_vec(vec![r + 1.0, -r, 0.5], [3])?;
    assert_eq!(
        w.all_reduce(&x, ReduceKind::Sum)?.to_vec::<f32>()?,
        [n * (n + 1.0) / 2.0, -(n * (n - 1.0) / 2.0), 0.5 * n]
    );
    let xi = Tensor::from_vec(vec![w.rank as i64 * 7, -(w.rank as i64)], [2])?;
    assert_eq!(
        w.all_reduce(&xi, ReduceKind::Max)?.to_vec::<i64>()?,
        [(w.size as i64 - 1) * 7, 0]
    );
    assert_eq!(
        w.all_reduce(&xi.to_dtype(DType::I32)?, ReduceKind::Min)?
            .to_vec::<i32>()?,
        [0, -(w.size as i32 - 1)]
    );
    let xd = x.to_dtype(DType::F64)?.reshape([1, 3])?;
    let all = w.all_gather(&xd)?;
    assert_eq!(all.dims(), [w.size, 3]);
    let rows = all.to_vec2::<f64>()?;
    for (k, row) in rows.iter().enumerate() {
        assert_eq!(row, &[k as f64 + 1.0, -(k as f64), 0.5], "rank {k}'s row");
    }
    // The input is left as it was, and the result has storage of its own.
    assert_eq!(x.to_vec::<f32>()?, [r + 1.0, -r, 0.5]);
    let s = w.all_reduce(&x, ReduceKind::Sum)?;
    assert!(!s.shares_storage(&x));
    // Refusals, on every process alike.
    let b = Tensor::from_vec(vec![1u8, 2], [2])?;
    assert!(matches!(
        w.all_reduce(&b, ReduceKind::Sum),
        Err(Error::UnsupportedDType {
            op: "all_reduce",
            ..
        })
    ));
    assert!(matches!(
        w.all_gather(&Tensor::scalar(1f32)?),
        Err(Error::InvalidDim {
            op: "all_gather",
            ..
        })
    ));
    Ok(())
}

#[test]
fn a_world_of_one_needs_no_launcher() -> R {
    if launched() {
        return Ok(()); // the test above covers it
    }
    assert_eq!(world()?, World { rank: 0, size: 1 });
    Ok(())
}
