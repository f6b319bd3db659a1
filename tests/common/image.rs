//! What a plot shows, read back from the image: an SVG's texts and series
//! (with its axes, to turn pixels into values), and a PNG's pixels.
#![allow(dead_code)]

use std::path::Path;

pub struct Text {
    pub x: f64,
    pub y: f64,
    pub anchor: String,
    pub text: String,
}

/// A drawn line or filled polygon (a data series, not an axis, a tick or a
/// grid line).
pub struct Series {
    pub color: String,
    pub filled: bool,
    pub points: Vec<(f64, f64)>,
}

pub struct Svg {
    pub texts: Vec<Text>,
    pub series: Vec<Series>,
    pub circles: usize,
    /// Outlined boxes (legends), which cover what is drawn under them:
    /// (x, y, width, height).
    pub boxes: Vec<[f64; 4]>,
}

fn attribute<'a>(element: &'a str, name: &str) -> Option<&'a str> {
    let start = element.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = element[start..].find('"')?;
    Some(&element[start..start + len])
}

impl Svg {
    pub fn read(path: &Path) -> Svg {
        let svg = std::fs::read_to_string(path).unwrap();
        let mut out = Svg {
            texts: Vec::new(),
            series: Vec::new(),
            circles: 0,
            boxes: Vec::new(),
        };
        for element in svg.split('<').skip(1) {
            let tag = element.split([' ', '>', '/']).next().unwrap_or("");
            let number = |name: &str| attribute(element, name).unwrap().parse::<f64>().unwrap();
            match tag {
                "text" => out.texts.push(Text {
                    x: number("x"),
                    y: number("y"),
                    anchor: attribute(element, "text-anchor").unwrap_or("").to_owned(),
                    text: element[element.find('>').unwrap() + 1..].trim().to_owned(),
                }),
                "circle" => out.circles += 1,
                "rect" if attribute(element, "fill") == Some("none") => {
                    out.boxes.push(["x", "y", "width", "height"].map(number));
                }
                "polyline" | "polygon" => {
                    let points: Vec<(f64, f64)> = attribute(element, "points")
                        .unwrap()
                        .split_whitespace()
                        .map(|p| {
                            let (x, y) = p.split_once(',').unwrap();
                            (x.parse().unwrap(), y.parse().unwrap())
                        })
                        .collect();
                    let filled = tag == "polygon";
                    let color = attribute(element, if filled { "fill" } else { "stroke" }).unwrap();
                    // Axes, ticks and grid lines are black or grey segments.
                    let grid = color == "#000000" || attribute(element, "opacity") != Some("1");
                    if points.len() > 2 || (points.len() == 2 && !grid) {
                        out.series.push(Series {
                            color: color.to_owned(),
                            filled,
                            points,
                        });
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Whether a point lies in no legend box.
    pub fn uncovered(&self, (x, y): (f64, f64)) -> bool {
        !self
            .boxes
            .iter()
            .any(|b| x >= b[0] && x <= b[0] + b[2] && y >= b[1] && y <= b[1] + b[3])
    }

    pub fn has_text(&self, text: &str) -> bool {
        self.texts.iter().any(|t| t.text == text)
    }

    /// The lines of `color` (as plotters writes it: "#1F77B4"), not counting
    /// the legend's samples of them.
    pub fn lines(&self, color: &str) -> Vec<&Series> {
        self.series
            .iter()
            .filter(|s| !s.filled && s.color == color)
            .filter(|s| s.points.iter().any(|&p| self.uncovered(p)))
            .collect()
    }

    /// The value axis of the first chart: its numeric tick labels (right
    /// aligned left of the chart) fitted as value = a + b * y.
    pub fn y_value(&self, y: f64) -> f64 {
        let ticks: Vec<(f64, f64)> = self
            .texts
            .iter()
            .filter(|t| t.anchor == "end")
            .filter_map(|t| Some((t.y, t.text.parse::<f64>().ok()?)))
            .collect();
        fit(&ticks, y)
    }

    /// The time axis of the first chart: its numeric tick labels centred below
    /// it (the lowest row of them).
    pub fn x_value(&self, x: f64) -> f64 {
        let numeric: Vec<&Text> = self
            .texts
            .iter()
            .filter(|t| t.anchor == "middle" && t.text.parse::<f64>().is_ok())
            .collect();
        let row = numeric.iter().map(|t| t.y).fold(f64::MAX, f64::min);
        let ticks: Vec<(f64, f64)> = numeric
            .iter()
            .filter(|t| t.y == row)
            .map(|t| (t.x, t.text.parse().unwrap()))
            .collect();
        fit(&ticks, x)
    }
}

/// Least-squares line through (pixel, value) ticks, evaluated at `at`.
fn fit(ticks: &[(f64, f64)], at: f64) -> f64 {
    assert!(ticks.len() >= 2, "an axis needs two numeric ticks");
    let n = ticks.len() as f64;
    let (mx, my) = (
        ticks.iter().map(|t| t.0).sum::<f64>() / n,
        ticks.iter().map(|t| t.1).sum::<f64>() / n,
    );
    let b = ticks.iter().map(|t| (t.0 - mx) * (t.1 - my)).sum::<f64>()
        / ticks.iter().map(|t| (t.0 - mx).powi(2)).sum::<f64>();
    my + b * (at - mx)
}

/// A PNG's size and RGB pixels.
pub struct Png {
    pub width: usize,
    pub height: usize,
    rgb: Vec<u8>,
}

impl Png {
    pub fn read(path: &Path) -> Png {
        let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!(info.color_type, png::ColorType::Rgb, "{}", path.display());
        buf.truncate(info.buffer_size());
        Png {
            width: info.width as usize,
            height: info.height as usize,
            rgb: buf,
        }
    }

    pub fn pixel(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.width + x) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// The share of a line's points not under a legend where the PNG has the
    /// line's colour, or one of the lines drawn over it, within 2 pixels.
    pub fn share_drawn(&self, svg: &Svg, line: &Series, drawn_over: &[&str]) -> f64 {
        let points: Vec<&(f64, f64)> = line.points.iter().filter(|&&p| svg.uncovered(p)).collect();
        let colors: Vec<&str> = std::iter::once(line.color.as_str())
            .chain(drawn_over.iter().copied())
            .collect();
        let drawn = points
            .iter()
            .filter(|p| colors.iter().any(|c| self.has_near(p.0, p.1, 2, c)))
            .count();
        drawn as f64 / points.len().max(1) as f64
    }

    /// Whether a pixel within `radius` of (x, y) has the colour "#RRGGBB".
    pub fn has_near(&self, x: f64, y: f64, radius: usize, color: &str) -> bool {
        let want: Vec<u8> = (0..3)
            .map(|i| u8::from_str_radix(&color[1 + 2 * i..3 + 2 * i], 16).unwrap())
            .collect();
        let (x, y) = (x.round() as usize, y.round() as usize);
        (y.saturating_sub(radius)..=(y + radius).min(self.height - 1)).any(|py| {
            (x.saturating_sub(radius)..=(x + radius).min(self.width - 1))
                .any(|px| self.pixel(px, py) == [want[0], want[1], want[2]])
        })
    }
}

/// The capacity plot of a profile, drawn as `svg` and `png`, shows what its
/// JSON `report` says: the resident set's and the live heap's peaks at their
/// height, through the whole run, the top objects named in the legend; each
/// stacked band at most a few points per pixel column; and the PNG has the
/// lines' colours where the SVG drew them.
pub fn assert_capacity_plot(report: &serde_json::Value, svg: &Path, png: &Path) {
    let mib = |b: &serde_json::Value| b.as_f64().unwrap() / (1u64 << 20) as f64;
    let image = Svg::read(svg);
    let pixel = (image.y_value(0.0) - image.y_value(1.0)).abs();
    let seconds = (image.x_value(1.0) - image.x_value(0.0)).abs();
    let timeline = &report["timeline"];
    let last_tick = timeline["time_ns"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .as_f64()
        .unwrap()
        / 1e9;
    for (color, name, peak) in [
        (
            "#000000",
            "resident set (measured, /proc)",
            &report["peak"]["total_rss_bytes"],
        ),
        (
            "#FF0000",
            "live heap (measured, exact counters)",
            &report["peak"]["heap_bytes"],
        ),
    ] {
        assert!(image.has_text(name), "{name}");
        let line = image.lines(color);
        assert_eq!(line.len(), 1, "{name}");
        let points = &line[0].points;
        let top = points.iter().map(|p| p.1).fold(f64::MAX, f64::min);
        let drawn = image.y_value(top);
        assert!(
            (drawn - mib(peak)).abs() <= 1.5 * pixel,
            "{name}: {drawn} MiB drawn, peak {}",
            mib(peak)
        );
        let end = image.x_value(points.last().unwrap().0);
        assert!(
            (end - last_tick).abs() <= 1.5 * seconds,
            "{name} ends at {end} s, last tick {last_tick} s"
        );
        let png_image = Png::read(png);
        assert_eq!((png_image.width, png_image.height), (1200, 700));
        let share = png_image.share_drawn(&image, line[0], &["#FF0000"]);
        assert_eq!(share, 1.0, "{name}: {share} of its points drawn in the PNG");
    }
    for o in timeline["objects"].as_array().unwrap() {
        let name: String = o["name"].as_str().unwrap().chars().take(60).collect();
        assert!(image.has_text(&name), "legend lacks {name}");
    }
    for band in image.series.iter().filter(|s| s.filled) {
        assert!(
            band.points.len() <= 4 * 1200,
            "{} points in one band",
            band.points.len()
        );
    }
}
