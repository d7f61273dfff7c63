//! The handles of global tensors: a logical shape and place over components, with a storage
//! that holds nothing.

use super::{Parts, Tensor};
use crate::engine::{Loc, VmRef};
use crate::global::{Components, Global};
use crate::{DType, Layout, Shape};
use eddy_vm::Counted;

impl Tensor {
    /// The handle of a global tensor of `shape` and `dtype` over `global`'s components: on
    /// the first component's engine and device, with a storage that holds nothing.
    pub(crate) fn global_handle(
        shape: Shape,
        dtype: DType,
        global: crate::global::Global,
    ) -> Tensor {
        let first = &global.parts[0];
        let (vm, loc) = (first.0.vm.share(), first.0.loc.global());
        let layout = Layout::contiguous(shape);
        let numel = layout.numel();
        Tensor::global_at(vm, loc, layout, numel, dtype, global)
    }

    /// A global handle over `global` with `like`'s logical shape and place (`like`: a global
    /// tensor of the same shape and placement): [`global_handle`](Self::global_handle)
    /// without working out the layout again.
    pub(crate) fn global_handle_like(like: &Tensor, global: crate::global::Global) -> Tensor {
        debug_assert!(like.is_global() && like.0.contiguous);
        let dtype = global.parts[0].dtype();
        let (layout, numel) = (like.0.layout.clone(), like.0.numel);
        Tensor::global_at(like.0.vm.share(), like.0.loc, layout, numel, dtype, global)
    }

    /// A global handle with `like`'s logical shape and place, of `dtype`, laid out as `g`
    /// (placement, SBPs, positions held), whose components `fill` pushes straight into it. A
    /// list of components built apart and moved in was read back in wider pieces than its
    /// fresh stores, a store-forwarding stall on every global op.
    pub(crate) fn global_handle_with(
        like: &Tensor,
        dtype: DType,
        g: &Global,
        fill: impl FnOnce(&mut Components) -> crate::Result<()>,
    ) -> crate::Result<Tensor> {
        debug_assert!(like.is_global() && like.0.contiguous);
        // The layout first: cloned right before the handle copied it in, its fields were
        // still in the store buffer (a store-forwarding stall).
        let (layout, numel) = (like.0.layout.clone(), like.0.numel);
        let global = Global {
            placement: g.placement,
            sbp: eddy_ops::global::nd_sbp_copy(&g.sbp),
            held: g.held.clone(),
            parts: Components::new(),
        };
        let mut t = Tensor::global_at(like.0.vm.share(), like.0.loc, layout, numel, dtype, global);
        let inner = Counted::get_mut(&mut t.0).expect("a handle just made has one holder");
        fill(&mut inner.global.as_mut().expect("a global handle").parts)?;
        Ok(t)
    }

    /// The handle of a global tensor over `global`, on `vm` at `loc` (a global location).
    fn global_at(
        vm: VmRef,
        loc: Loc,
        layout: Layout,
        numel: usize,
        dtype: DType,
        global: crate::global::Global,
    ) -> Tensor {
        // Released from the start: a kernel given it is refused by the engine before it runs
        // (see `launch_on`); no handle of it holds or releases it (see `Inner`'s drop).
        let blob = vm.uncounted_unusable_blob();
        Tensor::from_parts(
            Parts {
                blob,
                vm,
                dtype,
                loc,
                host_range: None,
            },
            layout,
            numel,
            true,
        )
        .with_global(Some(global))
    }

    /// `self` (a handle just made, which no one else holds) over `global`'s components.
    pub(super) fn with_global(mut self, global: Option<Global>) -> Tensor {
        if global.is_some() {
            let inner = Counted::get_mut(&mut self.0).expect("a handle just made has one holder");
            inner.global = global;
        }
        self
    }
}
