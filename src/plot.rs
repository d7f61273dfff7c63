//! Pictures: the training curve as a PNG (`plotters`), and the instruction timeline as an SVG a
//! person can open without a trace viewer.

use crate::train::EpochStats;
use eddy_vm::trace::TraceEvent;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Once;

/// DejaVu Sans (Bitstream Vera licence, see `assets/DejaVuSans-LICENSE.txt`): bundled so text
/// renders the same on every machine, without system font libraries.
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bundled font is a valid TrueType file; a failure would only lose the labels.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// Draws loss (left) and held-out accuracy (right) per epoch into a `width × height` PNG.
///
/// # Errors
///
/// A message if there are no epochs or the file cannot be written.
///
/// # Examples
///
/// ```
/// use eddy::train::EpochStats;
/// let e = |epoch, loss, acc| EpochStats { epoch, loss, test_accuracy: acc, steps_per_s: 1.0 };
/// let path = std::env::temp_dir().join(format!("eddy-doc-curve-{}.png", std::process::id()));
/// eddy::plot::training_curve_png(&[e(1, 1.0, 0.5), e(2, 0.4, 0.9)], &path, (640, 320))?;
/// assert!(std::fs::metadata(&path)?.len() > 1000);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn training_curve_png(
    epochs: &[EpochStats],
    path: &Path,
    (width, height): (u32, u32),
) -> Result<(), String> {
    if epochs.is_empty() {
        return Err("no epochs to plot".into());
    }
    register_font();
    let e = |x: &dyn std::fmt::Display| format!("{}: {x}", path.display());
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let (left, right) = root.split_horizontally(width / 2);
    let last = epochs.len() as f64;
    let x_range = if epochs.len() == 1 {
        0.5..1.5
    } else {
        1.0..last
    };
    let min_acc = epochs
        .iter()
        .map(|s| s.test_accuracy * 100.0)
        .fold(100.0, f64::min);
    let acc_lo = ((min_acc - 5.0) / 10.0).floor().clamp(0.0, 9.0) * 10.0;
    let max_loss = epochs.iter().map(|s| s.loss).fold(0.0, f64::max).max(1e-6) * 1.05;
    // (area, title, y range, colour, the value plotted)
    type Panel<'a, A> = (
        &'a A,
        &'a str,
        std::ops::Range<f64>,
        RGBColor,
        fn(&EpochStats) -> f64,
    );
    let panels: [Panel<DrawingArea<_, _>>; 2] = [
        (
            &left,
            "training loss",
            0.0..max_loss,
            RGBColor(200, 60, 40),
            |s| s.loss,
        ),
        (
            &right,
            "held-out accuracy (%)",
            acc_lo..100.5,
            RGBColor(40, 90, 200),
            |s| s.test_accuracy * 100.0,
        ),
    ];
    for (area, title, y_range, color, value) in panels {
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(x_range.clone(), y_range)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc("epoch")
            .x_labels(epochs.len().min(10))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| {
                if y.abs() >= 10.0 {
                    format!("{y:.0}")
                } else {
                    format!("{y:.2}")
                }
            })
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(|x| e(&x))?;
        chart
            .draw_series(LineSeries::new(
                epochs.iter().map(|s| (s.epoch as f64, value(s))),
                color.stroke_width(2),
            ))
            .map_err(|x| e(&x))?;
        chart
            .draw_series(
                epochs
                    .iter()
                    .map(|s| Circle::new((s.epoch as f64, value(s)), 3, color.filled())),
            )
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// Renders trace events as an SVG timeline: one lane per (stream, thread), one box per
/// instruction coloured by op, a time axis, and a legend of the busiest ops. Hovering a box
/// shows its op, id and duration.
///
/// # Examples
///
/// ```
/// use eddy::vm::trace::TraceEvent;
/// let ev = TraceEvent { name: "add".into(), id: 7, stream: 0, thread: "cpu-worker".into(),
///                       start_us: 10.0, dur_us: 5.0 };
/// let svg = eddy::plot::timeline_svg(&[ev], &["cpu".to_string()]);
/// assert!(svg.starts_with("<svg") && svg.contains("add #7"));
/// ```
pub fn timeline_svg(events: &[TraceEvent], stream_names: &[String]) -> String {
    const W: f64 = 1200.0;
    const LEFT: f64 = 250.0;
    const LANE: f64 = 28.0;
    const TOP: f64 = 40.0;
    let mut lanes: BTreeMap<(u32, &str), usize> = BTreeMap::new();
    for ev in events {
        let n = lanes.len();
        lanes.entry((ev.stream, ev.thread.as_str())).or_insert(n);
    }
    // Lane order: by stream, then thread.
    let order: Vec<(u32, &str)> = lanes.keys().copied().collect();
    let lane_of = |ev: &TraceEvent| {
        order
            .iter()
            .position(|k| *k == (ev.stream, ev.thread.as_str()))
            .unwrap_or(0)
    };
    let t0 = events
        .iter()
        .map(|e| e.start_us)
        .fold(f64::INFINITY, f64::min);
    let t1 = events
        .iter()
        .map(|e| e.start_us + e.dur_us)
        .fold(f64::NEG_INFINITY, f64::max);
    let (t0, span) = if events.is_empty() {
        (0.0, 1.0)
    } else {
        (t0, (t1 - t0).max(1e-3))
    };
    let x = |t: f64| LEFT + (t - t0) / span * (W - LEFT - 20.0);
    let mut busy: BTreeMap<&str, f64> = BTreeMap::new();
    for ev in events {
        *busy.entry(ev.name.as_str()).or_default() += ev.dur_us;
    }
    let mut top: Vec<(&str, f64)> = busy.into_iter().collect();
    top.sort_by(|a, b| b.1.total_cmp(&a.1));
    let palette = [
        "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
        "#9c755f", "#bab0ac",
    ];
    let color = |name: &str| {
        top.iter()
            .position(|(n, _)| *n == name)
            .filter(|&i| i < palette.len() - 1)
            .map_or(palette[palette.len() - 1], |i| palette[i])
    };
    let legend_rows = top.len().min(palette.len() - 1).div_ceil(5);
    let h = TOP + order.len() as f64 * LANE + 40.0 + legend_rows as f64 * 20.0 + 10.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" font-family="DejaVu Sans, sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="22" font-size="15">Eddy instruction timeline: {} instructions, {:.1} µs</text>"#,
        events.len(),
        span
    );
    for (i, (stream, thread)) in order.iter().enumerate() {
        let y = TOP + i as f64 * LANE;
        let sname = stream_names
            .get(*stream as usize)
            .map_or("?", String::as_str);
        let fill = if i % 2 == 0 { "#f4f4f4" } else { "#fafafa" };
        let _ = writeln!(
            s,
            r#"<rect x="0" y="{y}" width="{W}" height="{LANE}" fill="{fill}"/><text x="8" y="{}">stream {stream} ({}) · {}</text>"#,
            y + 18.0,
            xml(sname),
            xml(thread)
        );
    }
    for ev in events {
        let y = TOP + lane_of(ev) as f64 * LANE + 4.0;
        let (x0, x1) = (x(ev.start_us), x(ev.start_us + ev.dur_us));
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.2}" y="{y}" width="{:.2}" height="{}" fill="{}"><title>{} #{} · {:.2} µs</title></rect>"#,
            (x1 - x0).max(0.6),
            LANE - 8.0,
            color(&ev.name),
            xml(&ev.name),
            ev.id,
            ev.dur_us
        );
    }
    // Time axis with about 8 round ticks.
    let axis_y = TOP + order.len() as f64 * LANE + 4.0;
    let step = nice_step(span / 8.0);
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="#333"/>"##,
        W - 20.0
    );
    let mut t = 0.0;
    while t <= span + 1e-9 {
        let tx = x(t0 + t);
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.2}" y1="{axis_y}" x2="{tx:.2}" y2="{}" stroke="#333"/><text x="{tx:.2}" y="{}" text-anchor="middle">{}</text>"##,
            axis_y + 5.0,
            axis_y + 18.0,
            fmt_us(t)
        );
        t += step;
    }
    let ly = axis_y + 40.0;
    for (i, (name, _)) in top.iter().take(palette.len() - 1).enumerate() {
        let (lx, lyy) = (10.0 + (i % 5) as f64 * 230.0, ly + (i / 5) as f64 * 20.0);
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{lyy}">{}</text>"#,
            lyy - 10.0,
            palette[i],
            lx + 18.0,
            xml(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn nice_step(raw: f64) -> f64 {
    let p = 10f64.powf(raw.max(1e-9).log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|&v| v >= raw)
        .unwrap_or(10.0 * p)
}

fn fmt_us(t: f64) -> String {
    let trim = |v: String| v.trim_end_matches('0').trim_end_matches('.').to_string();
    if t >= 1000.0 {
        format!("{} ms", trim(format!("{:.3}", t / 1000.0)))
    } else {
        format!("{} µs", trim(format!("{t:.2}")))
    }
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Draws a compiled graph's memory plan as SVG: one rectangle per intermediate, spanning the
/// steps it lives (across) and its bytes in the arena (down), so that rectangles that share a
/// height share memory at different times. `steps` names each step (the op and the line of its
/// call); hovering a rectangle shows its size, offset and steps.
///
/// # Examples
///
/// ```
/// use eddy::vm::plan::MemoryLayout;
/// let m = MemoryLayout::pack(vec![64, 128, 64], vec![(0, 1), (1, 2), (2, 3)]);
/// let steps = ["exp", "add", "mul", "neg"].map(String::from);
/// let svg = eddy::plot::plan_svg(&m, &steps);
/// assert!(svg.starts_with("<svg") && svg.contains("arena 192 bytes"));
/// assert_eq!(svg.matches("<rect class=\"t\"").count(), 3);
/// ```
pub fn plan_svg(memory: &eddy_vm::plan::MemoryLayout, steps: &[String]) -> String {
    const W: f64 = 1200.0;
    const LEFT: f64 = 90.0;
    const TOP: f64 = 50.0;
    const H: f64 = 420.0;
    let n = steps.len().max(1) as f64;
    let arena = memory.arena.max(1) as f64;
    let x = |step: usize| LEFT + step as f64 / n * (W - LEFT - 20.0);
    let y = |bytes: usize| TOP + bytes as f64 / arena * H;
    let palette = [
        "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
        "#9c755f",
    ];
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{}" font-family="DejaVu Sans, sans-serif" font-size="12">"#,
        TOP + H + 60.0
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="24" font-size="15">plan: {} steps, {} intermediates, arena {} bytes</text>"#,
        steps.len(),
        memory.sizes.len(),
        memory.arena
    );
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{H}" fill="none" stroke="#999"/>"##,
        W - LEFT - 20.0
    );
    for (k, (&size, &(first, last))) in memory.sizes.iter().zip(&memory.lifetimes).enumerate() {
        if size == 0 {
            continue;
        }
        let off = memory.offsets[k];
        let (x0, x1) = (x(first), x(last + 1));
        let (y0, y1) = (y(off), y(off + size));
        let _ = writeln!(
            s,
            r##"<rect class="t" x="{x0:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}" fill="{}" fill-opacity="0.8" stroke="#333" stroke-width="0.3"><title>t{k}: {size} bytes at {off}, steps {first} to {last} ({} .. {})</title></rect>"##,
            (x1 - x0).max(0.5),
            (y1 - y0).max(0.5),
            palette[k % palette.len()],
            xml(steps.get(first).map_or("", String::as_str)),
            xml(steps.get(last).map_or("", String::as_str)),
        );
    }
    let bottom = TOP + H;
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{}">step 0</text><text x="{}" y="{}" text-anchor="end">step {}</text>"#,
        bottom + 18.0,
        W - 20.0,
        bottom + 18.0,
        steps.len()
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">steps, in order (across); bytes of the arena (down)</text>"#,
        (LEFT + W) / 2.0,
        bottom + 40.0
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{TOP}" text-anchor="end" dy="10">0</text><text x="{}" y="{bottom}" text-anchor="end">{}</text>"#,
        LEFT - 6.0,
        LEFT - 6.0,
        memory.arena
    );
    s.push_str("</svg>\n");
    s
}
