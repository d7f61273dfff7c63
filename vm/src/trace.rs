//! The instruction timeline and its chrome-trace / Perfetto JSON export.

use std::io::Write;

/// One computed instruction on the timeline.
///
/// # Examples
///
/// ```
/// use eddy_vm::{testing::Noop, StreamId, Vm};
/// let vm = Vm::builder().trace(true).build()?;
/// vm.run(StreamId::CPU, Noop::new(vec![], vec![vm.new_blob(4)]))?;
/// vm.sync()?;
/// let e = vm.trace_events().into_iter().find(|e| e.name == "noop").unwrap();
/// assert_eq!(e.stream, 0);
/// assert!(e.dur_us >= 0.0);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvent {
    /// The op's name.
    pub name: String,
    /// The instruction id.
    pub id: u64,
    /// The stream index.
    pub stream: u32,
    /// The thread that ran it.
    pub thread: String,
    /// Start, in µs since the engine started.
    pub start_us: f64,
    /// Duration in µs.
    pub dur_us: f64,
}

fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o
}

/// Writes `events` as a chrome-trace JSON object: one track (`tid`) per stream, named after it.
///
/// # Errors
///
/// I/O errors from `w`.
///
/// # Examples
///
/// ```
/// use eddy_vm::trace::{write_chrome_trace, TraceEvent};
/// let e = TraceEvent {
///     name: "add".into(), id: 7, stream: 0, thread: "user".into(), start_us: 1.0, dur_us: 2.5,
/// };
/// let mut out = Vec::new();
/// write_chrome_trace(&[e], &["cpu".to_string()], &mut out)?;
/// let json = String::from_utf8(out).unwrap();
/// assert!(json.contains("\"args\":{\"name\":\"stream 0: cpu\"}"));
/// assert!(json.contains("\"name\":\"add\",\"cat\":\"instruction\",\"ph\":\"X\""));
/// assert!(json.contains("\"dur\":2.500"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn write_chrome_trace(
    events: &[TraceEvent],
    stream_names: &[String],
    mut w: impl Write,
) -> std::io::Result<()> {
    writeln!(w, "{{\"traceEvents\":[")?;
    let mut first = true;
    for (i, n) in stream_names.iter().enumerate() {
        if !first {
            writeln!(w, ",")?;
        }
        first = false;
        write!(
            w,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{i},\"args\":{{\"name\":\"stream {i}: {}\"}}}}",
            escape(n)
        )?;
    }
    for e in events {
        if !first {
            writeln!(w, ",")?;
        }
        first = false;
        write!(
            w,
            "{{\"name\":\"{}\",\"cat\":\"instruction\",\"ph\":\"X\",\"pid\":1,\"tid\":{},\"ts\":{:.3},\"dur\":{:.3},\"args\":{{\"id\":{},\"thread\":\"{}\"}}}}",
            escape(&e.name),
            e.stream,
            e.start_us,
            e.dur_us.max(0.001),
            e.id,
            escape(&e.thread)
        )?;
    }
    writeln!(w, "\n],\"displayTimeUnit\":\"ns\"}}")?;
    Ok(())
}
