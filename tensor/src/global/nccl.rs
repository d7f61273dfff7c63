//! NCCL for CUDA ranks in several processes (feature `nccl`). A group's exchange of parts
//! between processes whose ranks are CUDA devices moves device memory with NCCL's
//! point-to-point calls, grouped into one launch on the device's compute stream; the
//! fingerprints are compared over MPI first, as for CPU ranks, so a program that branched
//! fails on every process before anything is launched. The communicator spans the world, one
//! NCCL rank per process (its CUDA device of the placement), and is made on the first
//! exchange: process 0 draws NCCL's unique id and the others receive it over MPI.
//!
//! NCCL is loaded at run time: a build with the feature runs where it is absent, and a
//! placement that needs it is refused with `DeviceUnavailable` naming `nccl` and saying what
//! is missing.

use super::comm::{self, Call};
use crate::{Caller, Error, Result};
use cudarc::nccl::{result, sys};
use eddy_ops::cuda::with_launch;
use eddy_vm::instruction::{ComputeCtx, Kernel};
use eddy_vm::stream::cuda_error::CudaError;
use eddy_vm::{Blob, Counted};
use parking_lot::Mutex;
use std::sync::OnceLock;

/// Why NCCL cannot be used here, if it cannot (probed once).
fn missing() -> Option<&'static str> {
    static MISSING: OnceLock<Option<&'static str>> = OnceLock::new();
    *MISSING.get_or_init(|| {
        // SAFETY: the probe only tries to load the library by its names.
        if unsafe { sys::is_culib_present() } {
            return None;
        }
        // NCCL's wheels and some packages ship only `libnccl.so.2`, a name the loader does
        // not try.
        let name = c"libnccl.so.2";
        // SAFETY: `dlopen` of a NUL-terminated name; a handle it returns is closed at once.
        let so2 = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        if so2.is_null() {
            return Some(
                "the NCCL library (libnccl.so) is not on the library path: install NCCL \
                 (libnccl2 and libnccl-dev) or add its folder to LD_LIBRARY_PATH",
            );
        }
        // SAFETY: `so2` is a handle `dlopen` returned, closed once.
        unsafe { libc::dlclose(so2) };
        Some(
            "only libnccl.so.2 is on the library path: link libnccl.so to it in a folder of \
             LD_LIBRARY_PATH",
        )
    })
}

/// Checks that CUDA ranks of several processes can be used: NCCL loads, and each process
/// holds at most one CUDA device of the placement (`per_process`).
///
/// # Errors
///
/// `DeviceUnavailable` naming `nccl`, saying what is missing.
#[track_caller]
pub(super) fn usable(op: &'static str, per_process: u32) -> Result<()> {
    let at = Caller::here();
    if let Some(reason) = missing() {
        return Err(Error::DeviceUnavailable {
            op,
            device: "nccl".into(),
            reason,
            at,
        });
    }
    if per_process > 1 {
        return Err(Error::DeviceUnavailable {
            op,
            device: "nccl".into(),
            reason: "CUDA ranks of several processes take one CUDA device per process: \
                     build each process's engine with one (CUDA_VISIBLE_DEVICES picks it)",
            at,
        });
    }
    Ok(())
}

/// The world's communicator, made on first use.
struct World(sys::ncclComm_t);

// SAFETY: the communicator is used only by the instruction that holds it, one at a time: the
// engine orders every collective of the process after the one before (its transport
// dependence), so no two threads call NCCL on it at once.
unsafe impl Send for World {}

static WORLD: Mutex<Option<World>> = Mutex::new(None);

/// The world's communicator: made, the first time, from the unique id process 0 draws and
/// sends to every process over MPI (`at`: the exchange that needs it, named by the
/// fingerprint of the id's exchange). The calling thread has the device's context bound.
fn world_comm(at: Caller) -> std::result::Result<sys::ncclComm_t, String> {
    let mut world = WORLD.lock();
    if let Some(w) = world.as_ref() {
        return Ok(w.0);
    }
    let (rank, size) = comm::world().map_err(|e| e.to_string())?;
    let id_bytes = std::mem::size_of::<sys::ncclUniqueId>();
    let mine = if rank == 0 {
        let id = result::get_uniqueid().map_err(|e| format!("ncclGetUniqueId: {e:?}"))?;
        // SAFETY: `ncclUniqueId` is plain bytes (a `[c_char; 128]`).
        unsafe { std::slice::from_raw_parts(&id as *const _ as *const u8, id_bytes) }.to_vec()
    } else {
        Vec::new()
    };
    let mut counts = vec![0; size];
    counts[0] = id_bytes;
    let call = Call {
        op: "nccl_unique_id",
        layout: "world",
        dtype: crate::DType::U8,
        dims: smallvec::smallvec![id_bytes],
        at,
        bytes: mine.len(),
    };
    let bytes = comm::on_thread(move |w| comm::all_gather_bytes_on(w, call, mine, counts))?;
    let mut id = std::mem::MaybeUninit::<sys::ncclUniqueId>::uninit();
    // SAFETY: `bytes` holds process 0's `id_bytes` bytes of its id, copied into an id of
    // plain bytes, every byte written.
    let id = unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), id.as_mut_ptr() as *mut u8, id_bytes);
        id.assume_init()
    };
    let mut c = std::mem::MaybeUninit::<sys::ncclComm_t>::uninit();
    // SAFETY: every process calls this once with the same id and its own rank; the result is
    // written to `c` on success.
    unsafe { result::comm_init_rank(c.as_mut_ptr(), size as i32, id, rank as i32) }
        .map_err(|e| format!("ncclCommInitRank: {e:?}"))?;
    // SAFETY: written by the successful call above.
    let c = unsafe { c.assume_init() };
    *world = Some(World(c));
    Ok(c)
}

/// What an exchange moves, in bytes: this process's parts (`sends`: offset in its blob,
/// length), sent to every other process, and the other processes' parts (`receives`: the
/// process each comes from, length), received into the outputs, in the group's order.
pub(super) struct Moves {
    pub(super) sends: Vec<(usize, usize)>,
    pub(super) receives: Vec<(usize, usize)>,
}

/// An exchange of parts between processes whose ranks are CUDA devices: the fingerprints
/// compared over MPI, then one NCCL group of sends and receives on the device's stream.
pub(super) struct Exchange {
    pub(super) call: Option<Call>,
    pub(super) moves: Moves,
}

impl Kernel for Exchange {
    fn name(&self) -> &str {
        "exchange"
    }

    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        ctx: &mut ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        let fail = |m: String| eddy_vm::Error::kernel("exchange", m);
        let call = self
            .call
            .take()
            .ok_or_else(|| fail("an exchange runs once".into()))?;
        let at = call.at;
        // Every process agrees on the collective before anything is launched.
        comm::on_thread(move |w| comm::agree(w, call)).map_err(fail)?;
        let (me, size) = comm::world().map_err(|e| fail(e.to_string()))?;
        let moves = &self.moves;
        // The last output is the transport dependence.
        let outputs = &outputs[..outputs.len() - 1];
        with_launch("exchange", ctx, |l| {
            let engine = |m: String| CudaError::Engine(Box::new(fail(m)));
            let nccl = world_comm(at).map_err(engine)?;
            let stream = l.stream() as sys::cudaStream_t;
            let bytes = sys::ncclDataType_t::ncclUint8;
            result::group_start().map_err(|e| engine(format!("ncclGroupStart: {e:?}")))?;
            let mut r = Ok(());
            for q in (0..size).filter(|&q| q != me) {
                // Empty parts are not sent: their receivers post no receive for them.
                for (b, &(at, n)) in inputs.iter().zip(&moves.sends).filter(|(_, s)| s.1 > 0) {
                    // SAFETY: the engine keeps the input readable until the stream has run
                    // the group; `at + n` lies within its blob.
                    let sent = unsafe {
                        result::send(b.as_ptr().add(at) as _, n, bytes, q as i32, nccl, stream)
                    };
                    r = r.and(sent.map(|_| ()));
                }
            }
            for (b, &(q, n)) in outputs.iter().zip(&moves.receives) {
                // SAFETY: the engine keeps the output exclusively writable until the stream
                // has run the group; it holds `n` bytes.
                let got =
                    unsafe { result::recv(b.as_ptr() as _, n, bytes, q as i32, nccl, stream) };
                r = r.and(got.map(|_| ()));
            }
            let ended = result::group_end();
            r.and(ended.map(|_| ()))
                .map_err(|e| engine(format!("NCCL: {e:?}")))
        })
    }

    fn fusable(&self) -> bool {
        false
    }
}
