//! Dense marks as one PNG image inside an SVG: hundreds of thousands of
//! `<circle>` or `<rect>` elements made a `--reuse` run's HTML report 28 MB,
//! a long loop's 72 MB and a 150-rank job's map 2.6 MB, while a PNG of the
//! plotting area is bounded by its pixels. Dots are painted as plotters draws
//! a circle of radius 1 (a 3-pixel cross), blended over those before them, so
//! the picture is the same; the SVG marks the layer's place with a text
//! element that is then replaced ([`LayerSlot`]).

use base64::Engine;
use plotters::style::RGBColor;

/// Text drawn where the layer goes, replaced by it afterwards. Text a user
/// names (programs, objects, regions) is drawn before it, and only axis and
/// legend labels after, so the last occurrence is the marker.
pub(super) const MARKER: &str = "memlens-pixel-layer-7c1f";

pub(super) struct PixelLayer {
    x0: i32,
    y0: i32,
    width: usize,
    height: usize,
    /// Premultiplied RGBA, 0..1.
    pixels: Vec<[f32; 4]>,
}

impl PixelLayer {
    /// A transparent layer over the pixels `x` by `y` of the image.
    pub(super) fn new(x: std::ops::Range<i32>, y: std::ops::Range<i32>) -> PixelLayer {
        let (width, height) = (
            (x.end - x.start).max(1) as usize,
            (y.end - y.start).max(1) as usize,
        );
        PixelLayer {
            x0: x.start,
            y0: y.start,
            width,
            height,
            pixels: vec![[0.0; 4]; width * height],
        }
    }

    /// A dot centred on image pixel (x, y), `opacity` over what is there.
    pub(super) fn dot(&mut self, (x, y): (i32, i32), color: RGBColor, opacity: f32) {
        for (dx, dy) in [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)] {
            self.blend(x + dx, y + dy, color, opacity);
        }
    }

    /// The image pixels from `a` to `b` (corners, either order, both
    /// included) filled with `color`, opaque.
    pub(super) fn fill(&mut self, a: (i32, i32), b: (i32, i32), color: RGBColor) {
        for y in a.1.min(b.1)..=a.1.max(b.1) {
            for x in a.0.min(b.0)..=a.0.max(b.0) {
                self.blend(x, y, color, 1.0);
            }
        }
    }

    /// `color` at `opacity` over image pixel (x, y), if it is on the layer.
    fn blend(&mut self, x: i32, y: i32, color: RGBColor, opacity: f32) {
        let (px, py) = (x - self.x0, y - self.y0);
        if px < 0 || py < 0 || px as usize >= self.width || py as usize >= self.height {
            return;
        }
        let src = [
            f32::from(color.0) / 255.0 * opacity,
            f32::from(color.1) / 255.0 * opacity,
            f32::from(color.2) / 255.0 * opacity,
            opacity,
        ];
        let dst = &mut self.pixels[py as usize * self.width + px as usize];
        for (d, s) in dst.iter_mut().zip(src) {
            *d = s + *d * (1.0 - opacity);
        }
    }

    /// The layer as an SVG `<image>` of its PNG.
    fn svg_image(&self) -> String {
        let mut rgba = Vec::with_capacity(self.pixels.len() * 4);
        for &[r, g, b, a] in &self.pixels {
            let straight = |c: f32| {
                if a > 0.0 {
                    (c / a * 255.0).round() as u8
                } else {
                    0
                }
            };
            rgba.extend([
                straight(r),
                straight(g),
                straight(b),
                (a * 255.0).round() as u8,
            ]);
        }
        let mut png = Vec::new();
        let mut encoder = png::Encoder::new(&mut png, self.width as u32, self.height as u32);
        encoder.set_color(png::ColorType::Rgba);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Best);
        // Writing to memory fails only on a size the layer never has.
        let written = encoder
            .write_header()
            .and_then(|mut w| w.write_image_data(&rgba));
        if written.is_err() {
            return String::new();
        }
        format!(
            r#"<image x="{}" y="{}" width="{}" height="{}" href="data:image/png;base64,{}"/>"#,
            self.x0,
            self.y0,
            self.width,
            self.height,
            base64::engine::general_purpose::STANDARD.encode(&png)
        )
    }

    /// Puts the layer where the marker text was drawn.
    pub(super) fn replace_marker(&self, svg: &mut String) {
        let Some(at) = svg.rfind(MARKER) else {
            return;
        };
        let start = svg[..at].rfind("<text").unwrap_or(at);
        let end = svg[at..]
            .find("</text>")
            .map_or(at + MARKER.len(), |e| at + e + "</text>".len());
        svg.replace_range(start..end, &self.svg_image());
    }
}

/// The layer of a plot drawn as SVG (none for PNG, whose pixels bound it
/// already), made while drawing when its marks are many.
pub(super) struct LayerSlot(Option<std::cell::RefCell<Option<PixelLayer>>>);

impl LayerSlot {
    pub(super) fn for_image(out: &super::Image) -> LayerSlot {
        LayerSlot(out.is_svg().then(Default::default))
    }

    /// The layer to paint `marks` into, over the pixels `x` by `y`, when the
    /// plot is SVG and the marks are more than MAX_MARKS; else None (draw
    /// them as elements).
    pub(super) fn paint(
        &self,
        marks: usize,
        x: std::ops::Range<i32>,
        y: std::ops::Range<i32>,
    ) -> Option<std::cell::RefMut<'_, PixelLayer>> {
        let slot = self.0.as_ref().filter(|_| marks > MAX_MARKS)?;
        Some(std::cell::RefMut::map(slot.borrow_mut(), |l| {
            l.get_or_insert_with(|| PixelLayer::new(x, y))
        }))
    }

    /// Whether a layer was painted (its marker must then be drawn).
    pub(super) fn painted(&self) -> bool {
        self.0.as_ref().is_some_and(|l| l.borrow().is_some())
    }

    /// Puts the painted layer in the SVG text, where its marker is.
    pub(super) fn replace_marker(&self, svg: &mut String) {
        if let Some(layer) = self.0.as_ref().and_then(|l| l.borrow_mut().take()) {
            layer.replace_marker(svg);
        }
    }
}

/// Draws the marker text where the painted layer is to go.
pub(super) fn draw_marker<DB: plotters::prelude::DrawingBackend>(
    chart: &mut super::Chart<'_, DB>,
) -> Result<(), super::PlotError>
where
    DB::ErrorType: 'static,
{
    let (x, y) = (chart.x_range().start, chart.y_range().start);
    chart
        .draw_series(std::iter::once(plotters::prelude::Text::new(
            MARKER,
            (x, y),
            ("sans-serif", 1),
        )))
        .map(|_| ())
        .map_err(super::drawing_error)
}

/// Above this many marks an SVG plot paints them into one PNG layer.
const MAX_MARKS: usize = 20_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_blend_and_the_layer_replaces_its_marker() {
        let mut layer = PixelLayer::new(10..20, 5..15);
        let blue = RGBColor(31, 119, 180);
        layer.dot((12, 7), blue, 0.5);
        let at =
            |layer: &PixelLayer, x: i32, y: i32| layer.pixels[((y - 5) * 10 + x - 10) as usize];
        assert_eq!(at(&layer, 12, 7)[3], 0.5);
        assert_eq!(at(&layer, 13, 7)[3], 0.5);
        assert_eq!(at(&layer, 13, 8)[3], 0.0, "a cross, not a square");
        // Two dots on one pixel are as dark as two circles drawn over each other.
        layer.dot((12, 7), blue, 0.5);
        assert_eq!(at(&layer, 12, 7)[3], 0.75);
        assert!((at(&layer, 12, 7)[0] / at(&layer, 12, 7)[3] - 31.0 / 255.0).abs() < 1e-6);
        // Dots past the edge are clipped, not wrapped.
        layer.dot((9, 5), blue, 0.5);
        assert_eq!(at(&layer, 10, 5)[3], 0.5);
        assert_eq!(at(&layer, 19, 5)[3], 0.0);
        // A filled cell is opaque over what was there.
        layer.fill((15, 9), (14, 10), RGBColor(255, 0, 0));
        assert_eq!(at(&layer, 14, 9), [1.0, 0.0, 0.0, 1.0]);
        assert_eq!(at(&layer, 15, 10), [1.0, 0.0, 0.0, 1.0]);
        assert_eq!(at(&layer, 16, 10)[3], 0.0);
        // A program named like the marker keeps its title: the marker is
        // the last such text.
        let title = format!("<text x=\"0\">\nrun of {MARKER}\n</text>");
        let mut svg = format!("<svg>{title}<text x=\"1\">\n{MARKER}\n</text><rect/></svg>");
        layer.replace_marker(&mut svg);
        let image = format!("<svg>{title}<image x=\"10\" y=\"5\" width=\"10\" height=\"10\" href=\"data:image/png;base64,iVBOR");
        assert!(svg.starts_with(&image), "{svg}");
        assert!(svg.ends_with("\"/><rect/></svg>"), "{svg}");
    }
}
