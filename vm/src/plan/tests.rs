//! Plans run through their arenas, with temporaries shared by lifetime and in place.

use super::*;
use crate::engine::Vm;
use crate::error::Error;
use crate::testing::{AddByte, AddByteOver};

/// A chain whose kernels may write over their inputs runs in one place, with the values
/// of separate places; kernels that may not are refused as stand-ins, with a typed error.
#[test]
fn steps_written_over_their_inputs_share_one_place() {
    let vm = Vm::builder().sync_mode(true).build().unwrap();
    let chain = |over: bool| -> Vec<Step> {
        let k = |n| -> Box<dyn Kernel> {
            if over {
                Box::new(AddByteOver(n))
            } else {
                Box::new(AddByte(n))
            }
        };
        vec![
            Step::new(k(1), vec![Slot::Input(0)], vec![Slot::Temp(0)]),
            Step::new(k(2), vec![Slot::Temp(0)], vec![Slot::Temp(1)]),
            Step::new(k(3), vec![Slot::Temp(1)], vec![Slot::Temp(2)]),
            Step::new(k(4), vec![Slot::Temp(2)], vec![Slot::Output(0)]),
        ]
    };
    let mut values = Vec::new();
    for over in [true, false] {
        let spec = PlanSpec::new(StreamId::CPU, chain(over), 1, 1, vec![5; 3], vec![]);
        let plan = Plan::new(&vm, spec).unwrap();
        let m = plan.memory();
        m.check().unwrap();
        let places = if over { 1 } else { 2 };
        assert_eq!(m.arena, places * ARENA_ALIGN, "over: {over}");
        assert_eq!(m.shares.len(), if over { 2 } else { 0 });
        let (x, y) = (vm.new_blob(5), vm.new_blob(5));
        vm.write_blob(&x, |b| b.copy_from_slice(&[0, 1, 2, 3, 4]))
            .unwrap();
        plan.launch(&vm, std::slice::from_ref(&x), std::slice::from_ref(&y))
            .unwrap();
        values.push(vm.read_blob(&y, |b| b.to_vec()).unwrap());
        if over {
            let plain = (1..=4).map(|n| Box::new(AddByte(n)) as Box<dyn Kernel>);
            let e = plan
                .launch_with(&vm, &[x], &[y], Some(plain.collect()))
                .unwrap_err();
            assert!(
                matches!(e, Error::InvalidArgument { .. })
                    && e.to_string().contains("step 1 (`add_byte`) may not write"),
                "{e}"
            );
        }
    }
    assert_eq!(values[0], [10, 11, 12, 13, 14]);
    assert_eq!(values[0], values[1]);
}

/// Two chains of steps through temporaries, run twice: the arena's bytes are shared by
/// temporaries never live at once, and each run's values are right (Miri checks the
/// borrowed operand copies and the arena pointers).
#[test]
fn a_plan_runs_its_steps_through_the_arena() {
    let vm = Vm::builder().sync_mode(true).build().unwrap();
    let fixed = vm.new_blob(3);
    vm.write_blob(&fixed, |b| b.fill(100)).unwrap();
    let steps = vec![
        Step::new(
            Box::new(AddByte(1)),
            vec![Slot::Input(0)],
            vec![Slot::Temp(0)],
        ),
        Step::new(
            Box::new(AddByte(2)),
            vec![Slot::Temp(0)],
            vec![Slot::Temp(1)],
        ),
        Step::new(
            Box::new(AddByte(3)),
            vec![Slot::Temp(1)],
            vec![Slot::Temp(2)],
        ),
        Step::new(
            Box::new(AddByte(0)),
            vec![Slot::Temp(2)],
            vec![Slot::Output(0)],
        ),
        Step::new(
            Box::new(AddByte(1)),
            vec![Slot::Fixed(0)],
            vec![Slot::Output(1)],
        ),
    ];
    let spec = PlanSpec::new(StreamId::CPU, steps, 1, 2, vec![3, 3, 3], vec![fixed]);
    let plan = Plan::new(&vm, spec).unwrap();
    let m = plan.memory();
    m.check().unwrap();
    assert_eq!(
        m.offsets[0], m.offsets[2],
        "temporaries 0 and 2 are never live at once"
    );
    assert_eq!(m.arena, 2 * ARENA_ALIGN);
    for run in 0..2u8 {
        let (x, y, z) = (vm.new_blob(3), vm.new_blob(3), vm.new_blob(3));
        vm.write_blob(&x, move |b| b.fill(run * 10)).unwrap();
        plan.launch(&vm, &[x], &[y.clone(), z.clone()]).unwrap();
        assert_eq!(vm.read_blob(&y, |b| b.to_vec()).unwrap(), [run * 10 + 6; 3]);
        assert_eq!(vm.read_blob(&z, |b| b.to_vec()).unwrap(), [101; 3]);
    }
    assert!(
        plan.launch(&vm, &[], &[]).is_err(),
        "the wrong number of blobs"
    );
}
