//! A dense scatter's dots as one PNG image inside the SVG: hundreds of
//! thousands of `<circle>` elements made a `--reuse` run's HTML report 28 MB
//! and a long loop's 72 MB, while a PNG of the plotting area is bounded by its
//! pixels. Each dot is painted as plotters draws a circle of radius 1 (a
//! 3-pixel cross), blended over the dots before it, so the picture is the
//! same; the SVG marks its place with a text element that is then replaced.

use base64::Engine;
use plotters::style::RGBColor;

/// Text drawn where the layer goes, replaced by it afterwards.
pub(super) const MARKER: &str = "memlens-dot-layer";

pub(super) struct DotLayer {
    x0: i32,
    y0: i32,
    width: usize,
    height: usize,
    /// Premultiplied RGBA, 0..1.
    pixels: Vec<[f32; 4]>,
}

impl DotLayer {
    /// A transparent layer over the pixels `x` by `y` of the image.
    pub(super) fn new(x: std::ops::Range<i32>, y: std::ops::Range<i32>) -> DotLayer {
        let (width, height) = (
            (x.end - x.start).max(1) as usize,
            (y.end - y.start).max(1) as usize,
        );
        DotLayer {
            x0: x.start,
            y0: y.start,
            width,
            height,
            pixels: vec![[0.0; 4]; width * height],
        }
    }

    /// A dot centred on image pixel (x, y), `opacity` over what is there.
    pub(super) fn dot(&mut self, (x, y): (i32, i32), color: RGBColor, opacity: f32) {
        let src = [
            f32::from(color.0) / 255.0 * opacity,
            f32::from(color.1) / 255.0 * opacity,
            f32::from(color.2) / 255.0 * opacity,
            opacity,
        ];
        for (dx, dy) in [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)] {
            let (px, py) = (x + dx - self.x0, y + dy - self.y0);
            if px < 0 || py < 0 || px as usize >= self.width || py as usize >= self.height {
                continue;
            }
            let dst = &mut self.pixels[py as usize * self.width + px as usize];
            for (d, s) in dst.iter_mut().zip(src) {
                *d = s + *d * (1.0 - opacity);
            }
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
        let Some(at) = svg.find(MARKER) else {
            return;
        };
        let start = svg[..at].rfind("<text").unwrap_or(at);
        let end = svg[at..]
            .find("</text>")
            .map_or(at + MARKER.len(), |e| at + e + "</text>".len());
        svg.replace_range(start..end, &self.svg_image());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_blend_and_the_layer_replaces_its_marker() {
        let mut layer = DotLayer::new(10..20, 5..15);
        let blue = RGBColor(31, 119, 180);
        layer.dot((12, 7), blue, 0.5);
        let at = |layer: &DotLayer, x: i32, y: i32| layer.pixels[((y - 5) * 10 + x - 10) as usize];
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
        let mut svg = format!("<svg><text x=\"1\">\n{MARKER}\n</text><rect/></svg>");
        layer.replace_marker(&mut svg);
        assert!(svg.starts_with("<svg><image x=\"10\" y=\"5\" width=\"10\" height=\"10\" href=\"data:image/png;base64,iVBOR"));
        assert!(svg.ends_with("\"/><rect/></svg>"), "{svg}");
    }
}
