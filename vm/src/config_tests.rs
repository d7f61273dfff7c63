//! The settings' parsing: environment values, and the checks `build` makes.

use super::*;

#[test]
fn env_values_parse_and_bad_ones_fail_build() {
    let mut b = VmBuilder::new();
    b.apply_env(|k| match k {
        "EDDY_VM_WINDOW" => Some("32".into()),
        "EDDY_VM_CAPACITY" => Some("64M".into()),
        "EDDY_VM_SYNC" => Some("1".into()),
        _ => None,
    });
    assert_eq!(b.config.window, 32);
    assert_eq!(b.config.capacity, Some(64 << 20));
    assert!(b.config.sync_mode);
    let mut b = VmBuilder::new();
    b.apply_env(|k| (k == "EDDY_VM_FUSION").then(|| "maybe".into()));
    let Err(e) = b.build() else {
        panic!("bad value accepted")
    };
    assert!(e.to_string().contains("EDDY_VM_FUSION"), "{e}");
}

#[test]
fn promotion_takes_a_boolean_or_always() {
    let with = |v: &'static str| {
        let mut b = VmBuilder::new();
        b.apply_env(|k| (k == "EDDY_VM_PROMOTION").then(|| v.into()));
        b
    };
    let c = |v| {
        let b = with(v);
        (b.config.promotion, b.config.promotion_measured)
    };
    assert_eq!(c("1"), (true, true));
    assert_eq!(c("0"), (false, true));
    assert_eq!(c("always"), (true, false));
    let Err(e) = with("often").build() else {
        panic!("bad value accepted")
    };
    assert!(e.to_string().contains("EDDY_VM_PROMOTION"), "{e}");
    let mut b = VmBuilder::new();
    b.apply_env(|k| (k == "EDDY_VM_AUTO_PLAN").then(|| "1".into()));
    let Err(e) = b.build() else {
        panic!("the switch's earlier name was ignored")
    };
    assert!(e.to_string().contains("is now EDDY_VM_PROMOTION"), "{e}");
}

#[test]
fn inverted_water_marks_are_rejected() {
    assert!(VmBuilder::new().water_marks(10, 20).build().is_err());
    assert!(VmBuilder::new().window(0).build().is_err());
}
