//! The `EDDY_VM_*` environment variables of [`VmBuilder`].

use super::{MAX_CPU_DEVICES, VmBuilder};
use crate::alloc::AllocMode;
use crate::error::Error;
use crate::stream::Exec;
use std::time::Duration;

fn parse_bytes(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mul) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1usize << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<usize>().ok()?.checked_mul(mul)
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Some(true),
        "0" | "false" | "off" | "no" => Some(false),
        _ => None,
    }
}

impl VmBuilder {
    /// The defaults overridden by `EDDY_VM_*` variables. An unparsable value makes
    /// [`build`](Self::build) fail with `InvalidArgument` naming the variable.
    ///
    /// # Examples
    ///
    /// ```standalone_crate
    /// use eddy_vm::VmBuilder;
    /// // SAFETY: this example is its own program (`standalone_crate`), and no engine, hence no
    /// // other thread that could read the environment, exists while it sets the variable.
    /// unsafe { std::env::set_var("EDDY_VM_WINDOW", "16") };
    /// assert_eq!(VmBuilder::from_env().config().window, 16);
    /// // SAFETY: as above: `from_env` starts no thread.
    /// unsafe { std::env::set_var("EDDY_VM_WINDOW", "sixteen") };
    /// assert!(VmBuilder::from_env().build().is_err());
    /// ```
    pub fn from_env() -> Self {
        let mut b = Self::new();
        b.apply_env(|k| std::env::var(k).ok());
        b
    }

    /// Applies settings from a lookup function (the environment, or a map in tests).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut b = eddy_vm::VmBuilder::new();
    /// b.apply_env(|key| match key {
    ///     "EDDY_VM_CAPACITY" => Some("64M".into()),
    ///     "EDDY_VM_FUSION" => Some("off".into()),
    ///     "EDDY_VM_LAZY_LAUNCHER" => Some("on".into()),
    ///     _ => None,
    /// });
    /// assert_eq!(b.config().capacity, Some(64 << 20));
    /// assert!(!b.config().fusion);
    /// assert!(b.config().lazy_launcher);
    /// ```
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) {
        let c = &mut self.config;
        let mut bad = None;
        let mut set = |key: &str, f: &mut dyn FnMut(&str) -> bool| {
            if let Some(v) = get(key)
                && !f(&v)
                && bad.is_none()
            {
                bad = Some(Error::InvalidArgument {
                    at: crate::error::Caller::UNKNOWN,
                    op: "VmBuilder".into(),
                    message: format!("cannot parse {key}={v:?}"),
                });
            }
        };
        set("EDDY_VM_SYNC", &mut |v| {
            parse_bool(v).map(|x| c.sync_mode = x).is_some()
        });
        set("EDDY_VM_WINDOW", &mut |v| {
            v.trim()
                .parse()
                .ok()
                .filter(|&w: &usize| w > 0)
                .map(|x| c.window = x)
                .is_some()
        });
        set("EDDY_VM_HIGH_WATER", &mut |v| {
            v.trim().parse().ok().map(|x| c.high_water = x).is_some()
        });
        set("EDDY_VM_LOW_WATER", &mut |v| {
            v.trim().parse().ok().map(|x| c.low_water = x).is_some()
        });
        set("EDDY_VM_FUSION", &mut |v| {
            parse_bool(v).map(|x| c.fusion = x).is_some()
        });
        set("EDDY_VM_CAPACITY", &mut |v| {
            parse_bytes(v).map(|x| c.capacity = Some(x)).is_some()
        });
        set("EDDY_VM_TIMEOUT_MS", &mut |v| {
            v.trim()
                .parse()
                .ok()
                .map(|x| c.timeout = Duration::from_millis(x))
                .is_some()
        });
        set("EDDY_VM_ALLOCATOR", &mut |v| {
            let m = match v.trim() {
                "caching" => AllocMode::Caching,
                "passthrough" => AllocMode::Passthrough,
                _ => return false,
            };
            c.alloc_mode = m;
            true
        });
        set("EDDY_VM_CPU_EXEC", &mut |v| {
            let e = match v.trim() {
                "inline" => Exec::Inline,
                "worker" => Exec::Worker,
                _ => return false,
            };
            c.cpu_exec = e;
            true
        });
        set("EDDY_VM_LAZY_LAUNCHER", &mut |v| {
            parse_bool(v).map(|x| c.lazy_launcher = x).is_some()
        });
        set("EDDY_VM_COLLECTIVE_WORKERS", &mut |v| {
            parse_bool(v).map(|x| c.collective_workers = x).is_some()
        });
        set("EDDY_VM_TRANSPORT_STREAM", &mut |v| {
            parse_bool(v).map(|x| c.transport_stream = x).is_some()
        });
        set("EDDY_VM_PROMOTION", &mut |v| {
            if v.trim() == "always" {
                c.promotion = true;
                c.promotion_measured = false;
                return true;
            }
            parse_bool(v).map(|x| c.promotion = x).is_some()
        });
        set(
            "EDDY_VM_CPU_DEVICES",
            &mut |v| match v.trim().parse::<u32>() {
                Ok(n) if (1..=MAX_CPU_DEVICES).contains(&n) => {
                    c.cpu_devices = n;
                    true
                }
                _ => false,
            },
        );
        set("EDDY_VM_CUDA_DEVICES", &mut |v| match v.trim() {
            "all" => {
                c.cuda_devices = u32::MAX;
                true
            }
            n => match n.parse::<u32>() {
                Ok(n) => {
                    c.cuda_devices = n;
                    true
                }
                Err(_) => false,
            },
        });
        set("EDDY_VM_SPIN_US", &mut |v| {
            v.trim()
                .parse()
                .ok()
                .map(|x| c.spin = Duration::from_micros(x))
                .is_some()
        });
        set("EDDY_VM_TRACE", &mut |v| {
            parse_bool(v).map(|x| c.trace = x).is_some()
        });
        set("EDDY_VM_DUMP_LIMIT", &mut |v| {
            v.trim().parse().ok().map(|x| c.dump_limit = x).is_some()
        });
        // The switch's earlier name: refused with the new one rather than ignored.
        if bad.is_none() && get("EDDY_VM_AUTO_PLAN").is_some() {
            bad = Some(Error::InvalidArgument {
                at: crate::error::Caller::UNKNOWN,
                op: "VmBuilder".into(),
                message: "EDDY_VM_AUTO_PLAN is now EDDY_VM_PROMOTION".into(),
            });
        }
        if bad.is_some() {
            self.env_error = bad;
        }
    }
}
