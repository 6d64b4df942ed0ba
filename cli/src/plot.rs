//! `verbsim perf -a --plot FILE`: bandwidth and message rate against message
//! size, one line per clock (simulated, wall), as SVG or PNG (by the file's
//! extension). Text is drawn with a TrueType font: `VERBSIM_PLOT_FONT`, else
//! DejaVu Sans from Debian's `fonts-dejavu-core`.

use std::path::Path;

use plotters::prelude::*;

/// One message size's figures: (size, [(clock, Gb/s, Mpps)]).
pub(crate) type Point = (u32, Vec<(&'static str, f64, f64)>);

const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Registers a TrueType font as `sans-serif` once.
fn font() -> Result<(), String> {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let path = std::env::var("VERBSIM_PLOT_FONT")
            .ok()
            .or_else(|| {
                FONT_PATHS
                    .iter()
                    .find(|p| Path::new(p).exists())
                    .map(|p| (*p).to_owned())
            })
            .ok_or(
                "--plot needs a TrueType font: install fonts-dejavu-core or set VERBSIM_PLOT_FONT",
            )?;
        let bytes = std::fs::read(&path).map_err(|e| format!("--plot: font {path}: {e}"))?;
        // The font lives for the whole process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("--plot: {path} is not a TrueType font"))
    })
    .clone()
}

/// Checks, before any work starts, that [`plot`] can write `path`: its
/// extension, the font, and that the file can be written.
pub(crate) fn check(path: &Path) -> Result<(), String> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if !matches!(ext, "svg" | "png") {
        return Err(format!(
            "--plot {}: the file must end in .svg or .png",
            path.display()
        ));
    }
    font()?;
    crate::out::check_writable(path).map_err(|e| format!("--plot {}: {e}", path.display()))
}

/// Draws the chart of `points` to `path` (`.svg` or `.png`).
pub(crate) fn plot(path: &Path, title: &str, points: &[Point]) -> Result<(), String> {
    font()?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let size = (1200, 500);
    match ext {
        "svg" => draw(
            SVGBackend::new(path, size).into_drawing_area(),
            title,
            points,
        ),
        "png" => draw(
            BitMapBackend::new(path, size).into_drawing_area(),
            title,
            points,
        ),
        _ => Err(format!(
            "--plot {}: the file must end in .svg or .png",
            path.display()
        )),
    }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    points: &[Point],
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("--plot: {e}");
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(err)?;
    let (left, right) = root.split_horizontally(600);
    let max_size = points.iter().map(|p| p.0).max().unwrap_or(2).max(2);
    let clocks: Vec<&str> = points
        .first()
        .map(|p| p.1.iter().map(|c| c.0).collect())
        .unwrap_or_default();
    for (area, what, pick) in [
        (&left, "bandwidth [Gb/s]", 0usize),
        (&right, "message rate [Mpps]", 1usize),
    ] {
        let value = |c: &(&str, f64, f64)| if pick == 0 { c.1 } else { c.2 };
        let top = points
            .iter()
            .flat_map(|p| p.1.iter().map(value))
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max)
            .max(1e-6)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((1u32..max_size * 2).log_scale(), 0.0..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("message size [bytes]")
            .y_desc(what)
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        for (i, clock) in clocks.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let line: Vec<(u32, f64)> = points
                .iter()
                .filter_map(|p| p.1.iter().find(|c| c.0 == *clock).map(|c| (p.0, value(c))))
                .filter(|(_, v)| v.is_finite())
                .collect();
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(*clock)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(
                    line.into_iter()
                        .map(|(x, y)| Circle::new((x, y), 3, color.filled())),
                )
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)
}
