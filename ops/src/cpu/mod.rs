//! CPU kernels, one file per family. Each constructor takes the layouts and dtypes the op
//! definition inferred and returns a [`Kernel`](eddy_vm::instruction::Kernel) for an `OpCall`.

/// `fn $name` runs `$f` (an `#[inline(always)]` function generic over a `FloatElem` `T`)
/// compiled for the widest vector unit the CPU has: AVX-512F, else AVX2, else the base target.
/// No multiply-add is contracted, so every form gives the same bits.
macro_rules! widest {
    ($name:ident, $f:ident, ($($arg:ident: $ty:ty),*)) => {
        #[inline(never)]
        fn $name<T: FloatElem>($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                unsafe fn w512<T: FloatElem>($($arg: $ty),*) { $f($($arg),*) }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn w256<T: FloatElem>($($arg: $ty),*) { $f($($arg),*) }
                let (avx2, avx512) = (
                    std::arch::is_x86_feature_detected!("avx2")
                        && std::arch::is_x86_feature_detected!("fma"),
                    std::arch::is_x86_feature_detected!("avx512f"),
                );
                if avx2 && avx512 {
                    // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked just above).
                    return unsafe { w512($($arg),*) };
                }
                if avx2 {
                    // SAFETY: the CPU has AVX2 and FMA (checked just above).
                    return unsafe { w256($($arg),*) };
                }
            }
            $f($($arg),*)
        }
    };
}
pub(crate) use widest;

pub mod attention;
pub mod collective;
pub mod conv;
pub mod conv_blocked;
pub mod copy;
pub mod elementwise;
pub mod fastmath;
pub(crate) mod fused;
pub mod gemv;
pub mod index;
pub mod matmul;
pub mod nn;
pub mod norm;
pub mod optim;
pub mod reduce;
pub mod sort;
pub mod stream_store;
