//! PNG line charts for the rehearsal's report and the waiting room's sale report (plotters,
//! bitmap backend; feature `plots`). Text is drawn with the DejaVu Sans font shipped in
//! `common/assets/` (Bitstream Vera licence, next to it), so the
//! plots render on a machine without fontconfig or system fonts.

use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

static FONT: Once = Once::new();

fn register_font() {
    FONT.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../assets/DejaVuSans.ttf");
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, bytes);
    });
}

/// One named line: `(x seconds, y)` points.
pub type Line = (String, Vec<(f64, f64)>);

const COLOURS: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 0),
    RGBColor(128, 0, 0),
];

/// One chart of a stacked figure: a title, the y axis's label (with its unit) and its lines.
#[derive(Debug, Clone, Copy)]
pub struct Panel<'a> {
    /// Caption above the chart.
    pub title: &'a str,
    /// The y axis's label, unit included ("fans", "ms", "per minute").
    pub y_label: &'a str,
    /// The lines; x is in the unit of the figure's `x_label`.
    pub lines: &'a [Line],
}

/// Draws `lines` over time into a 1000×500 PNG at `path`, with a title and a y-axis label
/// (x: seconds since start).
pub fn line_chart(path: &Path, title: &str, y_label: &str, lines: &[Line]) -> anyhow::Result<()> {
    let panel = Panel {
        title,
        y_label,
        lines,
    };
    charts(path, "seconds since start", &[panel])
}

/// Draws `panels` stacked one above the other (1000 px wide, 500 px for one panel, 340 px each
/// for several) into a PNG at `path`, every panel's x axis labelled `x_label`.
///
/// Errors: the file cannot be written, or plotters fails to draw.
pub fn charts(path: &Path, x_label: &str, panels: &[Panel<'_>]) -> anyhow::Result<()> {
    register_font();
    let height = if panels.len() <= 1 {
        500
    } else {
        340 * panels.len() as u32
    };
    let root = BitMapBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE).map_err(dbg)?;
    for (area, panel) in root
        .split_evenly((panels.len().max(1), 1))
        .iter()
        .zip(panels)
    {
        draw_panel(area, x_label, panel)?;
    }
    root.present().map_err(dbg)?;
    Ok(())
}

/// The same figure as [`charts`], as PNG bytes (drawn through a temporary file: plotters'
/// encoder writes files).
pub fn charts_png(x_label: &str, panels: &[Panel<'_>]) -> anyhow::Result<Vec<u8>> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("sale-chart-{}-{n}.png", std::process::id()));
    let drawn = charts(&path, x_label, panels).and_then(|()| Ok(std::fs::read(&path)?));
    let _ = std::fs::remove_file(&path);
    drawn
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

fn draw_panel(area: &Area<'_>, x_label: &str, panel: &Panel<'_>) -> anyhow::Result<()> {
    let points = || panel.lines.iter().flat_map(|(_, p)| p.iter());
    let x_max = points().map(|q| q.0).fold(1.0f64, f64::max);
    let y_max = points().map(|q| q.1).fold(1.0f64, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(panel.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(dbg)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(panel.y_label)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(dbg)?;
    for (i, (name, pts)) in panel.lines.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
            .map_err(dbg)?;
        // Markers too: a line of one point (a sale shorter than a minute) still shows.
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(dbg)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(dbg)?;
    Ok(())
}

/// plotters' errors carry no `std::error::Error` for every backend: their Debug text.
fn dbg(e: impl std::fmt::Debug) -> anyhow::Error {
    anyhow::anyhow!("{e:?}")
}

/// A per-second series as points (second index → x).
pub fn per_second(v: &[u64]) -> Vec<(f64, f64)> {
    v.iter()
        .enumerate()
        .map(|(i, &y)| (i as f64, y as f64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_png_with_text() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.png");
        let lines = vec![("a".to_string(), per_second(&[1, 3, 2, 5]))];
        line_chart(&p, "title", "per second", &lines).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
    }

    #[test]
    fn stacks_panels_into_png_bytes() {
        let a = vec![("a".to_string(), per_second(&[1, 3, 2, 5]))];
        let b = vec![("b".to_string(), per_second(&[4, 4, 0]))];
        let png = charts_png(
            "minutes",
            &[
                Panel {
                    title: "one",
                    y_label: "fans",
                    lines: &a,
                },
                Panel {
                    title: "two",
                    y_label: "ms",
                    lines: &b,
                },
            ],
        )
        .unwrap();
        assert_eq!(&png[1..4], b"PNG");
        // Height 680 (two panels of 340) in the IHDR chunk, bytes 20..24.
        assert_eq!(
            u32::from_be_bytes([png[20], png[21], png[22], png[23]]),
            680
        );
    }
}
